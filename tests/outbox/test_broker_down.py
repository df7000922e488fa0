"""The broker stops during a change and starts again: the change commits, its task waits in the outbox,
and once the broker is back beat's outbox.deliver hands it over and a real worker runs it (issue 25).
A committee's decision, likewise, always gets its report, its mail and its checkpoint's tag.

A private Redis (tests/redis_server.py), never the shared one: stopping it loses whatever it held, as a
broker without an append-only file would; the outbox row is what keeps the task.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from django.db import transaction

from auditportal.accounts.models import User
from auditportal.approvals import services as approval_services
from auditportal.approvals.models import RequestState, ReviewRequest
from auditportal.experiments.backends.local import checkpoint_metadata_path
from auditportal.outbox.models import OutboxMessage
from auditportal.outbox.services import task_enqueue
from auditportal.reports.models import Report
from tests.approvals.conftest import demo_version, fair_trial_request, frank, hashes, in_review, runs, vote
from tests.browser.conftest import NO_CHROMIUM, chromium_path, require_system_tool
from tests.outbox.tasks import RECORD_RUN
from tests.redis_server import PrivateRedis, celery_broker, private_redis_fixture
from tests.worker import start_worker_fixture

__all__ = [
    "demo_version",
    "fair_trial_request",
    "frank",
    "private_redis_fixture",
    "runs",
    "start_worker_fixture",
]

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
        time.sleep(0.05)


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


def test_a_decision_while_the_broker_is_down_gets_its_report_its_mail_and_its_checkpoint_tag(
    private_redis: PrivateRedis,
    start_worker: Callable[..., subprocess.Popen[bytes]],
    fair_trial_request: ReviewRequest,
    carol: User,
    dave: User,
    frank: User,
    tmp_path: Path,
) -> None:
    if chromium_path() is None:  # the worker draws the report's figures
        require_system_tool(NO_CHROMIUM)
    # The submission's mail goes to the private broker too, and is lost when it stops: no other
    # test's worker finds it on the test settings' broker.
    with celery_broker(private_redis.url):
        request = in_review(fair_trial_request, carol)
        vote(request, dave)

    def decide() -> None:
        vote(request, frank)  # the deciding vote: it commits, and raises nothing

    queued = _while_the_broker_is_down(private_redis, decide)
    request.refresh_from_db()
    assert request.state == RequestState.APPROVED  # committed, though nothing reached the broker
    assert [message.name for message in queued] == [
        approval_services.REPORT_GENERATE_TASK,
        approval_services.MAIL_DECIDED_TASK,
        approval_services.TAG_CHECKPOINT_TASK,
    ]
    assert not Report.objects.filter(review_request=request).exists()
    metadata = checkpoint_metadata_path(request.checkpoint)
    assert not metadata.exists()

    mail = tmp_path / "mail"
    worker = start_worker(
        CELERY_BROKER_URL=private_redis.url,
        OUTBOX_DELIVER_SECONDS="1",
        EMAIL_BACKEND="file",
        EMAIL_FILE_PATH=str(mail),
        REPORT_STORAGE_DIR=str(tmp_path / "reports"),
    )
    subject = f"Review request #{request.pk} approved: Credit model v3"

    def mailed() -> bool:
        return mail.is_dir() and any(subject in path.read_text(encoding="utf-8") for path in mail.iterdir())

    def tagged() -> bool:
        return metadata.is_file() and "bias_audit" in json.loads(metadata.read_text(encoding="utf-8"))

    _until(mailed, worker, "the requester was mailed the decision")
    _until(tagged, worker, "the checkpoint was tagged")
    expected = {"request": request.pk, "approved": True, "document_sha256": hashes(request)}
    assert json.loads(metadata.read_text(encoding="utf-8"))["bias_audit"] == expected
    # Rendering (figures in Chromium) and certifying (the portal's keys made on first use) take longest.
    _until(Report.objects.filter(review_request=request).exists, worker, "the report was generated", timeout=300)
    report = Report.objects.get(review_request=request)
    assert report.request_outcome == "approved"

    def all_sent() -> bool:
        return not OutboxMessage.objects.filter(pk__in=[message.pk for message in queued], sent_at=None).exists()

    _until(all_sent, worker, "the three rows were marked sent")
    for message in queued:
        message.refresh_from_db()
        assert message.attempts == 2, message  # refused once, accepted once
