"""Two real Celery workers (two processes) count and judge one deployment's batches, posted over HTTP
all at once: every batch is counted exactly once, the looks' seq and the batches' positions run 1, 2,
3... with no gap and no duplicate, and each look's window sums exactly the batches before it, so no
batch is lost or counted twice (docs/monitoring.md: "a busy organisation adds workers")."""

from __future__ import annotations

import io
import re
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from django.conf import settings

from auditportal.accounts import services as account_services
from auditportal.accounts.models import TokenScope, User
from auditportal.monitoring import services
from auditportal.monitoring.models import BatchState, Deployment, Look, PredictionBatch
from tests.monitoring.conftest import Approve
from tests.worker import start_worker_fixture  # noqa: F401 (the start_worker fixture)

pytestmark = [pytest.mark.slow, pytest.mark.uses_database, pytest.mark.django_db(transaction=True)]

BATCHES = 40
CSV_EVERY = 5  # every fifth batch is a CSV file (counted by the worker outside the lock), the rest counts
WAIT_SECONDS = 150
CELLS = ("tp", "fn", "fp", "tn")
OUTCOME = {"tp": (1, 1), "fn": (0, 1), "fp": (1, 0), "tn": (0, 0)}


def cells_of(index: int) -> dict[str, dict[str, int]]:
    """Batch ``index``'s counts per group: within every limit of the default policy, each batch other."""
    return {
        "f": {"tp": 100 + index % 7, "fn": index % 3, "fp": 10, "tn": 100 + index % 4},
        "m": {"tp": 100 + index % 5, "fn": index % 2, "fp": 10 + index % 5, "tn": 100},
        "": {"tp": 20, "fn": 0, "fp": 3, "tn": 20 + index % 3},  # rows of unknown group
    }


def as_counts(cells: dict[str, dict[str, int]]) -> dict[str, Any]:
    return {"gender": {"groups": {g: c for g, c in cells.items() if g}, "unknown": cells[""]}}


def as_csv(cells: dict[str, dict[str, int]]) -> bytes:
    lines = ["pred,gender,label"]
    for group, counted in cells.items():
        for cell, count in counted.items():
            pred, label = OUTCOME[cell]
            lines += [f"{pred},{group},{label}"] * count
    return ("\n".join(lines) + "\n").encode()


TASK_LINE = re.compile(r"Task (?P<name>[\w.]+)\[(?P<id>[0-9a-f-]+)\] (?P<what>received|succeeded|raised|retry)")


def worker_tasks(log: Path) -> tuple[set[str], int]:
    """The ids of the tasks a worker's log shows received and not finished, and how many batches it counted."""
    text = log.read_text(errors="replace") if log.exists() else ""
    open_ids: set[str] = set()
    counted = 0
    for found in TASK_LINE.finditer(text):
        if found["what"] == "received":
            open_ids.add(found["id"])
        else:
            open_ids.discard(found["id"])
            counted += found["name"] == "monitoring.count_batch" and found["what"] == "succeeded"
    return open_ids, counted


def ready_and_idle(log: Path) -> bool:
    return log.exists() and " ready." in log.read_text(errors="replace") and not worker_tasks(log)[0]


