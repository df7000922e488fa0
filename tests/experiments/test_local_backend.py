from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auditportal.accounts.models import User
from auditportal.activity.models import Event
from auditportal.datasets.models import DatasetVersion
from auditportal.datasets.services import dataset_version_shard
from auditportal.experiments import services
from auditportal.experiments.backends import local
from auditportal.experiments.backends.local import run_dir
from auditportal.experiments.ingest import trial_metrics_ingest
from auditportal.experiments.models import Experiment, ExperimentStatus, MetricPoint, StopReason, Trial, TrialState
from auditportal.experiments.tasks import experiment_launch_task, experiment_stop_task
from auditportal.fairness.errors import UserError
from auditportal.fairness.files import metricsfile
from auditportal.fairness.files.metricsfile import MetricRecord
from auditportal.outbox import broker
from tests.experiments.conftest import metrics_in_file, poll_until_done, processes_of
from tests.factories import TrialFactory


def _stored(trial: Trial) -> dict[tuple[str, int, str], float | None]:
    return {(p.kind, p.step, p.name): p.value for p in MetricPoint.objects.filter(trial=trial)}


def test_a_single_trial_stores_exactly_what_the_trainer_reported(
    bob: User, demo_version: DatasetVersion, fake_trainer: Path
) -> None:
    experiment = services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=12)
    experiment_launch_task(experiment.pk)
    experiment = poll_until_done(experiment)

    assert experiment.status == ExperimentStatus.COMPLETED
    trial = experiment.trials.get()
    assert trial.state == TrialState.COMPLETED
    assert trial.steps_done == trial.steps_planned == 12
    reported = metrics_in_file(run_dir(trial) / "metrics.jsonl")
    assert len(reported) == 4 * (1 + 9)  # validation every 3 batches: 4 training + 4 validation lines
    assert _stored(trial) == reported
    assert trial.latest_step == 12
    assert trial.latest_eod == reported[("validation", 12, "eod")]
    assert trial.latest_accuracy == reported[("validation", 12, "accuracy")]
    # The run folder records what the trial trained on (experiments/checkpoints.py holds a checkpoint to it).
    assert json.loads((run_dir(trial) / "run.json").read_text()) == {
        "experiment": experiment.pk,
        "trial": trial.pk,
        "dataset_version": {"id": demo_version.pk, "sha256": demo_version.sha256},
    }
    assert list(
        Event.objects.filter(target_type="experiments.experiment", target_id=str(experiment.pk))
        .values_list("verb", flat=True)
        .order_by("id")
    ) == [
        "experiment.launched",
        "experiment.started",
        "experiment.finished",
    ]


def test_per_group_counts_are_queryable_by_attribute_and_group(
    bob: User, demo_version: DatasetVersion, fake_trainer: Path
) -> None:
    experiment = services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=4)
    experiment_launch_task(experiment.pk)
    trial = poll_until_done(experiment).trials.get()
    points = MetricPoint.objects.filter(trial=trial, kind="validation", attribute="gender", group="female")
    assert sorted(points.values_list("name", flat=True).distinct()) == [
        "count/gender/female/tp",
        "recall/gender/female",
    ]


def test_a_crashed_trainer_errors_its_trial_with_the_log_tail_and_the_others_complete(
    bob: User, demo_version: DatasetVersion, fake_trainer: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_TRAINER_CRASH", "trial-2")
    experiment = services.experiment_create(
        user=bob, dataset_version=demo_version, template="random", max_trials=3, batches=8
    )
    experiment_launch_task(experiment.pk)
    experiment = poll_until_done(experiment)

    states = dict(experiment.trials.values_list("number", "state"))
    assert states == {1: TrialState.COMPLETED, 2: TrialState.ERRORED, 3: TrialState.COMPLETED}
    crashed = experiment.trials.get(number=2)
    assert crashed.error == "trainer crashed (exit status 3)"
    assert "RuntimeError: fake trainer crashed on purpose" in crashed.log_tail
    # What it reported before crashing is kept.
    assert _stored(crashed) == metrics_in_file(run_dir(crashed) / "metrics.jsonl")
    assert experiment.status == ExperimentStatus.ERRORED
    assert experiment.error == "1 of 3 trials did not complete"


def test_ingesting_the_same_reports_again_adds_nothing(
    bob: User, demo_version: DatasetVersion, fake_trainer: Path
) -> None:
    experiment = services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=8)
    experiment_launch_task(experiment.pk)
    trial = poll_until_done(experiment).trials.get()
    before = _stored(trial)

    reports = [
        MetricRecord(kind=r.kind, step=r.step, metrics=r.metrics, end=r.end)
        for r in metricsfile.read_records(run_dir(trial) / "metrics.jsonl", 0)
    ]
    result = trial_metrics_ingest(trial=trial, records=reports + reports, batch_points=7)

    assert result.records == 2 * len(reports)
    assert _stored(trial) == before
    assert MetricPoint.objects.filter(trial=trial).count() == len(before)


