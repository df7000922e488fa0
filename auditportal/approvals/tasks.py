from __future__ import annotations

from auditportal.approvals import services
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
