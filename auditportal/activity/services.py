from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import connection, models, transaction
from django.utils import timezone

from auditportal.activity import rules, selectors
from auditportal.activity.chain import GENESIS, event_hash, normalise_data
from auditportal.activity.context import CLI_KEY, command_data
from auditportal.activity.models import Event, Verb
from auditportal.fairness.errors import UserError

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


# One verification from the pages at a time, a minute apart: each reads the whole log (about 0.1 s a
# thousand events) and records an event.
CHAIN_VERIFY_INTERVAL = timedelta(seconds=60)


class VerificationTooSoon(UserError):
    """The chain was verified less than CHAIN_VERIFY_INTERVAL ago."""


def chain_verification_run(*, by: User) -> Event:
    """Walk the whole chain now (selectors.chain_verify: every link and every hash; an edited, deleted
    or inserted event breaks it) and record what was found as an ``activity_log.verified`` event on the
    newest event that verified, or on the first that did not: who asked, how many events verify, the
    head, the problem and the seconds it took. Any member may ask (rules.can_read_log), once a minute.

    The heads recorded outside the log (signed reports, head files) are not read here: they are the
    reports app's, above this one; ``manage.py verify_audit_log`` holds the chain to them too."""
    rules.check_read_log(by)
    last = selectors.chain_verification_last()
    if last is not None and timezone.now() - last.at < CHAIN_VERIFY_INTERVAL:
        ago = int((timezone.now() - last.at).total_seconds())
        raise VerificationTooSoon(
            f"The chain was verified {ago} s ago by {last.actor_username or 'the system'}; "
            f"it can be verified again {int(CHAIN_VERIFY_INTERVAL.total_seconds()) - ago} s from now."
        )
    started = time.perf_counter()
    result = selectors.chain_verify()
    seconds = round(time.perf_counter() - started, 3)
    broken = result.first_break
    if broken is not None:
        target_id = broken.row.id
    elif result.head is not None:
        target_id = Event.objects.only("pk").get(seq=result.head[0]).pk
    else:
        raise UserError("The activity log is empty: there is no chain to verify.")
    data: dict[str, Any] = {
        "ok": broken is None,
        "events": result.count,
        "head_seq": result.head[0] if result.head else None,
        "head_hash": result.head[1] if result.head else None,
        "broken_at_seq": broken.row.seq if broken else None,
        "problem": broken.problem if broken else None,
        "seconds": seconds,
    }
    with transaction.atomic():
        return event_record(actor=by, verb=Verb.ACTIVITY_LOG_VERIFIED, target=Event(pk=target_id), data=data)


def _lock_chain() -> None:
    # Held until this transaction ends. SQLite needs nothing: it lets one writer at a time in (the
    # settings begin every transaction IMMEDIATE), and the unique seq and prev_hash refuse a fork anyway.
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CHAIN_LOCK_KEY])