def test_only_complete_lines_are_read_and_the_offset_resumes_after_them(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    first = b'{"schema": 1, "trial": 1, "kind": "validation", "step": 5, "metrics": {"eod": 0.1}}\n'
    partial = b'{"schema": 1, "trial": 1, "kind": "valid'
    path.write_bytes(first + partial)
    reports = list(metricsfile.read_records(path, 0))
    assert [(r.kind, r.step, r.metrics, r.end) for r in reports] == [("validation", 5, {"eod": 0.1}, len(first))]
    with path.open("ab") as handle:
        handle.write(b'ation", "step": 10, "metrics": {"eod": NaN, "x": "text"}}\n')
    end = reports[0].end
    assert end is not None
    again = list(metricsfile.read_records(path, end))
    assert [(r.step, r.metrics) for r in again] == [(10, {"eod": None})]


def test_a_cancel_is_recorded_by_the_web_and_carried_out_by_the_worker_which_stops_the_trainer(
    bob: User,
    demo_version: DatasetVersion,
    fake_trainer: Path,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    monkeypatch.setenv("FAKE_TRAINER_SLEEP", "5")
    experiment = services.experiment_create(
        user=bob, dataset_version=demo_version, template="random", max_trials=2, batches=40
    )
    experiment_launch_task(experiment.pk)
    running = experiment.trials.get(number=1)
    deadline = time.monotonic() + 20
    while not processes_of(run_dir(running)) and time.monotonic() < deadline:
        services.experiment_poll(experiment_id=experiment.pk)
    assert processes_of(run_dir(running))

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.experiment_cancel(user=bob, experiment=experiment)
    # Recorded only: the trainer still runs until a worker acts on it.
    experiment.refresh_from_db()
    assert experiment.status == ExperimentStatus.CANCELLING
    assert experiment.cancel_requested_at is not None
    assert experiment.trials.get(number=2).state == TrialState.CANCELED  # never started
    assert experiment.trials.get(number=1).state == TrialState.RUNNING
    assert processes_of(run_dir(running))
    stops: list[tuple[str, list[Any]]] = []
    monkeypatch.setattr(broker, "publish", lambda *, name, args, kwargs: stops.append((name, list(args))))
    for callback in callbacks:
        callback()
    assert stops == [("experiments.stop", [experiment.pk])]

    experiment_stop_task(experiment.pk)  # the worker
    experiment = poll_until_done(experiment, timeout=30)

    assert experiment.status == ExperimentStatus.CANCELLED
    assert processes_of(run_dir(running)) == []
    running.refresh_from_db()
    assert running.state == TrialState.CANCELED
    assert running.stop_reason == StopReason.CANCEL
    assert running.stop_requested_at is not None
    assert running.ended_at is not None
    assert experiment.cancel_requested_at is not None
    assert experiment.ended_at is not None
    assert experiment.cancel_requested_at <= running.stop_requested_at <= running.ended_at <= experiment.ended_at
    # The runner recorded when the trainer was gone; the database keeps that time, not the poll's.
    stopped = json.loads((run_dir(running) / "stopped").read_text())
    assert running.ended_at.timestamp() == pytest.approx(stopped["stopped_at"], abs=1e-3)
    assert Event.objects.filter(verb="experiment.cancelled", actor=bob, target_id=str(experiment.pk)).count() == 1


def test_cancelling_twice_says_it_is_already_being_cancelled(
    bob: User, demo_version: DatasetVersion, fake_trainer: Path
) -> None:
    experiment = services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=4)
    Experiment.objects.filter(pk=experiment.pk).update(status=ExperimentStatus.RUNNING)
    services.experiment_cancel(user=bob, experiment=experiment)
    with pytest.raises(UserError, match=f"Experiment {experiment.pk} is already being cancelled"):
        services.experiment_cancel(user=bob, experiment=experiment)


def test_a_missing_dataset_file_fails_the_launch_with_the_reason_and_no_trials(
    bob: User, demo_version: DatasetVersion, fake_trainer: Path
) -> None:
    experiment = services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=4)
    demo_version.path.unlink()  # the stored file has gone missing
    experiment_launch_task(experiment.pk)
    experiment.refresh_from_db()
    assert experiment.status == ExperimentStatus.LAUNCH_FAILED
    assert experiment.error == (
        "launch failed: Dataset version credit-demo v1 failed its integrity check: the stored file "
        f"credit-demo-400-seed20261129.csv is missing (registered SHA-256 {demo_version.sha256}). "
        "Restore it, or register the file again as a new version."
    )
    assert experiment.trials.count() == 0


