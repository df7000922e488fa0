"""What the approvals services share: the error users get, and reading, locking and moving a request."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from django.utils import timezone

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.approvals.models import RequestState, ReviewRequest, VoteChoice
from auditportal.evidence.models import VerdictDocument
from auditportal.fairness.documents.findings import Finding, document_findings
from auditportal.fairness.errors import UserError

# The approvals' own tasks, as approvals/tasks.py registers them. The services queue them by name
# through the outbox (tasks.py imports the services, so the services do not import it).
MAIL_SUBMITTED_TASK: Final = "approvals.mail_request_submitted"
MAIL_DECIDED_TASK: Final = "approvals.mail_request_decided"
TAG_CHECKPOINT_TASK: Final = "approvals.tag_checkpoint"


class ApprovalError(UserError):
    """Something about the request, vote or waiver the user must fix; ``field`` names it."""


def _required(value: str, field: str) -> str:
    value = (value or "").strip()
    if not value:
        raise ApprovalError(f"The {field.replace('_', ' ')} is required.", field=field)
    return value


def _choice(choice: str) -> VoteChoice:
    try:
        return VoteChoice(choice)
    except ValueError:
        raise ApprovalError(f"Choose approve or reject, not {choice!r}.", field="choice") from None


def _document_hashes(documents: Any) -> list[str]:
    return sorted(document.sha256 for document in documents)


def _findings(documents: Sequence[VerdictDocument]) -> list[Finding]:
    found: list[Finding] = []
    for document in documents:
        found.extend(document_findings(document.document, sha256=document.sha256))
    return found


_RELATED = ("requested_by", "policy", "prediction_audit", "trial__experiment__dataset_version__dataset")


def _fresh(request: ReviewRequest) -> ReviewRequest:
    return ReviewRequest.objects.select_related(*_RELATED).get(pk=request.pk)


def _locked(request: ReviewRequest) -> ReviewRequest:
    """The request re-read under a row lock: concurrent transitions and votes queue. Services work on
    this copy and return it; the caller's instance is not refreshed."""
    return ReviewRequest.objects.select_for_update(of=("self",)).select_related(*_RELATED).get(pk=request.pk)


def _move(
    request: ReviewRequest,
    actor: User | None,
    state: RequestState,
    verb: Verb,
    data: dict[str, Any],
    *,
    fields: Sequence[str] = (),
) -> None:
    before = request.state
    request.state = state
    request.state_changed_at = timezone.now()
    request.save(update_fields=["state", "state_changed_at", "round", "revoked_at", "revoked_reason", *fields])
    event_record(actor=actor, verb=verb, target=request, data={"from": before, "to": state.value, **data})
