"""The transactional outbox: one way to queue a Celery task after a commit, with one failure policy.

``task_enqueue`` writes the task (its name and JSON arguments) as a row in the caller's transaction,
so the task exists exactly when the caller's data does. Once that transaction commits, the row is
handed to the broker and marked sent when the broker accepted it. While the broker is down the row
stays unsent, with its attempts and last error, and beat's ``outbox.deliver`` task (every
OUTBOX_DELIVER_SECONDS) hands it over once the broker is back. A committed change never raises for
its follow-up work, and never loses it.

Delivery is at least once: a deliverer that dies after the broker accepted a task and before it
marked the row sent leaves it to be delivered again, so every task queued here must be idempotent.
Two deliverers never send one row at the same time: each claims the row first with a conditional
UPDATE (a lease of OUTBOX_CLAIM_SECONDS).
"""

from __future__ import annotations

import enum
import json
import logging
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from auditportal.outbox.models import MAX_LAST_ERROR, MAX_TASK_NAME, OutboxMessage

logger = logging.getLogger(__name__)

# Rows read per query by the periodic delivery (it goes on until every unsent row was tried once).
DELIVERY_BATCH_SIZE = 100


class Delivery(enum.Enum):
    SENT = "sent"
    NOT_CLAIMED = "not claimed"  # sent already, or another deliverer holds it
    REFUSED = "refused"  # the broker is down or refused it: the rows after it would fare alike
    FAILED = "failed"  # something else went wrong with this row


def task_enqueue(*, name: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> OutboxMessage:
    """Queue the Celery task registered as ``name`` with ``args`` and ``kwargs``, once the caller's
    transaction commits; nothing is queued if it rolls back.

    Call it inside ``transaction.atomic`` (RuntimeError otherwise: outside one there is no commit to
    wait for, and a crash between the data and the row would lose the task). ``args`` and ``kwargs``
    must be plain JSON (ids, strings, numbers, booleans, None, lists, dicts with string keys; tuples
    become lists), TypeError or ValueError otherwise; pass ids, never instances.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError(f"task_enqueue({name!r}) must be called inside transaction.atomic")
    if not name or len(name) > MAX_TASK_NAME:
        raise ValueError(f"a task name is 1 to {MAX_TASK_NAME} characters, not {name!r}")
    args_value = _json_value(list(args), "args")
    kwargs_value = _json_value(dict(kwargs or {}), "kwargs")
    # The same check as the broker's JSON serializer, which must never refuse a row later.
    json.dumps([args_value, kwargs_value], allow_nan=False)
    message = OutboxMessage.objects.create(name=name, args=args_value, kwargs=kwargs_value)
    pk = message.pk
    transaction.on_commit(lambda: outbox_message_deliver(message_id=pk))
    return message


def outbox_message_deliver(*, message_id: int) -> Delivery:
    """Hand one row to the broker now if nobody else is (the on-commit path). Never raises for a
    broker that is down: the periodic delivery tries again. In eager mode the task runs here, and
    what it raises propagates, as ``.delay()`` did."""
    if not _claim(message_id):
        return Delivery.NOT_CLAIMED
    return _deliver_claimed(message_id)


def outbox_deliver_pending() -> int:
    """Hand every unsent, unclaimed row to the broker, oldest first, each at most once per run
    (``outbox.deliver``, run by beat). Stops at the first refusal: the broker is still down. Returns
    how many rows were sent."""
    sent = 0
    after = 0
    while True:
        ids = list(
            _claimable(timezone.now())
            .filter(pk__gt=after)
            .order_by("pk")
            .values_list("pk", flat=True)[:DELIVERY_BATCH_SIZE]
        )
        for pk in ids:
            outcome = outbox_message_deliver(message_id=pk)
            if outcome is Delivery.SENT:
                sent += 1
            elif outcome is Delivery.REFUSED:
                return sent
        if len(ids) < DELIVERY_BATCH_SIZE:
            return sent
        after = ids[-1]


def outbox_purge(*, now: datetime | None = None) -> int:
    """Delete rows sent more than OUTBOX_KEEP_DAYS ago (``outbox.purge``, daily): they are a delivery
    record, not evidence (what a task did is in the activity log). Unsent rows are never deleted."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.OUTBOX_KEEP_DAYS)
    deleted, _ = OutboxMessage.objects.filter(sent_at__lt=cutoff).delete()
    return deleted


def _json_value(value: Any, path: str) -> Any:
    # Only what survives a JSON round trip unchanged (dict keys that are not strings, Decimals, UUIDs,
    # datetimes and NaN do not): the task must get exactly what the caller passed.
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path} is {value!r}; JSON has no NaN or infinity")
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(item, f"{path}[{index}]") for index, item in enumerate(value)]
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise TypeError(f"{path} has the key {key!r}; JSON object keys are strings")
        return {key: _json_value(item, f"{path}[{key!r}]") for key, item in value.items()}
    raise TypeError(f"{path} is a {type(value).__name__}; pass JSON values (ids, not instances)")


def _claimable(now: datetime) -> QuerySet[OutboxMessage]:
    return OutboxMessage.objects.filter(sent_at__isnull=True).filter(
        Q(claimed_until__isnull=True) | Q(claimed_until__lte=now)
    )


def _claim(message_id: int) -> bool:
    # One conditional UPDATE: of two deliverers racing for the row, exactly one changes it.
    now = timezone.now()
    lease = timedelta(seconds=settings.OUTBOX_CLAIM_SECONDS)
    return _claimable(now).filter(pk=message_id).update(claimed_until=now + lease) == 1


def _deliver_claimed(message_id: int) -> Delivery:
    # Imported here, when a row is delivered: see outbox/broker.py.
    from auditportal.outbox import broker

    message = OutboxMessage.objects.get(pk=message_id)
    try:
        broker.publish(name=message.name, args=message.args, kwargs=message.kwargs)
    except Exception as exc:
        if broker.runs_inline():
            # The task itself failed, in this process: what .delay() raised there, unchanged (the row
            # keeps its claim until the lease ends; nothing else runs in eager mode).
            raise
        _record_failure(message_id, exc)
        if isinstance(exc, broker.BROKER_ERRORS):
            logger.warning(
                "outbox: the broker did not take %s #%s (%s); beat's outbox.deliver will try again",
                message.name,
                message_id,
                exc,
            )
            return Delivery.REFUSED
        logger.exception("outbox: could not deliver %s #%s", message.name, message_id)
        return Delivery.FAILED
    OutboxMessage.objects.filter(pk=message_id).update(
        sent_at=timezone.now(), attempts=F("attempts") + 1, claimed_until=None
    )
    return Delivery.SENT


def _record_failure(message_id: int, exc: BaseException) -> None:
    error = f"{type(exc).__name__}: {exc}"[:MAX_LAST_ERROR]
    OutboxMessage.objects.filter(pk=message_id).update(attempts=F("attempts") + 1, last_error=error, claimed_until=None)