def test_a_trial_claimed_by_a_worker_that_died_before_starting_it_goes_back_to_the_queue(
    bob: User, demo_version: DatasetVersion, fake_trainer: Path, settings
) -> None:
    settings.EXPERIMENT_LOCAL_CONCURRENCY = 1
    experiment = services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=4)
    dataset_version_shard(version=demo_version, parts=1, out_dir=Path(experiment.shard_dir))
    experiment.status = ExperimentStatus.RUNNING
    experiment.save()
    trial = TrialFactory.create(experiment=experiment, state=TrialState.STARTING)
    Trial.objects.filter(pk=trial.pk).update(started_at=trial.updated_at.replace(year=2000))

    experiment = poll_until_done(experiment)

    trial.refresh_from_db()
    assert trial.state == TrialState.COMPLETED
    assert _stored(trial) == metrics_in_file(run_dir(trial) / "metrics.jsonl")


def _cmdline_not_set_up_yet(pid: int) -> bytes:
    # What /proc/<pid>/cmdline reads while a process is between the start of its exec and the set-up
    # of its new command line: Popen returns inside that window.
    return b""


def test_a_trial_observed_while_its_process_is_still_starting_completes(
    bob: User, demo_version: DatasetVersion, fake_trainer: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "_cmdline", _cmdline_not_set_up_yet)
    experiment = services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=4)
    experiment_launch_task(experiment.pk)  # starts the trial and observes it at once
    experiment = poll_until_done(experiment)
    assert experiment.status == ExperimentStatus.COMPLETED, experiment.trials.get().error
    assert experiment.trials.get().state == TrialState.COMPLETED


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "30"])
    # Popen returns before the child's new command line is set up (it reads empty for a moment, which
    # _alive counts as "cannot tell yet"): wait until /proc shows `sleep 30`, as a trial observed later.
    deadline = time.monotonic() + 10
    while Path(f"/proc/{process.pid}/cmdline").read_bytes() != b"sleep\x0030\x00":
        assert time.monotonic() < deadline, "sleep 30 did not show its command line within 10 s"
        time.sleep(0.001)
    yield process
    process.kill()
    process.wait()


def test_a_process_this_worker_started_is_alive_until_it_ends_whatever_proc_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "_cmdline", _cmdline_not_set_up_yet)
    trial_dir = tmp_path / "trial-1"
    child = subprocess.Popen(["/bin/sh", "-c", "sleep 30", "trial-wrapper", str(trial_dir)])
    monkeypatch.setitem(local._children, child.pid, child)
    assert local._alive(child.pid, trial_dir)
    assert not local._alive(child.pid, tmp_path / "trial-2")  # the pid is another trial's process
    child.kill()
    child.wait()
    assert not local._alive(child.pid, trial_dir)


def test_a_process_started_elsewhere_is_alive_while_its_command_line_is_unreadable_and_not_when_it_is_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sleeper: subprocess.Popen[bytes]
) -> None:
    # Not one of this worker's children (another worker started it): /proc decides.
    assert sleeper.pid not in local._children
    assert not local._alive(sleeper.pid, tmp_path / "trial-1")  # a reused pid: not the trial's process
    monkeypatch.setattr(local, "_cmdline", _cmdline_not_set_up_yet)
    assert local._alive(sleeper.pid, tmp_path / "trial-1")  # cannot be told yet: the next poll decides
