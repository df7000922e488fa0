"""The browser flow's two tasks go through the outbox (auditportal/outbox): each is a row written in
the transaction that changes the upload, and a broker that is down delays the work instead of
failing the steward's request."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from kombu.exceptions import OperationalError

from auditportal.accounts.models import User
from auditportal.celery import app
from auditportal.datasets import services
from auditportal.datasets.models import StagedStatus, StagedUpload
from auditportal.fairness.files.tabular import DatasetSpec
from auditportal.outbox import broker
from auditportal.outbox.models import OutboxMessage
from auditportal.outbox.services import outbox_deliver_pending
from tests.datasets.conftest import SMALL_CSV
from tests.factories import client_for

SPEC = DatasetSpec(label="approved", positive="1", attributes=("gender",))


def _refuse(*, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")


def test_the_upload_and_its_declaration_each_queue_their_task_with_the_upload_id(
    alice: User, small_csv: Path, dataset_storage: Path, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        staged = services.staged_upload_create(
            user=alice, source=small_csv, original_name="loans.csv", dataset_name="loans"
        )
    profile = OutboxMessage.objects.get()
    assert (profile.name, profile.args, profile.kwargs) == ("datasets.profile_staged_upload", [str(staged.pk)], {})

    services.staged_upload_profile(staged_id=staged.pk)
    staged.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=False):
        services.staged_upload_declare(user=alice, staged=staged, spec=SPEC)
    register = OutboxMessage.objects.exclude(pk=profile.pk).get()
    assert (register.name, register.args, register.kwargs) == (
        "datasets.register_staged_upload",
        [str(staged.pk)],
        {},
    )


def test_a_declaration_that_is_refused_queues_nothing(
    alice: User, small_csv: Path, dataset_storage: Path, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    staged = services.staged_upload_create(
        user=alice, source=small_csv, original_name="loans.csv", dataset_name="loans"
    )
    # Still being profiled: not waiting for a declaration.
    with django_capture_on_commit_callbacks(execute=False), pytest.raises(services.StagedUploadBusy):
        services.staged_upload_declare(user=alice, staged=staged, spec=SPEC)
    assert list(OutboxMessage.objects.values_list("name", flat=True)) == ["datasets.profile_staged_upload"]


def test_with_the_broker_down_the_upload_is_kept_and_profiled_once_the_broker_is_back(
    alice: User,
    dataset_storage: Path,
    django_capture_on_commit_callbacks: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    publish = broker.publish
    monkeypatch.setattr(broker, "publish", _refuse)
    upload = SimpleUploadedFile("loans.csv", SMALL_CSV.encode(), content_type="text/csv")
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(alice).post(reverse("datasets:upload"), {"name": "loans", "file": upload})
    staged = StagedUpload.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("datasets:declare", args=[staged.pk])
    assert staged.status == StagedStatus.PROFILING
    assert staged.path.read_text(encoding="utf-8") == SMALL_CSV
    row = OutboxMessage.objects.get()
    assert (row.sent_at, row.attempts) == (None, 1)
    assert "Connection refused" in row.last_error

    # The broker is back; beat's outbox.deliver hands the task over (a worker runs it: here, inline).
    monkeypatch.setattr(broker, "publish", publish)
    before = {name: app.conf[name] for name in ("task_always_eager", "task_eager_propagates")}
    app.conf.update(task_always_eager=True, task_eager_propagates=True)
    try:
        assert outbox_deliver_pending() == 1
    finally:
        app.conf.update(before)
    staged.refresh_from_db()
    assert staged.status == StagedStatus.READY
    row.refresh_from_db()
    assert row.sent_at is not None
