"""Every event written through event_record extends one hash chain that re-verifies from the stored rows."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from django.db import transaction

from auditportal.accounts.models import User
from auditportal.activity.chain import GENESIS, ChainRow, chain_check, event_hash, format_time, normalise_data
from auditportal.activity.models import Event, Verb
from auditportal.activity.selectors import chain_head, chain_verify
from auditportal.activity.services import event_record
from auditportal.fairness.documents.canonical import canonical_sha256
from tests.activity.chain_helpers import record

AT = datetime(2026, 11, 30, 23, 45, 1, 234567, tzinfo=UTC)


def _row(**changes: Any) -> ChainRow:
    row = ChainRow(
        id=1,
        seq=1,
        prev_hash=GENESIS,
        hash="",
        actor_id=7,
        actor_username="erin",
        verb="role.granted",
        target_type="accounts.user",
        target_id="3",
        data={"role": "reviewer"},
        at=AT,
    )
    row = dataclasses.replace(row, hash=row.recomputed_hash())
    return dataclasses.replace(row, **changes)


def test_the_hash_is_sha256_of_the_canonical_json_of_the_previous_hash_and_the_events_content() -> None:
    expected = canonical_sha256(
        {
            "prev_hash": GENESIS,
            "actor": {"id": 7, "username": "erin"},
            "verb": "role.granted",
            "target": {"type": "accounts.user", "id": "3"},
            "data": {"role": "reviewer"},
            "at": "2026-11-30T23:45:01.234567Z",
        }
    )
    assert _row().hash == expected


@pytest.mark.parametrize(
    "change",
    [
        {"prev_hash": "1" * 64},
        {"actor_id": 8},
        {"actor_username": "mallory"},
        {"actor_id": None},
        {"verb": "prediction_audit.approved"},
        {"target_type": "accounts.role"},
        {"target_id": "4"},
        {"data": {"role": "ethics_committee"}},
        {"at": AT + timedelta(microseconds=1)},
    ],
    ids=lambda change: next(iter(change)),
)
def test_changing_any_part_of_an_event_changes_its_hash(change: dict[str, Any]) -> None:
    assert _row(**change).recomputed_hash() != _row().hash


def test_the_time_is_hashed_in_utc_whatever_zone_it_is_given_in() -> None:
    paris = AT.astimezone(timezone(timedelta(hours=1)))
    assert format_time(paris) == "2026-11-30T23:45:01.234567Z"
    assert _row(at=paris).recomputed_hash() == _row().hash
    with pytest.raises(ValueError, match="timezone-aware"):
        format_time(AT.replace(tzinfo=None))


def test_data_is_normalised_to_what_a_json_column_gives_back() -> None:
    data = {"pair": (1, 2), "zero": -0.0, "big": 1e16, "huge": 1.5e300, "tiny": 1e-20, "sum": 0.1 + 0.2, "n": 3}
    normal = normalise_data(data)
    assert normal == {"pair": [1, 2], "zero": 0.0, "big": 10**16, "huge": 15 * 10**299, "tiny": 1e-20,
                      "sum": 0.30000000000000004, "n": 3}  # fmt: skip
    assert type(normal["big"]) is int
    assert normalise_data(normal) == normal
    with pytest.raises(ValueError, match="not JSON compliant"):
        normalise_data({"rate": float("nan")})


def test_event_record_links_each_event_to_the_previous_one_from_genesis(erin: User) -> None:
    # Migrating seeds fairness policy v1 with its event: the chain may not start empty.
    before = chain_head()
    events = record(erin, 3)
    first_prev = before[1] if before else GENESIS
    first_seq = before[0] + 1 if before else 1
    assert [event.seq for event in events] == [first_seq, first_seq + 1, first_seq + 2]
    assert [event.prev_hash for event in events] == [first_prev, events[0].hash, events[1].hash]
    assert Event.objects.get(seq=1).prev_hash == GENESIS
    assert chain_head() == (events[-1].seq, events[-1].hash)


def test_what_is_read_back_from_the_database_rehashes_to_the_stored_hash(erin: User) -> None:
    with transaction.atomic():
        event = event_record(
            actor=erin,
            verb=Verb.ROLE_GRANTED,
            target=erin,
            data={"nested": {"zero": -0.0, "big": 1e16, "huge": 1.5e300, "tiny": 1e-20, "text": "ünïcode ≥ δ"},
                  "list": (0.1, 2, None, True), "sum": 0.1 + 0.2, "whole": 1.0},
        )  # fmt: skip
    stored: dict[str, Any] = dict(Event.objects.filter(pk=event.pk).values().get())
    assert stored["at"] == event.at
    assert stored["data"] == event.data
    row = ChainRow(**{field.name: stored[field.name] for field in dataclasses.fields(ChainRow)})
    assert row.recomputed_hash() == event.hash
    assert chain_verify().ok


def test_the_event_keeps_the_username_it_was_written_with(erin: User) -> None:
    [event] = record(erin)
    erin.username = "erin.renamed"
    erin.save()
    event.refresh_from_db()
    assert event.actor_username == "erin"
    assert chain_verify().ok


def test_a_system_event_has_no_actor(erin: User) -> None:
    with transaction.atomic():
        event = event_record(actor=None, verb=Verb.EXPERIMENT_LAUNCH_FAILED, target=erin, data={"reason": "x"})
    assert event.actor_username == ""
    expected = event_hash(
        prev_hash=event.prev_hash,
        actor_id=None,
        actor_username="",
        verb="experiment.launch_failed",
        target_type="accounts.user",
        target_id=str(erin.pk),
        data={"reason": "x"},
        at=event.at,
    )
    assert event.hash == expected


def test_an_event_rolled_back_with_its_change_leaves_no_gap(erin: User) -> None:
    head = chain_head()

    def change_that_fails() -> None:
        with transaction.atomic():
            record(erin)
            raise RuntimeError("the change fails after its event was written")

    with pytest.raises(RuntimeError, match="the change fails"):
        change_that_fails()
    assert chain_head() == head
    [event] = record(erin)
    assert event.seq == (head[0] + 1 if head else 1)
    assert chain_verify().ok


def test_the_walk_stops_at_the_first_break_and_reports_the_chain_before_it() -> None:
    first = _row()
    second = _row(id=2, seq=2, prev_hash=first.hash)
    second = dataclasses.replace(second, hash=second.recomputed_hash())
    edited = dataclasses.replace(second, data={"role": "admin"})
    result = chain_check([first, edited])
    assert not result.ok
    assert result.count == 1
    assert result.head == (1, first.hash)
    assert result.first_break is not None
    assert result.first_break.row == edited
    assert result.first_break.problem == "edited: its hash does not match its content"
    clean = chain_check([first, second], expected_hash=first.hash)
    assert (clean.ok, clean.count, clean.head, clean.found_expected) == (True, 2, (2, second.hash), True)
    assert not chain_check([first], expected_hash=second.hash).found_expected
