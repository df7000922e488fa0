"""A task only the tests queue, registered by name like the apps' tasks.

The test settings list this module in CELERY_IMPORTS, so the real worker the end-to-end test starts
registers it too. Idempotent: it writes the same file each time it runs.
"""

from __future__ import annotations

from pathlib import Path

from auditportal.celery import app

RECORD_RUN = "tests.outbox.record_run"


class TaskFailed(Exception):
    pass


@app.task(name=RECORD_RUN, acks_late=True, ignore_result=True)  # type: ignore[untyped-decorator]
def record_run_task(path: str, text: str, *, fail: bool = False) -> None:
    if fail:
        raise TaskFailed(text)
    Path(path).write_text(text, encoding="utf-8")
