from __future__ import annotations

from typing import Any

from celery.signals import worker_process_init

from auditportal.accounts.models import User
from auditportal.celery import app
from auditportal.fairness.documents.report_context import ReportContext
from auditportal.reports import figures, heads, services


@worker_process_init.connect  # type: ignore[untyped-decorator]
def _warm_figure_export(**_: Any) -> None:
    # Only worker processes render reports: they keep a warm Chromium for the figures' SVG export,
    # started by the first report that draws (a worker that never draws starts no browser: a few
    # seconds and about 1 GB saved). Importing this module elsewhere (a web process queuing a task)
    # connects, but never fires, this.
    figures.keep_warm_export()


@app.task(name="reports.generate", acks_late=True)  # type: ignore[untyped-decorator]
def report_generate_task(
    context: dict[str, Any],
    actor_id: int | None = None,
    review_request_id: int | None = None,
    with_figures: bool = False,
) -> int:
    """Render, certify and store the report of ``context`` (ReportContext.as_json); its id. Idempotent:
    a context (or a review request's decision) already generated returns its report, so a killed
    worker's retry does no harm. ``with_figures``: the documents' figures are drawn here, in the worker."""
    actor = User.objects.filter(pk=actor_id).first() if actor_id is not None else None
    return services.report_generate(
        context=ReportContext.from_json(context),
        actor=actor,
        review_request_id=review_request_id,
        with_figures=with_figures,
    ).pk


@app.task(name="reports.export_log_head")  # type: ignore[untyped-decorator]
def export_log_head_task() -> str:
    """Beat, when AUDIT_LOG_HEAD_DIR is set: write the activity log's signed head there (one file per
    head, so a run that finds the head exported already writes nothing). The file's path, or ""."""
    path = heads.head_export_scheduled()
    return "" if path is None else str(path)
