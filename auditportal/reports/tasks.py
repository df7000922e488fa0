from __future__ import annotations

from typing import Any

from auditportal.accounts.models import User
from auditportal.celery import app
from auditportal.fairness.report_context import ReportContext
from auditportal.reports import services


@app.task(name="reports.generate", acks_late=True)  # type: ignore[untyped-decorator]
def report_generate_task(context: dict[str, Any], actor_id: int | None = None) -> int:
    """Render, certify and store the report of ``context`` (ReportContext.as_json); its id. Idempotent:
    a context already generated returns its report, so a killed worker's retry does no harm."""
    actor = User.objects.filter(pk=actor_id).first() if actor_id is not None else None
    return services.report_generate(context=ReportContext.from_json(context), actor=actor).pk
