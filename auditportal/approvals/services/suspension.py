"""An approval (or a pending request) suspended because what it rests on no longer stands: the evidence
was retired (the audits and datasets apps' signals), or, later, monitoring found a problem. One service
for every cause: a record (ApprovalSuspension) and an event; the gate answers ``approved: false`` with
the reason; a new review request is how a model is approved again (docs/approvals.md)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.approvals.models import OPEN_STATES, ApprovalSuspension, RequestState, ReviewRequest
from auditportal.approvals.rules import IllegalTransition
from auditportal.approvals.services.common import (
    MAIL_DECIDED_TASK,
    TAG_CHECKPOINT_TASK,
    _locked,
    _move,
    _required,
)
from auditportal.audits.models import PredictionAudit
from auditportal.datasets.models import DatasetVersion
from auditportal.outbox.services import task_enqueue

# What the gate and the request page say about how a suspended approval comes back.
SUSPENSION_NEXT = (
    "A new review request for this model, resting on evidence that stands, is how it is approved again; "
    "a suspended request stays suspended."
)


def approval_suspend(*, request: ReviewRequest, reason: str, by: User | None, cause: dict[str, Any]) -> ReviewRequest:
    """Suspend ``request`` (draft, submitted, in review or approved): it becomes ``suspended``, a final
    state, with a record of ``reason`` (what people read), ``cause`` (what happened, as data: ``kind``
    and the ids involved) and ``by`` (who caused it; None for the system), and an event. An approved
    request's gate answer turns to ``approved: false`` with the reason, the requester is told, and a
    trial's checkpoint is tagged again. Runs in the caller's transaction when there is one."""
    reason = _required(reason, "reason")
    with transaction.atomic():
        request = _locked(request)
        if request.state not in OPEN_STATES:
            allowed = ", ".join(RequestState(state).label.lower() for state in OPEN_STATES)
            raise IllegalTransition(
                f"Review request #{request.pk} is {request.get_state_display().lower()}: only a request that is "
                f"{allowed} can be suspended.",
                field="state",
            )
        before = RequestState(request.state)
        suspension = ApprovalSuspension.objects.create(
            request=request, round=request.round, state_before=before, reason=reason, cause=cause, suspended_by=by
        )
        _move(
            request,
            by,
            RequestState.SUSPENDED,
            Verb.REVIEW_REQUEST_SUSPENDED,
            {"suspension": suspension.pk, "round": request.round, "reason": reason, "cause": cause},
        )
        if before != RequestState.DRAFT:
            task_enqueue(name=MAIL_DECIDED_TASK, args=[request.pk, Verb.REVIEW_REQUEST_SUSPENDED.value])
        if before == RequestState.APPROVED and request.trial_id is not None:
            task_enqueue(name=TAG_CHECKPOINT_TASK, args=[request.pk])
    return request


def approvals_suspend_for_audit(*, audit: PredictionAudit, by: User | None, reason: str) -> list[ReviewRequest]:
    """``audit`` was retired: suspend every open or approved request about it or resting on its document."""
    requests = _resting_on(Q(prediction_audit=audit) | Q(documents__prediction_audit=audit))
    return [
        approval_suspend(
            request=request,
            reason=f"prediction audit #{audit.pk}, which it rests on, was retired by {_name(by)}: {reason}",
            by=by,
            cause={"kind": "prediction_audit_retired", "id": audit.pk},
        )
        for request in requests
    ]


def approvals_suspend_for_dataset_version(
    *, version: DatasetVersion, by: User | None, reason: str
) -> list[ReviewRequest]:
    """``version`` was retired: suspend every open or approved request about a trial trained on it."""
    requests = _resting_on(Q(trial__experiment__dataset_version=version))
    return [
        approval_suspend(
            request=request,
            reason=(
                f"dataset version {version.dataset.name} v{version.number}, on which {request.subject_label} was "
                f"trained, was retired by {_name(by)}: {reason}"
            ),
            by=by,
            cause={"kind": "dataset_version_retired", "id": version.pk},
        )
        for request in requests
    ]


def _resting_on(condition: Q) -> list[ReviewRequest]:
    ids = ReviewRequest.objects.filter(condition, state__in=OPEN_STATES).values_list("pk", flat=True).distinct()
    return list(ReviewRequest.objects.filter(pk__in=list(ids)).select_related("trial__experiment").order_by("id"))


def _name(user: User | None) -> str:
    return user.username if user is not None else "the system"
