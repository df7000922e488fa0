"""The approvals' Celery tasks. The services queue them by name through the outbox
(``approvals.services.common``: MAIL_SUBMITTED_TASK, MAIL_DECIDED_TASK, TAG_CHECKPOINT_TASK), so each
runs once its change has committed, and later if the broker was down then. Each takes ids and may run
twice (the outbox delivers at least once)."""

from __future__ import annotations

from auditportal.activity.models import Verb
from auditportal.approvals import notifications, services
from auditportal.celery import app
from auditportal.experiments.services import CheckpointMetadataError


class CheckpointUnreachable(Exception):
    """Transient: retried with backoff."""


@app.task(  # type: ignore[untyped-decorator]
    name="approvals.tag_checkpoint",
    acks_late=True,
    autoretry_for=(CheckpointUnreachable,),
    retry_backoff=5,
    retry_backoff_max=600,
    max_retries=10,
)
def review_request_tag_checkpoint_task(request_id: int) -> bool:
    """Write an approval or a revocation into the trial's checkpoint metadata; retried while the
    backend is unreachable. Idempotent: it writes the request's state as it is when it runs."""
    try:
        return services.review_request_tag_checkpoint(request_id=request_id)
    except CheckpointMetadataError as exc:
        if exc.transient:
            raise CheckpointUnreachable(str(exc)) from exc
        raise


@app.task(name="approvals.mail_request_submitted", acks_late=True)  # type: ignore[untyped-decorator]
def request_submitted_mail_task(request_id: int) -> int:
    """Tell the committee members who may vote that the request was submitted; how many messages went
    out. A mail server that fails is logged, not retried (mail is a courtesy: the request page and the
    activity log are the record)."""
    return notifications.request_submitted(request_id=request_id)


@app.task(name="approvals.mail_request_decided", acks_late=True)  # type: ignore[untyped-decorator]
def request_decided_mail_task(request_id: int, verb: str) -> int:
    """Tell the requester what was decided (``verb``: changes requested, approved, rejected, revoked)."""
    return notifications.request_decided(request_id=request_id, verb=Verb(verb))
