from __future__ import annotations

from typing import Any

from django.db import models, transaction

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb


def event_record(
    *,
    actor: User | None,
    verb: Verb,
    target: models.Model,
    data: dict[str, Any] | None = None,
) -> Event:
    if not transaction.get_connection().in_atomic_block:
        # The trail is only trustworthy if it commits or rolls back together with the change.
        raise RuntimeError("event_record must run inside the transaction that makes the change")
    return Event.objects.create(
        actor=actor,
        verb=verb,
        target_type=target._meta.label_lower,
        target_id=str(target.pk),
        data=data or {},
    )
