"""End to end through a real Celery worker (with embedded beat) in a subprocess.

The worker gets the test process's environment (same var directory, so the same filesystem broker,
dataset store and shards) and a DATABASE_URL naming the test database: a file for SQLite (see
conftest.py), ``test_<name>`` for PostgreSQL. Tests are transactional so the worker sees the rows.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from auditportal.accounts.models import User
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments.backends.local import run_dir
from auditportal.experiments.models import Experiment, ExperimentStatus, MetricPoint, Trial, TrialState
from tests.database import subprocess_database_url
from tests.experiments.conftest import metrics_in_file, processes_of
from tests.factories import DemoDatasetVersionFactory
from tests.worker import start_worker_fixture  # noqa: F401 (the start_worker fixture)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def e2e_version(transactional_db: None) -> DatasetVersion:
    return DemoDatasetVersionFactory.create(rows=2000)


def _assert_database_holds_exactly_the_reports(experiment: Experiment) -> None:
    for trial in experiment.trials.all():
        reported = metrics_in_file(run_dir(trial) / "metrics.jsonl")
        stored = {(p.kind, p.step, p.name): p.value for p in MetricPoint.objects.filter(trial=trial)}
        assert stored == reported, f"trial {trial.number}"


def test_a_small_search_on_the_demo_dataset_runs_to_completion_on_a_real_worker(
    e2e_version: DatasetVersion, start_worker: Callable[..., subprocess.Popen[bytes]]
) -> None:
    start_worker()
    out = StringIO()
    call_command(
        "launch_experiment",
        "--dataset",
        str(e2e_version.pk),
        "--template",
        "random",
        "--max-trials",
        "2",
        "--batches",
        "16",
        "--wait",
        "--timeout",
        "300",
        "--format",
        "json",
        stdout=out,
    )
    result = json.loads(out.getvalue())
    assert result["status"] == ExperimentStatus.COMPLETED
    assert [trial["state"] for trial in result["trials"]] == ["COMPLETED", "COMPLETED"]
    assert all(trial["steps"] == 16 for trial in result["trials"])
    assert all(trial["metrics"]["eod"] is not None for trial in result["trials"])
    experiment = Experiment.objects.get(pk=result["experiment"])
    _assert_database_holds_exactly_the_reports(experiment)
    assert {t.hparams["learning_rate"] for t in experiment.trials.all()} == {
        t["hparams"]["learning_rate"] for t in result["trials"]
    }
    # Every trial was judged on its last validation, for every attribute and the intersection.
    for trial in experiment.trials.all():
        judged = {verdict.attribute: verdict for verdict in trial.verdicts.all()}
        assert set(judged) == {"gender", "age_group", "gender&age_group"}
        assert {verdict.step for verdict in judged.values()} == {trial.latest_step}
        gender = judged["gender"].document["groups"]
        assert set(gender) == {"female", "male", "nonbinary"}


def test_a_worker_killed_while_ingesting_leaves_nothing_duplicated_or_missing_after_restart(
    e2e_version: DatasetVersion, start_worker: Callable[..., subprocess.Popen[bytes]], bob: User
) -> None:
    env = {
        "EXPERIMENT_TRAINER_MODULE": "tests.experiments.fake_trainer",
        "FAKE_TRAINER_POINTS": "6000",
        "EXPERIMENT_INGEST_BATCH_SIZE": "500",
        "EXPERIMENT_POLL_LEASE_SECONDS": "3",
    }
    worker = start_worker(**env)
    out = StringIO()
    call_command(
        "launch_experiment",
        "--dataset",
        str(e2e_version.pk),
        "--template",
        "single",
        "--batches",
        "40",
        "--user",
        bob.username,
        stdout=out,
    )
    experiment = Experiment.objects.get(pk=int(out.getvalue().strip().splitlines()[-1]))
    # Validation every 10 batches: 4 steps, each with training (1 name) and validation (6009 names).
    expected_points = 4 * (1 + 6000 + 9)

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        count = MetricPoint.objects.filter(trial__experiment=experiment).count()
        if 0 < count < expected_points:
            break
        assert count < expected_points, "the worker ingested everything before it could be killed"
        time.sleep(0.05)
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait()
    ingested_when_killed = MetricPoint.objects.filter(trial__experiment=experiment).count()
    assert 0 < ingested_when_killed < expected_points

    start_worker(**env)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        experiment.refresh_from_db()
        if not experiment.is_active:
            break
        time.sleep(0.05)
    assert experiment.status == ExperimentStatus.COMPLETED
    trial = Trial.objects.get(experiment=experiment)
    assert trial.state == TrialState.COMPLETED
    assert MetricPoint.objects.filter(trial=trial).count() == expected_points
    _assert_database_holds_exactly_the_reports(experiment)


def _can_unshare_pid() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, check=False, timeout=20
    )
    return probe.returncode == 0


_CANCEL_FROM_ANOTHER_NAMESPACE = """
import os, sys, django
django.setup()
from auditportal.accounts.models import User
from auditportal.experiments import services
from auditportal.experiments.models import Experiment
experiment_id, pid = int(sys.argv[1]), int(sys.argv[2])
# In a PID namespace of its own, as a web container is: the trainer's pid means nothing here.
assert os.getpid() < 10, os.getpid()
assert not os.path.exists(f"/proc/{pid}"), f"pid {pid} is visible"
experiment = Experiment.objects.get(pk=experiment_id)
print(services.experiment_cancel(user=User.objects.get(username=sys.argv[3]), experiment=experiment).status)
"""


def test_a_cancel_from_another_pid_namespace_stops_the_trainer_processes(
    e2e_version: DatasetVersion, start_worker: Callable[..., subprocess.Popen[bytes]], bob: User
) -> None:
    if not _can_unshare_pid():
        pytest.skip("unshare --pid needs root (or user namespaces) on this machine")
    start_worker(EXPERIMENT_TRAINER_MODULE="tests.experiments.fake_trainer", FAKE_TRAINER_SLEEP="5")
    out = StringIO()
    call_command(
        "launch_experiment",
        *("--dataset", str(e2e_version.pk), "--template", "random", "--max-trials", "2", "--batches", "40"),
        *("--user", bob.username),
        stdout=out,
    )
    experiment = Experiment.objects.get(pk=int(out.getvalue().strip().splitlines()[-1]))
    deadline = time.monotonic() + 120
    trial = None
    while time.monotonic() < deadline:
        trial = experiment.trials.filter(number=1).first()
        if trial is not None and len(processes_of(run_dir(trial))) >= 2:  # the runner and the trainer
            break
        time.sleep(0.2)
    assert trial is not None
    running = processes_of(run_dir(trial))
    assert len(running) >= 2

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "auditportal.settings.test",
        "DATABASE_URL": subprocess_database_url(),
        "PYTHONPATH": str(REPO),
    }
    cancel = subprocess.run(
        [
            *("unshare", "--pid", "--fork", "--mount-proc"),
            *(sys.executable, "-c", _CANCEL_FROM_ANOTHER_NAMESPACE, str(experiment.pk), str(running[0]), bob.username),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert cancel.returncode == 0, cancel.stderr[-3000:]
    # The status the cancel read back after its commit: the worker (the stop task is queued with the
    # cancel) may already have stopped both trials and marked the experiment cancelled by then.
    assert cancel.stdout.strip().splitlines()[-1] in (ExperimentStatus.CANCELLING, ExperimentStatus.CANCELLED)

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        experiment.refresh_from_db()
        if experiment.status == ExperimentStatus.CANCELLED:
            break
        time.sleep(0.05)
    assert experiment.status == ExperimentStatus.CANCELLED
    assert processes_of(run_dir(trial)) == []
    trial.refresh_from_db()
    assert trial.state == TrialState.CANCELED
    assert trial.ended_at is not None
    assert experiment.cancel_requested_at is not None
    assert experiment.cancel_requested_at <= trial.ended_at
    assert experiment.trials.get(number=2).state == TrialState.CANCELED
