from __future__ import annotations

from auditportal.celery import app
from auditportal.outbox import services


@app.task(name="outbox.deliver", ignore_result=True)  # type: ignore[untyped-decorator]
def outbox_deliver_task() -> int:
    """Hand the broker every task whose delivery after its commit failed (beat, every few seconds)."""
    return services.outbox_deliver_pending()


@app.task(name="outbox.purge", ignore_result=True)  # type: ignore[untyped-decorator]
def outbox_purge_task() -> int:
    return services.outbox_purge()
