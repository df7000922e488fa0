from __future__ import annotations

from auditportal.celery import app
from auditportal.datasets import services


@app.task(name="datasets.profile_staged_upload", acks_late=True)  # type: ignore[untyped-decorator]
def staged_upload_profile_task(staged_id: str) -> None:
    services.staged_upload_profile(staged_id=staged_id)


@app.task(name="datasets.register_staged_upload", acks_late=True)  # type: ignore[untyped-decorator]
def staged_upload_register_task(staged_id: str) -> int | None:
    version = services.staged_upload_register_queued(staged_id=staged_id)
    return None if version is None else version.pk


@app.task(name="datasets.expire_staged_uploads", ignore_result=True)  # type: ignore[untyped-decorator]
def staged_uploads_expire_task() -> int:
    return services.staged_uploads_expire()
