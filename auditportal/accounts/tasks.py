"""The accounts app's Celery task, queued by accounts.services through the outbox: it may run twice
(the outbox delivers at least once), which mails a second link that works like the first."""

from __future__ import annotations

from auditportal.accounts import notifications
from auditportal.celery import app


@app.task(name="accounts.mail_password_link", acks_late=True)  # type: ignore[untyped-decorator]
def password_link_mail_task(user_id: int, reason: str) -> int:
    return notifications.password_link(user_id=user_id, reason=reason)
