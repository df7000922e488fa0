from __future__ import annotations

from auditportal.audits import services
from auditportal.celery import app


@app.task(name="audits.run_queued_prediction_audit", acks_late=True)  # type: ignore[untyped-decorator]
def prediction_audit_run_queued_task(queued_id: str) -> int | None:
    audit = services.prediction_audit_run_queued(queued_id=queued_id)
    return None if audit is None else audit.pk


@app.task(name="audits.prepare_whatif", acks_late=True)  # type: ignore[untyped-decorator]
def whatif_prepare_queued_task(whatif_id: int) -> int | None:
    item = services.whatif_prepare_queued(whatif_id=whatif_id)
    return None if item is None else item.pk
