from __future__ import annotations

from auditportal.celery import app
from auditportal.monitoring import services


@app.task(name="monitoring.reconcile_deployments", ignore_result=True)  # type: ignore[untyped-decorator]
def deployments_reconcile_task() -> int:
    """Beat's, every minute: roll back deployments whose serving model lost its approval."""
    return len(services.deployments_reconcile())
