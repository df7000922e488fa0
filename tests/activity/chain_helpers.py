"""Shared by the chain tests: write events through the service, and tamper with rows as a database owner could."""

from __future__ import annotations

from io import StringIO
from typing import Any

from django.core.management import call_command
from django.db import connection, transaction

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.activity.services import event_record


def record(actor: User | None, n: int = 1, **data: Any) -> list[Event]:
    events = []
    for index in range(n):
        with transaction.atomic():
            target = actor if actor is not None else User.objects.first()
            assert target is not None
            events.append(event_record(actor=actor, verb=Verb.ROLE_GRANTED, target=target, data={"i": index, **data}))
    return events


def tamper(sql: str, params: list[Any] | None = None) -> None:
    """Run raw SQL on activity_event past the PostgreSQL trigger (SQLite has none).

    On PostgreSQL the trigger is disabled (ALTER TABLE, as the table's owner could) inside the
    test's transaction, which rolls it back. Deferred foreign-key checks are run first: PostgreSQL
    refuses to alter a table with pending trigger events.
    """
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("ALTER TABLE activity_event DISABLE TRIGGER activity_event_append_only")
        cursor.execute(sql, params or [])
        if connection.vendor == "postgresql":
            cursor.execute("ALTER TABLE activity_event ENABLE TRIGGER activity_event_append_only")


def verify(*args: str) -> str:
    """What ``manage.py verify_audit_log ARGS`` prints (a failure raises CommandError)."""
    out = StringIO()
    call_command("verify_audit_log", *args, stdout=out)
    return out.getvalue()
