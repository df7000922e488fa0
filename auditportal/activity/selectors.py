from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.conf import settings
from django.db import connection, models
from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from auditportal.activity import rules

# For other apps (activity.chain is private): the type of chain_verify's anchors, and the events' time format.
from auditportal.activity.chain import Anchor as Anchor
from auditportal.activity.chain import ChainRow, Verification, anchor_problem, chain_check
from auditportal.activity.chain import format_time as format_time
from auditportal.activity.models import Event, Verb

if TYPE_CHECKING:
    from django.contrib.auth.models import _User as User

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


# Events only their actor reads: a large file's audit while a worker has it is its uploader's alone
# (audits.selectors.queued_prediction_audit_get answers 404 to everyone else, administrators included).
PRIVATE_TO_ACTOR = (Verb.PREDICTION_AUDIT_QUEUED,)
# What of an event's data only some readers see (rules.py): a checkpoint's path (a run's internals,
# also inside a revision's "changes"), and the e-mail addresses and API tokens' keys of accounts.
RUN_INTERNAL_KEYS = ("checkpoint",)
ACCOUNT_DETAIL_KEYS: dict[str, tuple[str, ...]] = {
    Verb.USER_CREATED: ("email",),
    Verb.USER_PASSWORD_RESET_FORCED: ("email",),
    Verb.USER_EMAIL_CHANGED: ("from", "to"),
    Verb.API_TOKEN_CREATED: ("token_key",),
    Verb.API_TOKEN_REVOKED: ("token_key",),
}
# Typed as the actor of an event written by no account (the worker, beat, a command's bootstrap).
SYSTEM_ACTOR = "system"
_TARGET_WITH_ID = re.compile(r"^(?P<words>.*?)\s*#?\s*(?P<id>\d{1,20})$")


def event_list(
    *,
    viewer: User,
    verb: str = "",
    actor: str = "",
    text: str = "",
    since: date | None = None,
    until: date | None = None,
) -> QuerySet[Event]:
    """The events ``viewer`` may read (rules.can_read_log; another account's queued audit is left out),
    newest first, narrowed by: ``verb`` (exact), ``actor`` (part of the username as written; "system"
    for events no account wrote), ``text`` (the target: its kind in words and its id, "review request
    12", "#12", or a word of its data) and the days ``since`` to ``until``, both included, in the
    portal's time zone.

    The data is searched only where ``viewer`` sees all of it (event_data_visible), so that a search
    cannot find out what the page hides."""
    rules.check_read_log(viewer)
    events = Event.objects.exclude(Q(verb__in=PRIVATE_TO_ACTOR) & ~Q(actor_id=viewer.pk))
    if verb:
        events = events.filter(verb=verb)
    actor = actor.strip()
    if actor.lower() == SYSTEM_ACTOR:
        events = events.filter(actor__isnull=True)
    elif actor:
        events = events.filter(actor_username__icontains=actor)
    text = text.strip()
    if text:
        # The data as the database writes it out as text: JSONField's own lookups would compare with
        # JSON (PostgreSQL's jsonb adapter quotes the pattern).
        events = events.annotate(data_text=Cast("data", TextField())).filter(_text_matches(text, viewer=viewer))
    if since is not None:
        events = events.filter(at__gte=_day_start(since))
    if until is not None:
        events = events.filter(at__lt=_day_start(until + timedelta(days=1)))
    return events.order_by("-seq")


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def _text_matches(text: str, *, viewer: User) -> Q:
    matches = Q(target_id=text) | Q(target_type__iexact=text)
    kinds = [label for label in target_labels() if text.lower() in target_label(label)]
    match = _TARGET_WITH_ID.match(text)
    if match is not None:
        words = match["words"].strip().lower()
        named = [label for label in target_labels() if words and words in target_label(label)]
        if named:
            matches |= Q(target_type__in=named, target_id=str(int(match["id"])))
        elif not words:
            matches |= Q(target_id=str(int(match["id"])))
    elif kinds:
        matches |= Q(target_type__in=kinds)
    # As stored: JSON text, where a quote is escaped, and a non-ASCII letter too on SQLite (\u00e9).
    in_data = Q(data_text__icontains=text)
    for escaped in {json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]} - {text}:
        in_data |= Q(data_text__icontains=escaped)
    return matches | (in_data & ~_partly_hidden(viewer))


def _partly_hidden(viewer: User) -> Q:
    """The events whose data ``viewer`` sees only in part (event_data_visible)."""
    hidden = Q(pk__in=[])
    if not rules.sees_run_internals(viewer):
        for key in RUN_INTERNAL_KEYS:
            # "changes" tested first: without it the inner test is NULL in SQL, and its negation too.
            hidden |= Q(data__has_key=key) | (Q(data__has_key="changes") & Q(data__changes__has_key=key))
    if not rules.sees_account_details(viewer):
        hidden |= Q(verb__in=list(ACCOUNT_DETAIL_KEYS))
    return hidden


def event_data_visible(event: Event, *, viewer: User) -> dict[str, Any]:
    """What of ``event``'s data ``viewer`` may read (rules.py): without a checkpoint's path for those
    who do not see runs' internals, without e-mail addresses and tokens' keys for those who are not
    administrators (a member sees the address of their own account)."""
    data = dict(event.data) if isinstance(event.data, dict) else {}
    if not rules.sees_run_internals(viewer):
        for key in RUN_INTERNAL_KEYS:
            data.pop(key, None)
        changes = data.get("changes")
        if isinstance(changes, dict) and any(key in changes for key in RUN_INTERNAL_KEYS):
            data["changes"] = {name: value for name, value in changes.items() if name not in RUN_INTERNAL_KEYS}
    own = event.target_type == settings.AUTH_USER_MODEL.lower() and event.target_id == str(viewer.pk)
    if not (own or rules.sees_account_details(viewer)):
        for key in ACCOUNT_DETAIL_KEYS.get(event.verb, ()):
            data.pop(key, None)
    return data


def target_labels() -> list[str]:
    """The model labels events name as targets ("approvals.reviewrequest")."""
    return [model._meta.label_lower for model in apps.get_models()]


def target_label(label: str) -> str:
    """An event's target type in words ("review request"), from the model's verbose name."""
    try:
        return str(apps.get_model(label)._meta.verbose_name).lower()
    except (LookupError, ValueError):
        return label


def chain_verification_last() -> Event | None:
    """The newest recorded verification of the chain (services.chain_verification_run), if any."""
    return (
        Event.objects.filter(target_type=Event._meta.label_lower, verb=Verb.ACTIVITY_LOG_VERIFIED)
        .order_by("-seq")
        .first()
    )


def events_after(seq: int) -> int:
    """How many events were written after the one at ``seq``."""
    return Event.objects.filter(seq__gt=seq).count()
