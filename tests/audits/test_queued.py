"""Prediction audits of large files run on a worker: the upload is kept, a task queued through the
outbox audits it with the same service as the web request, and a page (or the API's status) says
where it stands until it shows the audit, or why it failed."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.audits.models import PredictionAudit, QueuedPredictionAudit, QueuedStatus
from auditportal.audits.tasks import prediction_audit_run_queued_task
from auditportal.evidence.models import VerdictDocument
from auditportal.outbox.models import OutboxMessage
from tests.audits.conftest import PREDICTIONS_CSV
from tests.audits.test_views import _form, _upload
from tests.datasets.conftest import inline_worker
from tests.factories import client_for

__all__ = ["inline_worker"]

Worker = Callable[[], AbstractContextManager[Any]]


@pytest.fixture
def large(settings: SettingsWrapper, dataset_storage: Path) -> Path:
    """Every file over 100 bytes is large: the 12-row test file goes to the worker."""
    settings.AUDIT_INLINE_MAX_BYTES = 100
    return dataset_storage


def _stored_files(store: Path) -> list[Path]:
    return [path for path in (store / "audit-uploads").rglob("*") if path.is_file()]


def test_a_large_file_is_queued_then_audited_by_the_worker_and_the_page_shows_the_audit(
    bob: User, large: Path, inline_worker: Worker
) -> None:
    client = client_for(bob)
    response = client.post(reverse("audits:prediction-new"), _form())
    queued = QueuedPredictionAudit.objects.get()
    assert response.status_code == 302, response.content.decode()
    assert response["Location"] == reverse("audits:prediction-queued", args=[queued.pk])
    # Nothing audited in the request: the file is kept and the task is in the outbox.
    assert queued.status == QueuedStatus.QUEUED
    assert not PredictionAudit.objects.exists()
    assert len(_stored_files(large)) == 1
    assert OutboxMessage.objects.get().name == "audits.run_queued_prediction_audit"
    # The queueing is in the log, by the uploader, with the file it keeps.
    event = Event.objects.get(verb=Verb.PREDICTION_AUDIT_QUEUED)
    assert (event.actor, event.target_type, event.target_id) == (bob, "audits.queuedpredictionaudit", str(queued.pk))
    assert event.data == {
        "file": "scores.csv",
        "size_bytes": len(PREDICTIONS_CSV.encode()),
        "sha256": hashlib.sha256(PREDICTIONS_CSV.encode()).hexdigest(),
    }
    page = client.get(response["Location"])
    assert page.status_code == 200
    assert "Waiting for a worker" in page.content.decode()
    status = client.get(reverse("audits:prediction-queued-status", args=[queued.pk])).json()
    assert (status["status"], status["audit_url"]) == ("queued", None)

    with inline_worker():
        # What the worker runs, through the Celery task (eager) as the outbox hands it over.
        prediction_audit_run_queued_task.delay(str(queued.pk))
    queued.refresh_from_db()
    audit = PredictionAudit.objects.get()
    assert (queued.status, queued.audit) == (QueuedStatus.DONE, audit)
    # The same audit, event and frozen document as in the web request, by the uploader.
    assert audit.created_by == bob
    assert audit.num_rows == 12
    assert list(audit.result["attributes"]) == ["gender", "age_group"]
    assert Event.objects.get(verb="prediction_audit.created").actor == bob
    assert VerdictDocument.objects.get().prediction_audit_id == audit.pk
    assert _stored_files(large) == []  # the file is not kept, as in the web request
    done = client.get(reverse("audits:prediction-queued", args=[queued.pk]))
    assert done.status_code == 302
    assert done["Location"] == reverse("audits:prediction", args=[audit.pk])
    status = client.get(reverse("audits:prediction-queued-status", args=[queued.pk])).json()
    assert (status["status"], status["audit_url"]) == ("done", reverse("audits:prediction", args=[audit.pk]))
    # A second delivery of the task does nothing.
    assert prediction_audit_run_queued_task(str(queued.pk)) is None
    assert PredictionAudit.objects.count() == 1


def test_a_file_the_audit_refuses_fails_with_the_reason_on_the_page(
    bob: User, large: Path, inline_worker: Worker
) -> None:
    client = client_for(bob)
    with inline_worker():
        response = client.post(reverse("audits:prediction-new"), _form(attributes="gender, region"))
    assert response.status_code == 302, response.content.decode()
    queued = QueuedPredictionAudit.objects.get()
    assert queued.status == QueuedStatus.FAILED
    assert queued.error.startswith("scores.csv, column 'region': declared columns not in the file: 'region'")
    assert not PredictionAudit.objects.exists()
    assert _stored_files(large) == []
    page = client.get(response["Location"]).content.decode()
    assert "declared columns not in the file: &#x27;region&#x27; (sensitive attribute)" in page
    assert "No audit was stored" in page


def test_a_file_refused_by_the_checks_that_read_no_data_is_refused_at_once(bob: User, large: Path) -> None:
    response = client_for(bob).post(reverse("audits:prediction-new"), _form(file=_upload(name="scores.xlsx")))
    assert response.status_code == 400
    assert "unsupported file type" in response.content.decode()
    assert not QueuedPredictionAudit.objects.exists()
    assert not OutboxMessage.objects.exists()
    assert not Event.objects.filter(verb=Verb.PREDICTION_AUDIT_QUEUED).exists()


def test_small_files_are_still_audited_in_the_request(bob: User, dataset_storage: Path) -> None:
    response = client_for(bob).post(reverse("audits:prediction-new"), _form())
    assert response.status_code == 302
    assert response["Location"] == reverse("audits:prediction", args=[PredictionAudit.objects.get().pk])
    assert not QueuedPredictionAudit.objects.exists()


def test_the_api_answers_202_with_a_status_url_then_the_audit(bob: User, large: Path, inline_worker: Worker) -> None:
    client = client_for(bob)
    data = {"file": _upload(), "label": "label", "prediction": "pred", "attributes": ["gender"]}
    response = client.post("/api/v1/audits/predictions/", data)
    assert response.status_code == 202, response.content.decode()
    body = response.json()
    queued = QueuedPredictionAudit.objects.get()
    assert body["status_url"] == f"/api/v1/audits/predictions/queued/{queued.pk}/"
    assert response["Location"] == body["status_url"]
    assert (body["status"], body["audit"], body["audit_url"], body["documents"]) == ("queued", None, None, [])
    with inline_worker():
        prediction_audit_run_queued_task.delay(str(queued.pk))
    status = client.get(body["status_url"]).json()
    audit = PredictionAudit.objects.get()
    assert (status["status"], status["audit"], status["error"]) == ("done", audit.pk, "")
    assert status["audit_url"] == f"/api/v1/audits/predictions/{audit.pk}/"
    # Once done the status names the verdict document frozen with the audit, as the audit does.
    frozen = VerdictDocument.objects.get(prediction_audit=audit)
    ref = {"id": frozen.pk, "sha256": frozen.sha256, "url": f"/api/v1/documents/{frozen.pk}/"}
    assert status["documents"] == [ref]
    assert ref["sha256"] == hashlib.sha256(frozen.canonical_bytes).hexdigest()
    document = client.get(status["audit_url"]).json()
    assert document["file"]["sha256"] == audit.sha256
    assert document["rows"] == 12
    assert document["documents"] == [ref]


def test_only_the_account_that_queued_an_audit_sees_its_status(bob: User, carol: User, large: Path) -> None:
    client_for(bob).post(reverse("audits:prediction-new"), _form())
    queued = QueuedPredictionAudit.objects.get()
    other = client_for(carol)
    assert other.get(reverse("audits:prediction-queued", args=[queued.pk])).status_code == 404
    assert other.get(reverse("audits:prediction-queued-status", args=[queued.pk])).status_code == 404
    assert other.get(f"/api/v1/audits/predictions/queued/{queued.pk}/").status_code == 404


def test_a_parquet_file_declaring_many_rows_goes_to_the_worker(
    bob: User, dataset_storage: Path, settings: SettingsWrapper, tmp_path: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    settings.AUDIT_INLINE_MAX_ROWS = 10
    path = tmp_path / "scores.parquet"
    pq.write_table(pa.table({"label": [1, 0] * 6, "pred": [1, 1] * 6, "gender": ["f", "m"] * 6}), path)
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("scores.parquet", path.read_bytes())
    response = client_for(bob).post(reverse("audits:prediction-new"), _form(file=upload, attributes="gender"))
    assert response.status_code == 302, response.content.decode()
    assert QueuedPredictionAudit.objects.get().status == QueuedStatus.QUEUED


def test_a_small_parquet_file_whose_dictionary_decodes_past_the_inline_bound_goes_to_the_worker(
    bob: User, dataset_storage: Path, settings: SettingsWrapper, tmp_path: Path, inline_worker: Worker
) -> None:
    # The finding's shape: few distinct long values repeated over many rows, a small file that
    # decodes to far more than the web request reads (8 x AUDIT_INLINE_MAX_SIZE = 8 MiB here).
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.AUDIT_INLINE_MAX_BYTES = 1024**2
    rows = 100_000
    codes = (np.arange(rows) % 2).astype(np.int32)
    gender = pa.DictionaryArray.from_arrays(codes, pa.array(["f" * 100, "m" * 100]))
    path = tmp_path / "scores.parquet"
    pq.write_table(
        pa.table({"label": pa.array(codes), "pred": pa.array(codes), "gender": gender}), path, compression="zstd"
    )
    assert path.stat().st_size < settings.AUDIT_INLINE_MAX_BYTES
    upload = SimpleUploadedFile("scores.parquet", path.read_bytes())
    with inline_worker():
        response = client_for(bob).post(reverse("audits:prediction-new"), _form(file=upload, attributes="gender"))
    assert response.status_code == 302, response.content.decode()
    queued = QueuedPredictionAudit.objects.get()
    assert response["Location"] == reverse("audits:prediction-queued", args=[queued.pk])
    # The worker reads it under DATASET_MAX_DECOMPRESSED_SIZE.
    assert (queued.status, queued.error) == (QueuedStatus.DONE, "")
    assert queued.audit is not None
    assert queued.audit.num_rows == rows
