from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import connection, models, transaction
from django.utils import timezone

from auditportal.activity.chain import GENESIS, event_hash, normalise_data
from auditportal.activity.context import CLI_KEY, command_data
from auditportal.activity.models import Event, Verb

if TYPE_CHECKING:
    # settings.AUTH_USER_MODEL, as django-stubs resolves it: accounts sits above activity (its services
    # write events, docs/architecture.md), so activity names no accounts module.
    from django.contrib.auth.models import _User as User

# pg_advisory_xact_lock key that serialises writers of the chain (any fixed 64-bit number).
CHAIN_LOCK_KEY = 0x61637469766974  # "activit"


def event_record(
    *,
    actor: User | None,
    verb: Verb,
    target: models.Model,
    data: dict[str, Any] | None = None,
) -> Event:
    if not transaction.get_connection().in_atomic_block:
        # The trail is only trustworthy if it commits or rolls back together with the change.
        raise RuntimeError("event_record must run inside the transaction that makes the change")
    _lock_chain()
    # Read the head only once this transaction holds the chain: the next writer waits for our commit.
    head = Event.objects.order_by("-seq").values_list("seq", "hash").first()
    seq, prev_hash = (head[0] + 1, head[1]) if head else (1, GENESIS)
    at = timezone.now()
    actor_username = actor.get_username() if actor is not None else ""
    target_type, target_id = target._meta.label_lower, str(target.pk)
    data = dict(data or {})
    command = command_data()
    if command is not None:
        # Inside a management command: who ran it at the shell, covered by the hash with the rest.
        data[CLI_KEY] = command
    stored = normalise_data(data)
    return Event.objects.create(
        seq=seq,
        prev_hash=prev_hash,
        hash=event_hash(
            prev_hash=prev_hash,
            actor_id=actor.pk if actor is not None else None,
            actor_username=actor_username,
            verb=verb.value,
            target_type=target_type,
            target_id=target_id,
            data=stored,
            at=at,
        ),
        at=at,
        actor=actor,
        actor_username=actor_username,
        verb=verb,
        target_type=target_type,
        target_id=target_id,
        data=stored,
    )


def _lock_chain() -> None:
    # Held until this transaction ends. SQLite needs nothing: it lets one writer at a time in (the
    # settings begin every transaction IMMEDIATE), and the unique seq and prev_hash refuse a fork anyway.
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CHAIN_LOCK_KEY])
