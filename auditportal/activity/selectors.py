from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from django.db import connection, models

# For other apps (activity.chain is private): the type of chain_verify's anchors, and the events' time format.
from auditportal.activity.chain import Anchor as Anchor
from auditportal.activity.chain import ChainRow, Verification, anchor_problem, chain_check
from auditportal.activity.chain import format_time as format_time
from auditportal.activity.models import Event, Verb

_ROW_FIELDS = (
    "id",
    "seq",
    "prev_hash",
    "hash",
    "actor_id",
    "actor_username",
    "verb",
    "target_type",
    "target_id",
    "data",
    "at",
)


def chain_head() -> tuple[int, str] | None:
    """(seq, hash) of the newest event, or None while the log is empty."""
    return Event.objects.order_by("-seq").values_list("seq", "hash").first()


def events_about(*, verb: Verb, model: type[models.Model], ids: Iterable[int]) -> list[tuple[int, dict[str, Any]]]:
    """``(object id, data)`` of every ``verb`` event about those objects of ``model``, oldest first.

    Not scoped by user: callers pass only ids of objects the user may see (their own selectors).
    """
    wanted = [str(pk) for pk in ids]
    if not wanted:
        return []
    rows = (
        Event.objects.filter(verb=verb, target_type=model._meta.label_lower, target_id__in=wanted)
        .order_by("seq")
        .values_list("target_id", "data")
    )
    return [(int(target_id), data) for target_id, data in rows]


def chain_verify(
    *, expected_hash: str | None = None, anchors: Iterable[Anchor] = (), chunk_size: int = 2000
) -> Verification:
    """Recompute the whole chain from the stored rows, streaming them in seq order, and hold it to
    ``anchors``: heads recorded outside the log (activity.chain.Anchor), which it must still reach,
    with the same event at each one's position. An empty log fails when the database issued event ids
    before (its id sequence, which only the tables' owner can reset): its events were deleted."""
    anchors = list(anchors)
    wanted = {anchor.seq for anchor in anchors}
    hashes: dict[int, str] = {}

    def rows() -> Iterator[ChainRow]:
        for row in _rows(chunk_size):
            if row.seq in wanted:
                hashes[row.seq] = row.hash
            yield row

    result = chain_check(rows(), expected_hash=expected_hash)
    if result.first_break is not None:
        return result
    problems = []
    for anchor in sorted(anchors, key=lambda item: (-item.seq, item.source)):
        problem = anchor_problem(anchor, head=result.head, hash_at_seq=hashes.get(anchor.seq))
        if problem:
            problems.append(problem)
    return replace(
        result,
        anchors_checked=len(anchors),
        anchor_problems=tuple(problems),
        emptied_after_id=_highest_issued_id() if result.head is None else None,
    )


def _highest_issued_id() -> int | None:
    """The greatest id the event table's id sequence ever gave out, or None if none."""
    table = Event._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # NULL until the sequence is first used; reset only by its owner (setval, RESTART IDENTITY).
            cursor.execute("SELECT pg_sequence_last_value(pg_get_serial_sequence(%s, 'id')::regclass)", [table])
        elif connection.vendor == "sqlite":
            # AUTOINCREMENT keeps the greatest id ever used here, even after its row is deleted.
            cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = %s", [table])
        else:
            return None
        row = cursor.fetchone()
    return int(row[0]) if row and row[0] else None


def _rows(chunk_size: int) -> Iterator[ChainRow]:
    for values in Event.objects.order_by("seq").values(*_ROW_FIELDS).iterator(chunk_size=chunk_size):
        yield ChainRow(**values)