@pytest.mark.skipif(
    settings.CELERY_BROKER_URL.startswith("filesystem://"),
    reason="two workers on one queue need a broker that hands each message to one of them (Redis); the "
    "filesystem broker of the SQLite run does not promise it (the PostgreSQL + Redis run runs this)",
)
def test_two_workers_count_every_batch_of_one_deployment_once_and_the_windows_sum_them_all(
    live_server: Any,
    approve: Approve,
    deployment: Deployment,
    bob: User,
    erin: User,
    tmp_path: Path,
    start_worker: Callable[..., subprocess.Popen[bytes]],
) -> None:
    approve("credit:4")
    services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob)
    token = account_services.api_token_create(
        user=erin, account="scoring-service", name="scoring", days=1, scope=TokenScope.MONITORING
    ).secret
    workers = [start_worker(), start_worker()]
    logs = [tmp_path / "worker-0.log", tmp_path / "worker-1.log"]
    deadline = time.monotonic() + WAIT_SECONDS
    while not all(ready_and_idle(log) for log in logs):
        # Both consume, done with what the approvals queued (a report to render), before the first post,
        # so that both take batches.
        assert time.monotonic() < deadline, [log.read_text(errors="replace")[-3000:] for log in logs]
        time.sleep(0.2)
    url = f"{live_server.url}/api/v1/deployments/{deployment.name}/-/batches/"

    def post(index: int) -> int:
        headers = {"Authorization": f"Token {token}"}
        batch_id = f"hour-{index:03d}"
        if index % CSV_EVERY == 0:
            files = {"file": (f"{batch_id}.csv", io.BytesIO(as_csv(cells_of(index))), "text/csv")}
            data = {"batch_id": batch_id, "prediction": "pred", "label": "label"}
            answer = requests.post(url, headers=headers, data=data, files=files, timeout=60)
        else:
            body = {"batch_id": batch_id, "counts": as_counts(cells_of(index))}
            answer = requests.post(url, headers=headers, json=body, timeout=60)
        assert answer.status_code == 202, answer.text
        return index

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert sorted(pool.map(post, range(BATCHES))) == list(range(BATCHES))

    deadline = time.monotonic() + WAIT_SECONDS
    while PredictionBatch.objects.filter(deployment=deployment, state=BatchState.COUNTED).count() < BATCHES:
        assert all(worker.poll() is None for worker in workers), [log.read_text()[-3000:] for log in logs]
        assert not PredictionBatch.objects.filter(state=BatchState.FAILED).exists()
        raised = [line for log in logs for line in log.read_text(errors="replace").splitlines() if "] raised " in line]
        assert not raised, raised  # e.g. two workers taking one position (an IntegrityError): a race
        assert time.monotonic() < deadline, [log.read_text(errors="replace")[-3000:] for log in logs]
        time.sleep(0.3)

    # Both workers took part (otherwise this test would prove nothing about two of them).
    counted_by = [worker_tasks(log)[1] for log in logs]
    assert all(n > 0 for n in counted_by), counted_by

    batches = list(PredictionBatch.objects.filter(deployment=deployment).order_by("position"))
    assert [b.position for b in batches] == list(range(1, BATCHES + 1))
    assert {b.serving_change_id for b in batches} == {deployment.changes.order_by("-seq").first().pk}  # type: ignore[union-attr]
    expected = {b.batch_id: cells_of(int(b.batch_id.split("-")[1])) for b in batches}
    for batch in batches:
        assert batch.counts is not None
        kept = batch.counts["gender"]
        cells = {group: {c: kept["groups"][group][c] for c in CELLS} for group in ("f", "m")}
        cells[""] = {c: kept["unknown"][c] for c in CELLS}
        assert cells == expected[batch.batch_id], batch.batch_id
        assert batch.rows == sum(sum(c.values()) for c in expected[batch.batch_id].values())

    looks = list(Look.objects.filter(deployment=deployment).order_by("seq"))
    assert [look.seq for look in looks] == list(range(1, BATCHES + 1))  # one look per batch, no gap
    assert sorted(look.batch_id for look in looks) == sorted(b.pk for b in batches)  # each batch once
    assert not any(look.breached for look in looks)
    by_position = [b.batch_id for b in batches]
    for look in looks:
        position = next(b.position for b in batches if b.pk == look.batch_id)
        assert position is not None
        # The window of the look is exactly the batches up to its own position: none missing, none twice.
        assert look.batches == by_position[:position], look.seq
        assert look.rows == sum(b.rows or 0 for b in batches[:position])
    # The last look judged the sum of every batch: its FNR counts per group are the batches' sums.
    last = max(looks, key=lambda look: len(look.batches))
    assert len(last.batches) == BATCHES
    for group in ("f", "m"):
        fnr = next(r for r in last.judgements["gender"]["rates"] if r["metric"] == "fnr" and r["group"] == group)
        assert fnr["successes"] == sum(cells[group]["fn"] for cells in expected.values())
        assert fnr["trials"] == sum(cells[group]["tp"] + cells[group]["fn"] for cells in expected.values())
    assert settings.MONITORING_WINDOW_BATCHES >= BATCHES  # one window: the last look sums them all
