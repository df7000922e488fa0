from __future__ import annotations

from auditportal.celery import app
from auditportal.monitoring import services
from auditportal.monitoring.services.batches import BatchNotCounted


@app.task(name="monitoring.reconcile_deployments", ignore_result=True)  # type: ignore[untyped-decorator]
def deployments_reconcile_task() -> int:
    """Beat's, every minute: roll back deployments whose serving model lost its approval."""
    return len(services.deployments_reconcile())


@app.task(name="monitoring.count_batch", ignore_result=True, acks_late=True)  # type: ignore[untyped-decorator]
def batch_count_task(batch_id: int) -> str:
    """Count a posted batch and judge its window (idempotent: a counted batch is left as it is)."""
    return str(services.batch_count(batch_id=batch_id).state)


@app.task(  # type: ignore[untyped-decorator]
    name="monitoring.count_labels",
    ignore_result=True,
    acks_late=True,
    bind=True,
    autoretry_for=(BatchNotCounted,),
    retry_backoff=True,
    max_retries=20,
)
def labels_count_task(self: object, labels_id: int) -> str:
    """Apply late labels to their batch and judge its window again (retried until the batch is counted)."""
    return str(services.labels_count(labels_id=labels_id).state)
