from __future__ import annotations

from auditportal.attributions import services
from auditportal.celery import app


@app.task(name=services.ATTRIBUTE_TASK, acks_late=True)  # type: ignore[untyped-decorator]
def attribution_compute_task(attribution_id: int) -> int | None:
    attribution = services.attribution_compute(attribution_id=attribution_id)
    return None if attribution is None else attribution.pk
