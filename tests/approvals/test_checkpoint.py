"""An approval, and its revocation, written into the trial's checkpoint metadata after commit: locally a
JSON file beside the checkpoint, on a Determined cluster through the SDK (against the master stub)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.approvals import services, tasks
from auditportal.approvals.models import ReviewRequest
from auditportal.experiments.backends import determined as determined_backend
from auditportal.experiments.backends.local import checkpoint_metadata_path
from auditportal.experiments.models import Backend
from tests.approvals.conftest import handed_over, hashes, in_review, vote
from tests.stubs.determined_master import DeterminedMasterStub


def _approve_committing(request: ReviewRequest, reviewer: User, members: list[User], capture) -> list[list[Any]]:
    """Approve ``request``, the deciding vote committing; the tag tasks the outbox handed over."""
    in_review(request, reviewer)
    vote(request, members[0])
    with capture(execute=True):
        vote(request, members[1])
    return handed_over(services.TAG_CHECKPOINT_TASK)


def test_the_services_queue_the_approvals_tasks_by_their_registered_names() -> None:
    assert tasks.review_request_tag_checkpoint_task.name == services.TAG_CHECKPOINT_TASK
    assert tasks.request_submitted_mail_task.name == services.MAIL_SUBMITTED_TASK
    assert tasks.request_decided_mail_task.name == services.MAIL_DECIDED_TASK


def test_the_local_backend_writes_the_approval_beside_the_checkpoint_and_revocation_updates_it(
    fair_trial_request: ReviewRequest,
    carol: User,
    dave: User,
    frank: User,
    django_capture_on_commit_callbacks,
) -> None:
    request = fair_trial_request
    path = checkpoint_metadata_path(request.checkpoint)
    path.write_text(json.dumps({"owner": "team-credit"}))  # other keys are kept
    assert _approve_committing(request, carol, [dave, frank], django_capture_on_commit_callbacks) == [[request.pk]]
    assert tasks.review_request_tag_checkpoint_task(request.pk) is True
    expected = {"request": request.pk, "approved": True, "document_sha256": hashes(request)}
    assert json.loads(path.read_text()) == {"owner": "team-credit", "bias_audit": expected}
    assert Path(request.checkpoint).is_dir()
    assert path.parent == Path(request.checkpoint).parent
    with django_capture_on_commit_callbacks(execute=True):
        services.review_request_revoke(user=dave, request=request, reason="recalled")
    assert handed_over(services.TAG_CHECKPOINT_TASK) == [[request.pk], [request.pk]]
    tasks.review_request_tag_checkpoint_task(request.pk)
    assert json.loads(path.read_text())["bias_audit"]["approved"] is False
    tagged = Event.objects.filter(verb=Verb.REVIEW_REQUEST_CHECKPOINT_TAGGED).order_by("seq")
    assert [event.data["bias_audit"]["approved"] for event in tagged] == [True, False]


def test_a_prediction_audit_has_no_checkpoint_to_tag(audit_request: ReviewRequest) -> None:
    assert services.review_request_tag_checkpoint(request_id=audit_request.pk) is False


@pytest.fixture
def master(settings: SettingsWrapper) -> Iterator[DeterminedMasterStub]:
    stub = DeterminedMasterStub(username="portal", password="s3cret").start()
    settings.DET_MASTER = stub.url
    settings.DET_USER = "portal"
    settings.DET_PASSWORD = "s3cret"
    settings.DET_RETRY_ATTEMPTS = 1
    settings.DET_RETRY_BACKOFF_MS = 0
    settings.DET_REQUEST_TIMEOUT = 5
    determined_backend._sessions.clear()
    yield stub
    determined_backend._sessions.clear()
    stub.stop()


@pytest.fixture
def cluster_request(fair_trial_request: ReviewRequest, master: DeterminedMasterStub) -> ReviewRequest:
    """The same request, as if its trial had run on the cluster: the checkpoint is a UUID the master knows."""
    checkpoint = str(uuid.uuid4())
    assert fair_trial_request.trial is not None
    experiment = fair_trial_request.trial.experiment
    experiment.backend = Backend.DETERMINED
    experiment.save(update_fields=["backend"])
    ReviewRequest.objects.filter(pk=fair_trial_request.pk).update(checkpoint=checkpoint, model_identifier=checkpoint)
    master.add_checkpoint(checkpoint, trial_id=7).metadata = {"framework": "torch"}
    fair_trial_request.refresh_from_db()
    return fair_trial_request


def test_the_determined_backend_adds_the_approval_to_the_checkpoint_metadata_through_the_sdk(
    cluster_request: ReviewRequest,
    master: DeterminedMasterStub,
    carol: User,
    dave: User,
    frank: User,
    django_capture_on_commit_callbacks,
) -> None:
    request = cluster_request
    _approve_committing(request, carol, [dave, frank], django_capture_on_commit_callbacks)
    tasks.review_request_tag_checkpoint_task(request.pk)
    stored = master.checkpoints[request.checkpoint]
    expected = {"request": request.pk, "approved": True, "document_sha256": hashes(request)}
    assert stored.metadata == {"framework": "torch", "bias_audit": expected}
    assert master.count("GET", f"/api/v1/checkpoints/{request.checkpoint}") == 1
    services.review_request_revoke(user=frank, request=request, reason="recalled")
    tasks.review_request_tag_checkpoint_task(request.pk)
    assert stored.metadata["bias_audit"]["approved"] is False
    assert stored.metadata["framework"] == "torch"


def test_the_task_retries_while_the_master_is_unreachable(
    cluster_request: ReviewRequest, master: DeterminedMasterStub, carol: User, dave: User, frank: User
) -> None:
    request = cluster_request
    in_review(request, carol)
    vote(request, dave)
    vote(request, frank)
    master.fail_next(3, status=503)
    result = tasks.review_request_tag_checkpoint_task.apply(args=[request.pk])
    assert result.successful(), result.traceback
    assert result.get() is True
    assert master.checkpoints[request.checkpoint].metadata["bias_audit"]["approved"] is True
    assert Event.objects.filter(verb=Verb.REVIEW_REQUEST_CHECKPOINT_TAGGED).count() == 1


def test_an_unknown_checkpoint_is_a_permanent_error(
    cluster_request: ReviewRequest, master: DeterminedMasterStub, carol: User, dave: User, frank: User
) -> None:
    request = cluster_request
    in_review(request, carol)
    vote(request, dave)
    vote(request, frank)
    master.checkpoints.clear()
    from auditportal.experiments.services import CheckpointMetadataError

    with pytest.raises(CheckpointMetadataError) as failed:
        tasks.review_request_tag_checkpoint_task(request.pk)
    assert failed.value.transient is False
    assert "not found" in str(failed.value)
