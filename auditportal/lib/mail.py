"""The portal's mail: one message per person, sent after the change it tells of has committed (the
outbox's tasks call it), never undoing or hiding that change when the mail server fails."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.core.mail import EmailMessage, get_connection

logger = logging.getLogger(__name__)

SUBJECT_PREFIX = "[Bias audit]"


def mail_send(*, subject: str, body: str, addresses: Iterable[str]) -> int:
    """Send ``subject`` and ``body`` to each address in a message of its own (nobody sees the others'
    addresses); how many went out. A mail server's failure is logged and counts as none sent."""
    messages = [EmailMessage(subject=f"{SUBJECT_PREFIX} {subject}", body=body, to=[address]) for address in addresses]
    if not messages:
        return 0
    try:
        with get_connection() as connection:
            return int(connection.send_messages(messages) or 0)
    except Exception:
        logger.exception("could not send %r to %d recipient(s)", subject, len(messages))
        return 0
