"""verify_audit_log: a clean chain prints its head; an edited, deleted or inserted row (raw SQL) is named."""

from __future__ import annotations

import pytest
from django.core.management import CommandError

from auditportal.activity.chain import format_time
from auditportal.activity.models import Event
from auditportal.activity.selectors import chain_head
from tests.activity.chain_helpers import tamper, verify

FORGED = "f" * 64


def broken(event: Event, problem: str, before: int) -> str:
    return (
        f"The activity log is broken at event id {event.pk} (seq {event.seq}, {event.verb}, {format_time(event.at)}): "
        f"{problem}. {before} events before it verify."
    )


def test_a_clean_chain_prints_its_length_and_head_hash(chain: list[Event]) -> None:
    head = chain[-1]
    assert verify() == f"The activity log verifies: {len(chain)} events, head seq {head.seq}, hash {head.hash}.\n"
    assert chain_head() == (head.seq, head.hash)


def test_an_emptied_log_fails(chain: list[Event]) -> None:
    # The id sequence remembers the events (only the tables' owner can reset it): an empty log that
    # once had events was emptied, and must not "verify".
    tamper("DELETE FROM activity_event")
    assert chain_head() is None
    with pytest.raises(CommandError) as caught:
        verify()
    assert str(caught.value) == (
        f"The activity log is empty, but the database gave out event ids up to {chain[-1].pk}: its events were deleted."
    )


@pytest.mark.parametrize(
    ("column", "value"),
    [("verb", "prediction_audit.approved"), ("target_id", "999"), ("actor_username", "mallory")],
)
def test_an_edited_row_is_named(chain: list[Event], column: str, value: str) -> None:
    victim = chain[3]
    tamper(f"UPDATE activity_event SET {column} = %s WHERE id = %s", [value, victim.pk])  # noqa: S608
    victim = Event.objects.get(pk=victim.pk)
    with pytest.raises(CommandError) as caught:
        verify()
    assert str(caught.value) == broken(victim, "edited: its hash does not match its content", before=3)


def test_an_edited_time_is_named(chain: list[Event]) -> None:
    victim, earlier = chain[3], chain[1]
    tamper("UPDATE activity_event SET at = (SELECT at FROM activity_event WHERE id = %s) WHERE id = %s",
           [earlier.pk, victim.pk])  # fmt: skip
    victim = Event.objects.get(pk=victim.pk)
    assert victim.at == earlier.at
    with pytest.raises(CommandError, match=rf"event id {victim.pk} .*: edited: its hash does not match"):
        verify()


def test_a_deleted_row_is_named_by_its_seq_and_the_event_that_points_at_it(chain: list[Event]) -> None:
    tamper("DELETE FROM activity_event WHERE id = %s", [chain[2].pk])
    problem = f"deleted: seq {chain[2].seq} missing after event seq {chain[1].seq}; "
    problem += "its prev_hash points at an event that is not in the log"
    with pytest.raises(CommandError) as caught:
        verify()
    assert str(caught.value) == broken(chain[3], problem, before=2)


def test_deleting_the_first_row_is_found_too(chain: list[Event]) -> None:
    tamper("DELETE FROM activity_event WHERE seq = 1")
    with pytest.raises(CommandError, match=r"\(seq 2, .*: deleted: seq 1 missing after the start of the chain"):
        verify()


def _insert(seq: int, prev_hash: str, copy_of: Event) -> Event:
    tamper(
        "INSERT INTO activity_event (seq, prev_hash, hash, at, actor_id, actor_username, verb, target_type, target_id, "
        "data) SELECT %s, %s, %s, at, actor_id, actor_username, 'prediction_audit.approved', target_type, target_id, "
        "data FROM activity_event WHERE id = %s",
        [seq, prev_hash, "e" * 64, copy_of.pk],
    )
    return Event.objects.get(seq=seq)


def test_a_row_inserted_after_the_head_with_a_forged_link_is_named(chain: list[Event]) -> None:
    forged = _insert(chain[-1].seq + 1, FORGED, copy_of=chain[-1])
    with pytest.raises(CommandError) as caught:
        verify()
    problem = f"inserted: its prev_hash does not point at event seq {chain[-1].seq}"
    assert str(caught.value) == broken(forged, problem, before=len(chain))


def test_a_row_inserted_after_the_head_with_a_made_up_hash_is_named(chain: list[Event]) -> None:
    forged = _insert(chain[-1].seq + 1, chain[-1].hash, copy_of=chain[-1])
    with pytest.raises(CommandError) as caught:
        verify()
    assert str(caught.value) == broken(forged, "edited: its hash does not match its content", before=len(chain))


def test_a_row_inserted_in_the_middle_is_named(chain: list[Event]) -> None:
    # Make room at seq 3 (in two steps, so no two rows share a seq on the way), then fill it.
    k = chain[2].seq
    tamper("UPDATE activity_event SET seq = seq + 1000 WHERE seq >= %s", [k])
    tamper("UPDATE activity_event SET seq = seq - 999 WHERE seq >= %s", [k + 1000])
    forged = _insert(k, FORGED, copy_of=chain[2])
    with pytest.raises(CommandError) as caught:
        verify()
    problem = f"inserted: its prev_hash does not point at event seq {chain[1].seq}"
    assert str(caught.value) == broken(forged, problem, before=2)


def test_a_row_whose_seq_does_not_follow_is_named(chain: list[Event]) -> None:
    tamper("UPDATE activity_event SET seq = seq + 5 WHERE id = %s", [chain[-1].pk])
    moved = Event.objects.get(pk=chain[-1].pk)
    problem = f"inserted: its seq {moved.seq} does not follow event seq {chain[-2].seq} (expected seq {chain[-1].seq})"
    with pytest.raises(CommandError) as caught:
        verify()
    assert str(caught.value) == broken(moved, problem, before=len(chain) - 1)


def test_deleting_the_newest_events_is_found_against_a_head_recorded_earlier(chain: list[Event]) -> None:
    recorded = chain[-1].hash
    assert "verifies" in verify("--expect-head", recorded)
    tamper("DELETE FROM activity_event WHERE seq >= %s", [chain[-2].seq])
    assert verify().startswith(f"The activity log verifies: {len(chain) - 2} events")
    with pytest.raises(CommandError) as caught:
        verify("--expect-head", recorded)
    assert str(caught.value) == (
        f"The chain of {len(chain) - 2} events holds, but the expected head {recorded} is not in it: "
        "events after it were deleted, or the log was replaced."
    )
