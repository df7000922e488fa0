from __future__ import annotations

from typing import Any

from auditportal.celery import app
from auditportal.monitoring import notifications, services
from auditportal.monitoring.services import webhooks
from auditportal.monitoring.services.batches import BatchNotCounted


@app.task(name="monitoring.reconcile_deployments", ignore_result=True)  # type: ignore[untyped-decorator]
def deployments_reconcile_task() -> int:
    """Beat's, every minute: roll back deployments whose serving model lost its approval."""
    return len(services.deployments_reconcile())


@app.task(name="monitoring.webhook_deliver", bind=True, acks_late=True, ignore_result=True, max_retries=None)  # type: ignore[untyped-decorator]
def webhook_deliver_task(self: Any, delivery_id: int) -> str:
    """Post one webhook delivery; on no answer, a 5xx, 408 or 429, again after an exponential delay
    (services.webhooks.retry_delay), MAX_ATTEMPTS in all. Each attempt is logged on the delivery."""
    outcome = webhooks.webhook_delivery_attempt(delivery_id=delivery_id)
    if outcome is webhooks.Attempt.RETRY:
        # The row counts the attempts and ends them (MAX_ATTEMPTS); Celery's own count is not the bound.
        retries = int(self.request.retries or 0)
        raise self.retry(countdown=webhooks.retry_delay(retries + 1))
    return str(outcome.value)


@app.task(name="monitoring.mail_incident_opened", acks_late=True)  # type: ignore[untyped-decorator]
def incident_opened_mail_task(incident_id: int) -> int:
    """Tell the committee and the model's requester of a confirmed breach and what serves now."""
    return notifications.incident_opened(incident_id=incident_id)


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
