from __future__ import annotations

from collections.abc import Iterator

from auditportal.activity.chain import ChainRow, Verification, chain_check
from auditportal.activity.models import Event

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


def chain_verify(*, expected_hash: str | None = None, chunk_size: int = 2000) -> Verification:
    """Recompute the whole chain from the stored rows, streaming them in seq order."""
    return chain_check(_rows(chunk_size), expected_hash=expected_hash)


def _rows(chunk_size: int) -> Iterator[ChainRow]:
    for values in Event.objects.order_by("seq").values(*_ROW_FIELDS).iterator(chunk_size=chunk_size):
        yield ChainRow(**values)
