"""The approval written into the trial's checkpoint metadata (on Determined through the SDK; locally a
JSON file beside the checkpoint), by approvals.tasks after an approval or a revocation commits."""

from __future__ import annotations

from typing import Any, Final

from django.db import transaction

from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.approvals.models import RequestState, ReviewRequest
from auditportal.approvals.services.common import _document_hashes
from auditportal.experiments import services as experiment_services

CHECKPOINT_METADATA_KEY: Final = "bias_audit"


def checkpoint_metadata(request: ReviewRequest) -> dict[str, Any]:
    """What the checkpoint of an approved (or revoked) trial carries under ``bias_audit``."""
    return {
        "request": request.pk,
        "approved": request.state == RequestState.APPROVED,
        "document_sha256": _document_hashes(request.documents.all()),
    }


def review_request_tag_checkpoint(*, request_id: int) -> bool:
    """Write the request's current answer into its trial's checkpoint metadata (Determined: through the
    SDK; locally: a JSON file beside the checkpoint) and record it. False when there is nothing to tag
    (a prediction audit, or a request neither approved nor revoked).

    Called by approvals.tasks after an approval or a revocation commits; it writes the state as it is
    when it runs, so a retried or late task never writes an outdated answer. Raises
    experiments.services.CheckpointMetadataError (``transient`` says whether to retry).
    """
    request = ReviewRequest.objects.select_related("trial__experiment").get(pk=request_id)
    if request.trial is None or request.state not in (RequestState.APPROVED, RequestState.REVOKED):
        return False
    metadata = checkpoint_metadata(request)
    experiment_services.checkpoint_metadata_set(
        experiment=request.trial.experiment, checkpoint=request.checkpoint, key=CHECKPOINT_METADATA_KEY, value=metadata
    )
    with transaction.atomic():
        event_record(
            actor=None,
            verb=Verb.REVIEW_REQUEST_CHECKPOINT_TAGGED,
            target=request,
            data={"checkpoint": request.checkpoint, CHECKPOINT_METADATA_KEY: metadata},
        )
    return True
