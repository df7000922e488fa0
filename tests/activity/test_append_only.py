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
