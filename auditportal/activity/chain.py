"""The activity log's hash chain, without Django: what is hashed and how a chain is checked.

Each event's hash is the SHA-256 of the canonical JSON (fairness/documents/canonical.py) of the previous
event's hash and the event's own content: actor (id and username as written, or null), verb,
target type and id, data, and time (ISO 8601, UTC, microseconds). The first event's previous hash
is GENESIS. Migration activity/0005 imports this module to hash the rows that existed before the
chain: the encoding must never change, or every stored hash stops verifying.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from auditportal.fairness.documents.canonical import canonical_sha256

GENESIS = "0" * 64


def normalise_data(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` as a JSON column gives it back, on SQLite and on PostgreSQL (jsonb), so it re-hashes alike.

    A JSON round trip turns tuples into lists and refuses NaN. jsonb keeps numbers as decimals: it
    reads -0.0 back as 0.0, and a float Python writes with an exponent (1e+16 and up, always a
    whole number) as an integer; the same is done here before hashing and storing.
    """
    result: dict[str, Any] = _numbers(json.loads(json.dumps(data, allow_nan=False)))
    return result


def _numbers(value: Any) -> Any:
    if isinstance(value, float):
        if value == 0:
            return 0.0
        text = repr(value)
        return int(Decimal(text)) if "e+" in text else value
    if isinstance(value, list):
        return [_numbers(item) for item in value]
    if isinstance(value, dict):
        return {key: _numbers(item) for key, item in value.items()}
    return value


def format_time(at: datetime) -> str:
    if at.tzinfo is None:
        raise ValueError("an event's time must be timezone-aware")
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_hash(
    *,
    prev_hash: str,
    actor_id: int | None,
    actor_username: str,
    verb: str,
    target_type: str,
    target_id: str,
    data: dict[str, Any],
    at: datetime,
) -> str:
    return canonical_sha256(
        {
            "prev_hash": prev_hash,
            "actor": None if actor_id is None else {"id": actor_id, "username": actor_username},
            "verb": verb,
            "target": {"type": target_type, "id": target_id},
            "data": data,
            "at": format_time(at),
        }
    )


@dataclass(frozen=True)
class ChainRow:
    """One stored event as the walk reads it."""

    id: int
    seq: int
    prev_hash: str
    hash: str
    actor_id: int | None
    actor_username: str
    verb: str
    target_type: str
    target_id: str
    data: dict[str, Any]
    at: datetime

    def recomputed_hash(self) -> str:
        return event_hash(
            prev_hash=self.prev_hash,
            actor_id=self.actor_id,
            actor_username=self.actor_username,
            verb=self.verb,
            target_type=self.target_type,
            target_id=self.target_id,
            data=self.data,
            at=self.at,
        )


@dataclass(frozen=True)
class Break:
    """The first event where the chain does not hold, and what is wrong with it."""

    row: ChainRow
    problem: str


@dataclass(frozen=True)
class Anchor:
    """A head of the chain recorded outside the log: by a signed report (its context embeds the head
    when the decision was taken), or in a signed head file an administrator exported. Whoever can
    delete the newest events cannot take these back, so a chain that no longer reaches one, or has
    another event at its position, was cut or replaced."""

    source: str  # for people: "report #12", "head file /srv/heads/2026-01-02.json"
    seq: int
    hash: str


@dataclass(frozen=True)
class Verification:
    count: int
    head: tuple[int, str] | None  # (seq, hash) of the last event walked
    first_break: Break | None
    found_expected: bool = False  # the hash asked for was among the events that verify
    anchors_checked: int = 0
    anchor_problems: tuple[str, ...] = ()  # one per anchored head the chain does not hold
    # The greatest event id the database ever issued (its id sequence), when the log is empty; None
    # when it is not, or when no id was ever issued.
    emptied_after_id: int | None = None

    @property
    def ok(self) -> bool:
        return self.first_break is None and not self.anchor_problems and self.emptied_after_id is None


def chain_check(rows: Iterable[ChainRow], *, expected_hash: str | None = None) -> Verification:
    """Walk rows in seq order; stop at the first one whose link or content does not hold.

    ``expected_hash``: a head recorded earlier; ``found_expected`` says whether it is still there.
    """
    count, found = 0, False
    previous: ChainRow | None = None
    for row in rows:
        problem = _link_problem(row, previous) or _content_problem(row)
        if problem:
            return Verification(
                count=count, head=_head(previous), first_break=Break(row=row, problem=problem), found_expected=found
            )
        count += 1
        found = found or row.hash == expected_hash
        previous = row
    return Verification(count=count, head=_head(previous), first_break=None, found_expected=found)


def _head(row: ChainRow | None) -> tuple[int, str] | None:
    return None if row is None else (row.seq, row.hash)


def _link_problem(row: ChainRow, previous: ChainRow | None) -> str:
    expected_seq = 1 if previous is None else previous.seq + 1
    expected_prev = GENESIS if previous is None else previous.hash
    before = "the start of the chain" if previous is None else f"event seq {previous.seq}"
    if row.seq > expected_seq and row.prev_hash != expected_prev:
        missing = str(expected_seq) if row.seq == expected_seq + 1 else f"{expected_seq} to {row.seq - 1}"
        return f"deleted: seq {missing} missing after {before}; its prev_hash points at an event that is not in the log"
    if row.seq != expected_seq:
        return f"inserted: its seq {row.seq} does not follow {before} (expected seq {expected_seq})"
    if row.prev_hash != expected_prev:
        return f"inserted: its prev_hash does not point at {before}"
    return ""


def _content_problem(row: ChainRow) -> str:
    try:
        recomputed = row.recomputed_hash()
    except ValueError as exc:  # canonical_json refuses the stored data, or the time is naive
        return f"edited: its content cannot be hashed ({exc})"
    if recomputed != row.hash:
        return "edited: its hash does not match its content"
    return ""


def anchor_problem(anchor: Anchor, *, head: tuple[int, str] | None, hash_at_seq: str | None) -> str:
    """What is wrong with a chain whose verified head is ``head`` against ``anchor`` ("" if nothing);
    ``hash_at_seq``: the hash of the chain's event at the anchor's seq, if it has one."""
    recorded = f"{anchor.source} recorded head seq {anchor.seq} (hash {anchor.hash})"
    if head is None:
        return f"{recorded}, but the log is empty: its events were deleted"
    if anchor.seq > head[0]:
        return f"{recorded}, but the chain ends at seq {head[0]}: the events after it were deleted"
    if hash_at_seq != anchor.hash:
        return f"{recorded}, but the event at seq {anchor.seq} has hash {hash_at_seq}: the log was replaced"
    return ""
