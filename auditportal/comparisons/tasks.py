from __future__ import annotations

from auditportal.celery import app
from auditportal.comparisons import trial_services


@app.task(name=trial_services.COMPARE_TRIALS_TASK, acks_late=True)  # type: ignore[untyped-decorator]
def comparison_compute_trials_task(comparison_id: int) -> int | None:
    comparison = trial_services.comparison_compute_trials(comparison_id=comparison_id)
    return None if comparison is None else comparison.pk
