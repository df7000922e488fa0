from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from django.db import models

from auditportal.activity.chain import ChainRow, Verification, chain_check
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


def chain_verify(*, expected_hash: str | None = None, chunk_size: int = 2000) -> Verification:
    """Recompute the whole chain from the stored rows, streaming them in seq order."""
    return chain_check(_rows(chunk_size), expected_hash=expected_hash)


def _rows(chunk_size: int) -> Iterator[ChainRow]:
    for values in Event.objects.order_by("seq").values(*_ROW_FIELDS).iterator(chunk_size=chunk_size):
        yield ChainRow(**values)
