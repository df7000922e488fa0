"""Events written before the chain existed are chained by the migration, in the order they were written."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from auditportal.activity.chain import GENESIS
from auditportal.activity.models import Event
from auditportal.activity.selectors import chain_verify
from tests.factories import make_user
from tests.migrating import historical_state, migrate, migrate_to_latest

BEFORE = [("activity", "0003_evidence_verbs")]
AFTER = [("activity", "0006_event_chain_constraints")]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_migration_chains_existing_events_by_time_then_id() -> None:
    erin = make_user("erin")
    migrate(BEFORE)
    try:
        OldEvent = historical_state(BEFORE).apps.get_model("activity", "Event")
        OldEvent.objects.all().delete()  # the policy seed's event, written by the current code
        rows = [
            (datetime(2026, 1, 2, tzinfo=UTC), None, {"reason": "later", "n": (1, 2)}),
            (datetime(2026, 1, 1, tzinfo=UTC), erin.pk, {"role": "admin", "zero": -0.0}),
            (datetime(2026, 1, 2, tzinfo=UTC), erin.pk, {"same": "time, higher id"}),
        ]
        pks = []
        for at, actor_id, data in rows:
            event = OldEvent.objects.create(
                actor_id=actor_id, verb="role.granted", target_type="accounts.user", target_id="1", data=data
            )
            OldEvent.objects.filter(pk=event.pk).update(at=at)  # auto_now_add set it to now
            pks.append(event.pk)
    finally:
        migrate(AFTER)
        # And on to the latest migrations, so later tests find the schema (and triggers) they expect.
        migrate_to_latest()

    chained = list(Event.objects.order_by("seq"))
    assert [event.pk for event in chained] == [pks[1], pks[0], pks[2]]
    assert [event.seq for event in chained] == [1, 2, 3]
    assert chained[0].prev_hash == GENESIS
    assert [event.actor_username for event in chained] == ["erin", "", "erin"]
    assert chained[1].data == {"reason": "later", "n": [1, 2]}
    result = chain_verify()
    assert (result.ok, result.count, result.head) == (True, 3, (3, chained[2].hash))
