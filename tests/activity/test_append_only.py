"""On PostgreSQL the database itself refuses to change or remove an event, whatever the application does."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from auditportal.accounts.models import User
from auditportal.activity.models import Event
from auditportal.activity.selectors import chain_verify
from tests.activity.chain_helpers import record

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="the trigger exists on PostgreSQL only")


@pytest.mark.parametrize(
    ("operation", "sql"),
    [
        ("UPDATE", "UPDATE activity_event SET verb = 'prediction_audit.approved' WHERE id = %s"),
        ("UPDATE", "UPDATE activity_event SET data = '{}'::jsonb, hash = hash WHERE id = %s"),
        ("DELETE", "DELETE FROM activity_event WHERE id = %s"),
    ],
)
def test_raw_sql_cannot_update_or_delete_an_event(erin: User, operation: str, sql: str) -> None:
    [event] = record(erin)
    refused = rf"activity_event is append-only: {operation} refused"
    with pytest.raises(IntegrityError, match=refused), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, [event.pk])
    event.refresh_from_db()
    assert event.verb == "role.granted"
    assert chain_verify().ok


def test_the_orm_cannot_either(erin: User) -> None:
    [event] = record(erin)
    with pytest.raises(IntegrityError, match="append-only: DELETE refused"), transaction.atomic():
        Event.objects.filter(pk=event.pk).delete()
    with pytest.raises(IntegrityError, match="append-only: UPDATE refused"), transaction.atomic():
        Event.objects.filter(pk=event.pk).update(target_id="999")
    assert Event.objects.filter(pk=event.pk, target_id=str(erin.pk)).exists()


def test_truncate_is_refused(erin: User) -> None:
    record(erin, 2)
    count = Event.objects.count()
    for sql in ("TRUNCATE activity_event", "TRUNCATE activity_event RESTART IDENTITY CASCADE"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # else refused for the pending key checks
            with pytest.raises(IntegrityError, match="append-only: TRUNCATE refused"), transaction.atomic():
                cursor.execute(sql)
    assert Event.objects.count() == count
    assert chain_verify().ok


@pytest.mark.django_db(transaction=True)
def test_the_test_runners_flush_still_empties_the_log() -> None:
    # The flush after this (transactional) test must get past the trigger, or every later test
    # would start with this one's rows; the next test in this module checks it did.
    from tests.factories import make_user

    record(make_user("flushme"), 3)
    assert Event.objects.filter(actor_username="flushme").count() == 3


@pytest.mark.django_db(transaction=True)
def test_after_a_flush_the_log_is_empty() -> None:
    assert not Event.objects.filter(actor_username="flushme").exists()
