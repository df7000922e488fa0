"""Production batches: posted (a file or counts) with a monitoring token, idempotent by batch id, counted
by the worker's service against a naive pandas count, late labels, and the looks' judgement."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from django.conf import settings
from django.test import Client, override_settings

from auditportal.accounts import services as account_services
from auditportal.accounts.models import TokenScope, User
from auditportal.approvals import selectors as approval_selectors
from auditportal.approvals.models import RequestState
from auditportal.fairness.statistics import batchcount
from auditportal.fairness.statistics.batchcount import AttributeCounts
from auditportal.fairness.statistics.monitor import judge_look
from auditportal.monitoring import selectors, services
from auditportal.monitoring.models import (
    BatchLabels,
    BatchState,
    Deployment,
    DeploymentState,
    Incident,
    Look,
    PredictionBatch,
)
from auditportal.monitoring.services import batches as batches_service
from auditportal.outbox.models import OutboxMessage
from tests.monitoring.conftest import Approve

URL = "/api/v1/deployments/credit-scoring/prod/-/batches/"


def _token(erin: User, scope: TokenScope, account: str) -> Client:
    secret = account_services.api_token_create(user=erin, account=account, name="scoring", days=1, scope=scope).secret
    return Client(HTTP_AUTHORIZATION=f"Token {secret}")


@pytest.fixture
def serving(deployment: Deployment, approve: Approve, bob: User) -> Deployment:
    approve("credit:4")
    return services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob)


@pytest.fixture
def pipeline(erin: User) -> Client:
    return _token(erin, TokenScope.MONITORING, "scoring-service")


def _frame(rows: int, seed: int = 1, *, label_missing: float = 0.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "id": [f"r{i}" for i in range(rows)],
            "score": rng.random(rows).round(4),
            "gender": rng.choice(["f", "m", "x", "unknown"], rows, p=[0.45, 0.45, 0.05, 0.05]),
            "label": rng.integers(0, 2, rows).astype(float),
        }
    )
    if label_missing:
        frame.loc[rng.random(rows) < label_missing, "label"] = np.nan
    return frame


def _csv(frame: pd.DataFrame, name: str = "batch.csv") -> io.BytesIO:
    data = io.BytesIO(frame.to_csv(index=False).encode())
    data.name = name
    return data


def _post_file(client: Client, frame: pd.DataFrame, batch_id: str, **extra: Any) -> Any:
    body = {"batch_id": batch_id, "file": _csv(frame), "score": "score", "threshold": "0.5", "label": "label", **extra}
    return client.post(URL, body)


def _counts(counted: PredictionBatch | BatchLabels) -> dict[str, Any]:
    assert counted.counts is not None, "counted"
    return dict(counted.counts)


def _naive(frame: pd.DataFrame) -> dict[str, dict[str, int]]:
    """The oracle: pandas, row by row in meaning."""
    selected = frame["score"] >= 0.5
    out: dict[str, dict[str, int]] = {}
    for group, part in frame.groupby("gender"):
        sel, lab = selected[part.index], part["label"]
        known = lab.notna()
        out[str(group)] = {
            "tp": int(((lab == 1) & sel).sum()),
            "fn": int(((lab == 1) & ~sel).sum()),
            "fp": int(((lab == 0) & sel).sum()),
            "tn": int(((lab == 0) & ~sel).sum()),
            "unlabelled": int((~known).sum()),
            "unlabelled_selected": int((~known & sel).sum()),
        }
    return out


def test_a_csv_batch_is_kept_queued_and_counted_as_pandas_counts_it(serving: Deployment, pipeline: Client) -> None:
    frame = _frame(3000, label_missing=0.2)
    response = _post_file(pipeline, frame, "2026-12-07T08")
    assert response.status_code == 202, response.content
    assert response["Location"] == URL + "2026-12-07T08/"
    assert response.json()["state"] == "received"
    batch = PredictionBatch.objects.get(batch_id="2026-12-07T08")
    assert OutboxMessage.objects.filter(name="monitoring.count_batch", args=[batch.pk]).exists()
    services.batch_count(batch_id=batch.pk)
    batch.refresh_from_db()
    assert batch.state == BatchState.COUNTED
    assert batch.rows == 3000
    assert batch.storage_path == ""
    expected = _naive(frame)
    counts = _counts(batch)["gender"]
    assert counts["unknown"] == expected.pop("unknown")
    assert counts["groups"] == expected
    assert _counts(batch)["gender"]["groups"]["x"]  # a group the audited data never had is kept
    look = Look.objects.get(batch=batch)
    assert look.judgements["gender"]["undeclared"] == ["x"]
    detail = pipeline.get(URL + "2026-12-07T08/").json()
    assert detail["look"]["seq"] == 1
    assert detail["counts"] == batch.counts


def test_the_looks_judgement_equals_judge_look_on_the_same_counts(
    serving: Deployment, pipeline: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The random frames breach the default FNR limit: the breach's consequences (the model suspended
    # after the first batch, so no second look) are test_a_batch_whose_look_confirms_a_breach...'s; here
    # only the look's arithmetic over two batches is compared.
    monkeypatch.setattr(batches_service, "breach_confirm", lambda **_: None)
    frames = [_frame(800, seed) for seed in (1, 2)]
    for index, frame in enumerate(frames):
        _post_file(pipeline, frame, f"b{index}")
        services.batch_count(batch_id=PredictionBatch.objects.get(batch_id=f"b{index}").pk)
    look = selectors.look_latest(deployment=serving)
    assert look is not None
    assert look.batches == ["b0", "b1"]
    total = AttributeCounts()
    for frame in frames:
        naive = _naive(frame)
        unknown = naive.pop("unknown")
        total.add(AttributeCounts(groups=naive, unknown=unknown))
    reference = selectors.model_reference(deployment=serving, model_identifier="credit:4")
    spec = selectors.monitor_policy_active(deployment=serving).monitor_spec
    training, training_unknown = reference.training["gender"]
    policy = services.monitor_policy_of(spec, training=training, training_unknown=training_unknown, attributes=1)
    expected = judge_look(
        policy,
        {group: batchcount.window_counts(cells) for group, cells in total.groups.items()},
        unknown_rows=batchcount.window_counts(total.unknown).rows,
        window=1,
    )
    assert look.judgements["gender"] == expected.as_json()
    assert look.breached == expected.breached
    latest = pipeline.get("/api/v1/deployments/credit-scoring/prod/-/looks/").json()["results"][0]
    assert latest["seq"] == look.seq


def test_the_same_id_and_content_is_200_and_other_content_is_409_and_nothing_changes(
    serving: Deployment, pipeline: Client
) -> None:
    frame = _frame(200)
    assert _post_file(pipeline, frame, "b1").status_code == 202
    again = _post_file(pipeline, frame, "b1")
    assert again.status_code == 200
    other = _post_file(pipeline, _frame(200, seed=9), "b1")
    assert other.status_code == 409, other.content
    assert "other content" in str(other.json())
    assert PredictionBatch.objects.count() == 1
    assert OutboxMessage.objects.filter(name="monitoring.count_batch").count() == 1


def test_pre_aggregated_counts_are_a_batch_too(serving: Deployment, pipeline: Client) -> None:
    counts = {
        "gender": {
            "groups": {"f": {"tp": 40, "fn": 2, "fp": 5, "tn": 60}, "m": {"tp": 45, "fn": 1, "fp": 4, "tn": 55}},
            "unknown": {"unlabelled": 3, "unlabelled_selected": 1},
        }
    }
    response = pipeline.post(URL, {"batch_id": "agg-1", "counts": counts}, content_type="application/json")
    assert response.status_code == 202, response.content
    batch = PredictionBatch.objects.get(batch_id="agg-1")
    services.batch_count(batch_id=batch.pk)
    batch.refresh_from_db()
    assert batch.rows == 215
    assert _counts(batch)["gender"]["groups"]["f"]["tp"] == 40
    bad = pipeline.post(
        URL,
        {"batch_id": "agg-2", "counts": {"gender": {"groups": {"f": {"tp": -1}}}}},
        content_type="application/json",
    )
    assert bad.status_code == 400
    assert "counts.gender.groups.f.tp" in str(bad.json())


def test_a_missing_column_is_a_400_naming_it_and_nothing_is_kept(serving: Deployment, pipeline: Client) -> None:
    frame = _frame(50).rename(columns={"gender": "sex"})
    response = _post_file(pipeline, frame, "b1")
    assert response.status_code == 400
    assert "'gender' (sensitive attribute)" in str(response.json())
    assert not PredictionBatch.objects.exists()


@override_settings(MONITORING_BATCH_MAX_BYTES=1000)
def test_a_batch_too_large_is_refused_with_the_limit_before_it_is_stored(serving: Deployment, pipeline: Client) -> None:
    response = _post_file(pipeline, _frame(500), "big")
    assert response.status_code == 400
    assert "1000 bytes" in str(response.json()) or "limit" in str(response.json())
    assert "MONITORING_BATCH_MAX_SIZE" in str(response.json())
    assert not PredictionBatch.objects.exists()


def test_another_scope_is_401_and_an_unknown_deployment_404(
    serving: Deployment, pipeline: Client, erin: User, carol: User
) -> None:
    gate = _token(erin, TokenScope.GATE, "argo-rollouts")
    assert _post_file(gate, _frame(10), "b1").status_code == 401
    assert gate.get(URL).status_code == 401
    missing = pipeline.post("/api/v1/deployments/fraud/prod/-/batches/", {"batch_id": "b1", "counts": {}})
    assert missing.status_code == 404
    reviewer = Client()
    reviewer.force_login(carol)
    assert reviewer.get(URL).status_code == 403


def test_late_labels_move_pending_rows_into_labelled_counts_and_judge_again(
    serving: Deployment, pipeline: Client, django_capture_on_commit_callbacks: Any
) -> None:
    frame = _frame(400, label_missing=1.0)
    assert _post_file(pipeline, frame, "b1", row_key="id").status_code == 202
    batch = PredictionBatch.objects.get(batch_id="b1")
    services.batch_count(batch_id=batch.pk)
    batch.refresh_from_db()
    assert batch.pending_rows == 400
    first_side_file = batch.pending_path
    assert first_side_file
    labelled = frame.copy()
    labelled["label"] = np.random.default_rng(5).integers(0, 2, 400).astype(float)
    part = labelled.iloc[:300][["id", "label"]]
    response = pipeline.post(URL + "b1/labels/", {"file": _csv(part, "labels.csv"), "row_key": "id", "label": "label"})
    assert response.status_code == 202, response.content
    labels = BatchLabels.objects.get(batch=batch)
    with django_capture_on_commit_callbacks(execute=True):
        services.labels_count(labels_id=labels.pk)
    labels.refresh_from_db()
    assert labels.labelled == 300
    batch.refresh_from_db()
    assert batch.pending_rows == 100
    assert pipeline.get(URL + "b1/").json()["pending_rows"] == 100
    # The rows still pending are in a new side file; the old one is gone.
    assert batch.pending_path not in ("", first_side_file)
    assert not (Path(settings.DATASET_STORAGE_DIR) / first_side_file).exists()
    # The batch's own counts are unchanged; its counts plus the delta equal a naive count.
    total = AttributeCounts.from_json(_counts(batch)["gender"])
    total.add(AttributeCounts.from_json(_counts(labels)["gender"]))
    mixed = labelled.copy()
    mixed.loc[300:, "label"] = np.nan
    expected = _naive(mixed)
    assert total.unknown == expected.pop("unknown")
    assert total.groups == expected
    assert Look.objects.filter(labels=labels).count() == 1
    services.labels_count(labels_id=labels.pk)  # a retry changes nothing
    assert Look.objects.filter(deployment=serving).count() == 2


def test_a_side_file_that_cannot_be_written_leaves_the_batch_received_and_no_file(
    serving: Deployment, pipeline: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _post_file(pipeline, _frame(50, label_missing=1.0), "b1", row_key="id").status_code == 202
    batch = PredictionBatch.objects.get(batch_id="b1")
    root = Path(settings.DATASET_STORAGE_DIR) / "monitoring-batches"
    before = set(root.iterdir())

    def full_disk(pending: batchcount.PendingRows, relative: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(batches_service, "_pending_write", full_disk)
    with pytest.raises(OSError, match="No space left"):
        services.batch_count(batch_id=batch.pk)
    batch.refresh_from_db()
    assert batch.state == BatchState.RECEIVED
    assert batch.pending_path == ""
    assert not Look.objects.filter(batch=batch).exists()
    assert set(root.iterdir()) == before  # the side file's folder is gone; the batch's file stays for the retry
    monkeypatch.undo()
    services.batch_count(batch_id=batch.pk)  # the task's retry
    batch.refresh_from_db()
    assert (batch.state, batch.pending_rows) == (BatchState.COUNTED, 50)
    assert (Path(settings.DATASET_STORAGE_DIR) / batch.pending_path).is_file()


def test_two_label_posts_to_one_batch_count_each_row_once(
    serving: Deployment, pipeline: Client, django_capture_on_commit_callbacks: Any
) -> None:
    frame = _frame(400, label_missing=1.0)
    assert _post_file(pipeline, frame, "b1", row_key="id").status_code == 202
    batch = PredictionBatch.objects.get(batch_id="b1")
    services.batch_count(batch_id=batch.pk)
    rng = np.random.default_rng(9)
    first, second = frame.copy(), frame.copy()
    first["label"] = rng.integers(0, 2, 400).astype(float)
    second["label"] = 1.0 - first["label"]  # rows 200-299 are labelled again, otherwise
    posts = [first.iloc[:300][["id", "label"]], second.iloc[200:][["id", "label"]]]
    for index, part in enumerate(posts):
        response = pipeline.post(
            URL + "b1/labels/", {"file": _csv(part, f"labels-{index}.csv"), "row_key": "id", "label": "label"}
        )
        assert response.status_code == 202, response.content
    for labels in BatchLabels.objects.filter(batch=batch).order_by("pk"):
        with django_capture_on_commit_callbacks(execute=True):
            services.labels_count(labels_id=labels.pk)
    counted = list(BatchLabels.objects.filter(batch=batch).order_by("pk"))
    assert [(labels.labelled, labels.unmatched) for labels in counted] == [(300, 0), (100, 100)]
    batch.refresh_from_db()
    assert batch.pending_rows == 0
    assert batch.pending_path == ""
    total = AttributeCounts.from_json(_counts(batch)["gender"])
    for labels in counted:
        total.add(AttributeCounts.from_json(_counts(labels)["gender"]))
    # The first label of rows 200-299 stands: they were no longer pending when the second came.
    expected = _naive(pd.concat([first.iloc[:300], second.iloc[300:]]))
    assert total.unknown == expected.pop("unknown")
    assert total.groups == expected


def test_a_batch_whose_look_confirms_a_breach_suspends_the_model_and_rolls_the_deployment_back(
    deployment: Deployment, approve: Approve, bob: User, pipeline: Client
) -> None:
    earlier, later = approve("credit:3"), approve("credit:4")
    services.deployment_promote(deployment=deployment, model_identifier="credit:3", by=bob)
    services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob)
    # Women's false-negative rate at 60/160 = 37.5% against the default limit of at most 5%.
    counts = {
        "gender": {
            "groups": {
                "f": {"tp": 100, "fn": 60, "fp": 10, "tn": 100},
                "m": {"tp": 150, "fn": 3, "fp": 12, "tn": 140},
            }
        }
    }
    response = pipeline.post(URL, {"batch_id": "hour-1", "counts": counts}, content_type="application/json")
    assert response.status_code == 202, response.content
    batch = PredictionBatch.objects.get(batch_id="hour-1")
    services.batch_count(batch_id=batch.pk)

    look = Look.objects.get(batch=batch)
    assert look.breached
    incident = Incident.objects.get(model_identifier="credit:4")
    assert incident.cause["look"] == look.pk
    assert incident.cause["batches"] == [batch.pk]
    document = incident.document
    assert document is not None
    assert document["attribute"] == "gender"
    assert "(gender)" in incident.reason
    assert any(b["metric"] == "fnr" and b["group"] == "f" for b in document["breaches"])
    deployment.refresh_from_db()
    assert (deployment.state, deployment.model_identifier) == (DeploymentState.ROLLED_BACK, "credit:3")
    later.refresh_from_db()
    earlier.refresh_from_db()
    assert (later.state, earlier.state) == (RequestState.SUSPENDED, RequestState.APPROVED)
    gate = approval_selectors.gate_answer(model_identifier="credit:4")
    assert gate is not None
    assert not gate.approved

    # The next batch is the model now serving's (credit:3), with the same harm: it is suspended too, and
    # with no earlier approved model left the deployment is suspended.
    again = pipeline.post(URL, {"batch_id": "hour-2", "counts": counts}, content_type="application/json")
    assert again.status_code == 202, again.content
    second = PredictionBatch.objects.get(batch_id="hour-2")
    assert second.model_identifier == "credit:3"
    services.batch_count(batch_id=second.pk)
    assert Incident.objects.filter(model_identifier="credit:4").count() == 1
    assert Incident.objects.filter(model_identifier="credit:3").count() == 1
    deployment.refresh_from_db()
    assert (deployment.state, deployment.model_identifier) == (DeploymentState.SUSPENDED, "")
    earlier.refresh_from_db()
    assert earlier.state == RequestState.SUSPENDED
