"""The broker stops during a change and starts again: the change commits, its task waits in the outbox,
and once the broker is back beat's outbox.deliver hands it over and a real worker runs it (issue 25).

A private Redis (tests/redis_server.py), never the shared one: stopping it loses whatever it held, as a
broker without an append-only file would; the outbox row is what keeps the task.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from django.db import transaction

from auditportal.outbox.models import OutboxMessage
from auditportal.outbox.services import task_enqueue
from tests.outbox.tasks import RECORD_RUN
from tests.redis_server import PrivateRedis, celery_broker, private_redis_fixture
from tests.worker import start_worker_fixture

__all__ = ["private_redis_fixture", "start_worker_fixture"]

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _while_the_broker_is_down(private_redis: PrivateRedis, change: Callable[[], None]) -> list[OutboxMessage]:
    """Stop the broker, make the change (it must commit without an error), start the broker again;
    returns the tasks the change queued, all still unsent."""
    with celery_broker(private_redis.url):
        private_redis.stop()
        before = set(OutboxMessage.objects.values_list("pk", flat=True))
        change()
        queued = list(OutboxMessage.objects.exclude(pk__in=before).order_by("pk"))
        private_redis.start()  # on the same port, and empty
    assert queued, "the change queued no task"
    for message in queued:
        assert message.sent_at is None, message
        assert message.attempts == 1, message  # the on-commit delivery tried, and was refused
        assert message.last_error.startswith("OperationalError: "), message.last_error
    return queued


def _until(done: Callable[[], bool], worker: subprocess.Popen[bytes], what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert worker.poll() is None, f"the worker exited ({worker.returncode}) before {what}"
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.25)


def test_a_task_queued_while_the_broker_is_down_runs_once_it_is_back(
    private_redis: PrivateRedis, start_worker: Callable[..., subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    ran = tmp_path / "ran.txt"

    def change() -> None:
        # What a decision does: its data and its follow-up work in one transaction.
        with transaction.atomic():
            task_enqueue(name=RECORD_RUN, args=[str(ran), "ran after the broker came back"])

    queued = _while_the_broker_is_down(private_redis, change)
    assert not ran.exists()

    # Nothing in this process delivers it: beat (embedded in the worker) runs outbox.deliver.
    worker = start_worker(CELERY_BROKER_URL=private_redis.url, OUTBOX_DELIVER_SECONDS="1")
    _until(ran.exists, worker, "the worker ran the task")
    assert ran.read_text(encoding="utf-8") == "ran after the broker came back"
    _until(lambda: not OutboxMessage.objects.filter(sent_at=None).exists(), worker, "the row was marked sent")
    (message,) = queued
    message.refresh_from_db()
    assert message.attempts == 2
    assert message.claimed_until is None
