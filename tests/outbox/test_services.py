"""The outbox (auditportal/outbox): a task queued with the caller's transaction is handed to the broker
once it commits, exactly once, and is kept until the broker takes it."""

from __future__ import annotations

import decimal
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from celery.exceptions import NotRegistered
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.celery import app
from auditportal.outbox import broker
from auditportal.outbox.models import MAX_LAST_ERROR, OutboxMessage
from auditportal.outbox.services import (
    Delivery,
    outbox_deliver_pending,
    outbox_message_deliver,
    outbox_purge,
    task_enqueue,
)
from tests.outbox.tasks import RECORD_RUN, TaskFailed

Published = tuple[str, list[Any], dict[str, Any]]


@dataclass
class FakeBroker:
    """Stands in for ``broker.publish``: records what it was handed, or refuses while ``down``."""

    published: list[Published] = field(default_factory=list)
    down: bool = False
    # Runs inside a publish, before it returns: another deliverer at work at that very moment.
    during_publish: Callable[[], None] | None = None

    def publish(self, *, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        if self.down:
            raise OperationalError("Error 111 connecting to 127.0.0.1:6399. Connection refused.")
        if self.during_publish is not None:
            during, self.during_publish = self.during_publish, None
            during()
        self.published.append((name, list(args), dict(kwargs)))


@pytest.fixture
def fake_broker(monkeypatch: pytest.MonkeyPatch) -> FakeBroker:
    fake = FakeBroker()
    monkeypatch.setattr(broker, "publish", fake.publish)
    return fake


@pytest.fixture
def eager() -> Iterator[None]:
    """Celery's eager mode, as the tests that run tasks in this process use it."""
    before = {name: app.conf[name] for name in ("task_always_eager", "task_eager_propagates")}
    app.conf.update(task_always_eager=True, task_eager_propagates=True)
    try:
        yield
    finally:
        app.conf.update(before)


def _enqueue_committed(name: str = RECORD_RUN, *args: Any, **kwargs: Any) -> OutboxMessage:
    with transaction.atomic():
        message = task_enqueue(name=name, args=args, kwargs=kwargs)
    message.refresh_from_db()
    return message


@pytest.mark.django_db(transaction=True)
def test_queuing_outside_a_transaction_raises_and_writes_nothing(fake_broker: FakeBroker) -> None:
    with pytest.raises(RuntimeError, match=r"task_enqueue\('tests.outbox.record_run'\) must be called inside"):
        task_enqueue(name=RECORD_RUN, args=["/tmp/x", "x"])
    assert not OutboxMessage.objects.exists()
    assert fake_broker.published == []


@pytest.mark.django_db(transaction=True)
def test_a_committed_transaction_hands_its_task_to_the_broker_once(fake_broker: FakeBroker) -> None:
    message = _enqueue_committed(RECORD_RUN, "/tmp/x", "x", fail=False)
    assert fake_broker.published == [(RECORD_RUN, ["/tmp/x", "x"], {"fail": False})]
    assert message.sent_at is not None
    assert message.attempts == 1
    assert message.claimed_until is None
    # The periodic delivery finds nothing left to send.
    assert outbox_deliver_pending() == 0
    assert outbox_message_deliver(message_id=message.pk) is Delivery.NOT_CLAIMED
    assert len(fake_broker.published) == 1


@pytest.mark.django_db(transaction=True)
def test_nothing_is_handed_over_before_the_transaction_commits(fake_broker: FakeBroker) -> None:
    with transaction.atomic():
        task_enqueue(name=RECORD_RUN, args=["/tmp/x", "x"])
        assert fake_broker.published == []
    assert len(fake_broker.published) == 1


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_transaction_queues_nothing(fake_broker: FakeBroker) -> None:
    class Boom(Exception):
        pass

    @transaction.atomic
    def change_that_fails() -> None:
        task_enqueue(name=RECORD_RUN, args=["/tmp/x", "x"])
        raise Boom

    with pytest.raises(Boom):
        change_that_fails()
    assert not OutboxMessage.objects.exists()
    assert fake_broker.published == []
    assert outbox_deliver_pending() == 0


def test_a_rolled_back_savepoint_queues_nothing_while_its_transaction_commits(
    db: None, fake_broker: FakeBroker, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        kept = task_enqueue(name=RECORD_RUN, args=["/tmp/kept", "kept"])
        try:
            with transaction.atomic():
                task_enqueue(name=RECORD_RUN, args=["/tmp/dropped", "dropped"])
                raise ValueError("rolled back")
        except ValueError:
            pass
    assert list(OutboxMessage.objects.values_list("pk", flat=True)) == [kept.pk]
    assert fake_broker.published == [(RECORD_RUN, ["/tmp/kept", "kept"], {})]


@pytest.mark.django_db(transaction=True)
def test_a_broker_that_is_down_leaves_the_task_for_the_periodic_delivery(
    fake_broker: FakeBroker, caplog: pytest.LogCaptureFixture
) -> None:
    fake_broker.down = True
    message = _enqueue_committed(RECORD_RUN, "/tmp/x", "x")  # the commit stands; nothing raises
    assert message.sent_at is None
    assert message.attempts == 1
    assert message.last_error == "OperationalError: Error 111 connecting to 127.0.0.1:6399. Connection refused."
    assert message.claimed_until is None
    assert f"the broker did not take {RECORD_RUN} #{message.pk}" in caplog.text

    assert outbox_deliver_pending() == 0  # still down
    message.refresh_from_db()
    assert (message.sent_at, message.attempts) == (None, 2)

    fake_broker.down = False
    assert outbox_deliver_pending() == 1
    message.refresh_from_db()
    assert message.sent_at is not None
    assert message.attempts == 3
    assert fake_broker.published == [(RECORD_RUN, ["/tmp/x", "x"], {})]
    assert outbox_deliver_pending() == 0


def test_the_periodic_delivery_sends_oldest_first_and_stops_at_the_first_refusal(
    db: None, fake_broker: FakeBroker
) -> None:
    messages = [OutboxMessage.objects.create(name=RECORD_RUN, args=[f"/tmp/{n}", str(n)]) for n in range(3)]
    fake_broker.down = True
    assert outbox_deliver_pending() == 0
    attempts = [m.attempts for m in OutboxMessage.objects.order_by("pk")]
    assert attempts == [1, 0, 0]  # the broker is down for all of them: no point asking for each

    fake_broker.down = False
    assert outbox_deliver_pending() == 3
    assert [args for _, args, _ in fake_broker.published] == [m.args for m in messages]


def test_the_periodic_delivery_goes_through_every_batch(
    db: None, fake_broker: FakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("auditportal.outbox.services.DELIVERY_BATCH_SIZE", 2)
    OutboxMessage.objects.bulk_create(OutboxMessage(name=RECORD_RUN, args=[str(n)]) for n in range(5))
    assert outbox_deliver_pending() == 5
    assert [args for _, args, _ in fake_broker.published] == [[str(n)] for n in range(5)]


def test_a_row_that_fails_otherwise_does_not_hold_up_the_others(
    db: None, fake_broker: FakeBroker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    first = OutboxMessage.objects.create(name=RECORD_RUN, args=["first"])
    second = OutboxMessage.objects.create(name=RECORD_RUN, args=["second"])

    def publish(*, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        if args == ["first"]:
            raise ValueError("x" * 1000)
        fake_broker.published.append((name, list(args), dict(kwargs)))

    monkeypatch.setattr(broker, "publish", publish)
    assert outbox_deliver_pending() == 1
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.sent_at, first.attempts) == (None, 1)
    assert first.last_error == ("ValueError: " + "x" * 1000)[:MAX_LAST_ERROR]
    assert second.sent_at is not None
    assert f"could not deliver {RECORD_RUN} #{first.pk}" in caplog.text


def test_two_deliverers_at_once_send_a_row_only_once(db: None, fake_broker: FakeBroker) -> None:
    message = OutboxMessage.objects.create(name=RECORD_RUN, args=["once"])
    inner: list[object] = []
    # While the on-commit path is handing the row to the broker, beat's delivery runs, and another
    # on-commit path for the same row: the row is claimed, so neither sends it.
    fake_broker.during_publish = lambda: inner.extend(
        [outbox_deliver_pending(), outbox_message_deliver(message_id=message.pk)]
    )
    assert outbox_message_deliver(message_id=message.pk) is Delivery.SENT
    assert inner == [0, Delivery.NOT_CLAIMED]
    assert fake_broker.published == [(RECORD_RUN, ["once"], {})]
    message.refresh_from_db()
    assert message.attempts == 1


def test_a_claim_whose_lease_ran_out_is_delivered_again(
    db: None, fake_broker: FakeBroker, settings: SettingsWrapper
) -> None:
    # A deliverer killed between claiming and marking: its row is sent again after the lease (which
    # is why the tasks must be idempotent); before that, nobody touches it.
    now = timezone.now()
    held = OutboxMessage.objects.create(name=RECORD_RUN, args=["held"], claimed_until=now + timedelta(seconds=30))
    lost = OutboxMessage.objects.create(name=RECORD_RUN, args=["lost"], claimed_until=now - timedelta(seconds=1))
    assert outbox_deliver_pending() == 1
    assert fake_broker.published == [(RECORD_RUN, ["lost"], {})]
    held.refresh_from_db()
    lost.refresh_from_db()
    assert held.sent_at is None
    assert lost.sent_at is not None


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ([float("nan")], {}, ValueError, r"args\[0\] is nan; JSON has no NaN or infinity"),
        ([], {"limit": float("inf")}, ValueError, r"kwargs\['limit'\] is inf"),
        ([decimal.Decimal("1.5")], {}, TypeError, r"args\[0\] is a Decimal; pass JSON values \(ids, not instances\)"),
        ([{1: "a"}], {}, TypeError, r"args\[0\] has the key 1; JSON object keys are strings"),
        ([[object()]], {}, TypeError, r"args\[0\]\[0\] is a object"),
    ],
)
def test_arguments_that_are_not_json_are_refused_before_anything_is_written(
    db: None, fake_broker: FakeBroker, args: list[Any], kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message), transaction.atomic():
        task_enqueue(name=RECORD_RUN, args=args, kwargs=kwargs)
    assert not OutboxMessage.objects.exists()


def test_arguments_are_stored_as_the_json_the_task_gets(db: None) -> None:
    message = task_enqueue(name=RECORD_RUN, args=(1, ("a", None), {"k": [True, 0.5]}), kwargs={"x": (2,)})
    message.refresh_from_db()
    assert message.args == [1, ["a", None], {"k": [True, 0.5]}]
    assert message.kwargs == {"x": [2]}


@pytest.mark.parametrize("name", ["", "x" * 201])
def test_a_task_name_must_fit(db: None, name: str) -> None:
    with pytest.raises(ValueError, match="a task name is 1 to 200 characters"):
        task_enqueue(name=name)


def test_sent_rows_are_purged_after_the_keep_days_and_unsent_ones_never(db: None, settings: SettingsWrapper) -> None:
    settings.OUTBOX_KEEP_DAYS = 7
    now = timezone.now()
    old_sent = OutboxMessage.objects.create(name=RECORD_RUN, sent_at=now - timedelta(days=8))
    recent_sent = OutboxMessage.objects.create(name=RECORD_RUN, sent_at=now - timedelta(days=6))
    old_unsent = OutboxMessage.objects.create(name=RECORD_RUN)
    OutboxMessage.objects.filter(pk=old_unsent.pk).update(created_at=now - timedelta(days=30))
    assert outbox_purge(now=now) == 1
    assert set(OutboxMessage.objects.values_list("pk", flat=True)) == {recent_sent.pk, old_unsent.pk}
    assert not OutboxMessage.objects.filter(pk=old_sent.pk).exists()


# Eager mode: what the tests that run tasks in this process (inline_worker, the decision reports) see.


def test_in_eager_mode_the_task_runs_when_its_transaction_commits(
    db: None, eager: None, tmp_path: Path, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    target = tmp_path / "ran.txt"
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        message = task_enqueue(name=RECORD_RUN, args=[str(target), "ran"])
        assert not target.exists()
    assert target.read_text() == "ran"
    message.refresh_from_db()
    assert message.sent_at is not None


def test_in_eager_mode_what_the_task_raises_propagates_as_from_delay(
    db: None, eager: None, tmp_path: Path, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    with pytest.raises(TaskFailed, match="refused"), django_capture_on_commit_callbacks(execute=True):
        task_enqueue(name=RECORD_RUN, args=[str(tmp_path / "x"), "refused"], kwargs={"fail": True})


def test_in_eager_mode_a_name_no_task_has_raises(
    db: None, eager: None, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    with pytest.raises(NotRegistered), django_capture_on_commit_callbacks(execute=True):
        task_enqueue(name="tests.outbox.no_such_task")


def test_the_delivery_tasks_are_registered_and_scheduled(settings: SettingsWrapper) -> None:
    app.autodiscover_tasks(force=True)  # as a worker does at start
    assert {"outbox.deliver", "outbox.purge"} <= set(app.tasks)
    schedule = {entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert schedule["outbox.deliver"] == timedelta(seconds=settings.OUTBOX_DELIVER_SECONDS)
    assert "outbox.purge" in schedule
