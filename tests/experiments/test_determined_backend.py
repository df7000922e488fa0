from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments import configs, services
from auditportal.experiments.backends import determined as determined_backend
from auditportal.experiments.configs import from_yaml
from auditportal.experiments.models import Experiment, ExperimentStatus, MetricPoint, Trial, TrialState
from auditportal.experiments.tasks import experiment_launch_task
from tests.stubs.determined_master import DeterminedMasterStub

VALIDATION = {"eod": 0.3, "fair_objective": 0.9, "accuracy": 0.7}


@pytest.fixture
def master(settings: SettingsWrapper) -> Iterator[DeterminedMasterStub]:
    stub = DeterminedMasterStub(username="portal", password="s3cret").start()
    settings.DET_MASTER = stub.url
    settings.DET_USER = "portal"
    settings.DET_PASSWORD = "s3cret"
    settings.DET_RETRY_ATTEMPTS = 4
    settings.DET_RETRY_BACKOFF_MS = 10
    settings.DET_REQUEST_TIMEOUT = 5
    settings.EXPERIMENT_BACKEND = "determined"
    determined_backend._sessions.clear()
    yield stub
    determined_backend._sessions.clear()
    stub.stop()


def _launch(
    user: User, version: DatasetVersion, template: str = "random", max_trials: int = 2, slots_per_trial: int = 1
) -> Experiment:
    experiment = services.experiment_create(
        user=user,
        dataset_version=version,
        template=template,
        max_trials=max_trials,
        batches=32,
        slots_per_trial=slots_per_trial,
    )
    experiment_launch_task(experiment.pk)
    experiment.refresh_from_db()
    return experiment


def _poll(experiment: Experiment) -> Experiment:
    assert services.experiment_poll(experiment_id=experiment.pk)
    experiment.refresh_from_db()
    return experiment


def _points(trial: Trial, kind: str = "validation") -> dict[tuple[int, str], float | None]:
    return {
        (step, name): value
        for step, name, value in trial.metric_points.filter(kind=kind).values_list("step", "name", "value")
    }


def test_launch_submits_a_config_the_master_accepts_and_the_searcher_creates_the_trials(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub, settings: SettingsWrapper
) -> None:
    settings.SHARD_HOST_DIR = "/srv/auditportal/shards"
    settings.DET_TRAINER_IMAGE = "registry.example.org/auditportal/trainer:7"
    experiment = _launch(bob, demo_version, template="asha", max_trials=3)
    assert experiment.status == ExperimentStatus.RUNNING, experiment.error
    submitted = master.experiments[experiment.det_experiment_id or 0]
    config = from_yaml(submitted.config)
    assert config["searcher"]["name"] == "adaptive_asha"
    assert config["searcher"]["max_rungs"] == 3
    assert config["searcher"]["max_time"] == 32
    assert config["environment"]["image"] == "registry.example.org/auditportal/trainer:7"
    assert config["bind_mounts"] == [
        {"host_path": "/srv/auditportal/shards", "container_path": configs.CONTAINER_SHARD_ROOT, "read_only": True}
    ]
    folder = Path(experiment.shard_dir).name
    assert f"--data {configs.CONTAINER_SHARD_ROOT}/{folder} " in config["entrypoint"]
    assert f"--dataset-sha256 {demo_version.sha256} " in config["entrypoint"]
    # The uploaded context's root holds trainer/ itself, so `-m trainer.train` imports on the cluster.
    assert "trainer/train.py" in submitted.model_files
    assert not any(path.endswith(".pyc") for path in submitted.model_files)
    # The master's searcher made the trials; the launch's first poll recorded them, queued.
    assert experiment.trials.count() == 3
    assert set(experiment.trials.values_list("state", flat=True)) == {TrialState.QUEUED}
    assert {trial.det_trial_id for trial in experiment.trials.all()} == set(submitted.trials)


def test_a_config_the_master_refuses_fails_the_launch_with_its_message_once(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    generated = configs.experiment_config

    def with_num_rungs(**kwargs: Any) -> dict[str, Any]:
        config = generated(**kwargs)
        config["searcher"] = {**config["searcher"], "num_rungs": 3}  # what the portal used to send
        return config

    monkeypatch.setattr(configs, "experiment_config", with_num_rungs)
    experiment = _launch(bob, demo_version, template="asha")
    assert experiment.status == ExperimentStatus.LAUNCH_FAILED
    assert experiment.error == (
        "launch failed: the master refused to create the experiment (HTTP 500): invalid experiment configuration: "
        'version 0 experiment config is invalid: config is invalid: <config>.searcher: unknown field "num_rungs"'
    )
    assert master.count("POST", "/api/v1/experiments") == 1  # an answer, not a failure: never sent again
    assert master.experiments == {}


def test_the_compose_cpu_agent_takes_the_largest_trial_and_the_master_refuses_more(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub
) -> None:
    # The stub's default cluster is the compose profile's: one CPU agent with artificial_slots: 4.
    assert master.agent_slots == (configs.SLOTS_PER_TRIAL_MAX,)
    experiment = _launch(bob, demo_version, template="single", max_trials=1, slots_per_trial=4)
    assert experiment.status == ExperimentStatus.RUNNING, experiment.error
    assert from_yaml(master.experiments[experiment.det_experiment_id or 0].config)["resources"] == {
        "slots_per_trial": 4
    }
    # A cluster of one plain CPU agent (all cores as one slot): a 2-slot trial can never be placed,
    # and a master with launch_error: true refuses it at once rather than queueing it forever.
    master.agent_slots = (1,)
    refused = _launch(bob, demo_version, template="single", max_trials=1, slots_per_trial=2)
    assert refused.status == ExperimentStatus.LAUNCH_FAILED
    assert refused.error == (
        "launch failed: the master refused to create the experiment (HTTP 500): "
        "slots requested exceeds cluster capacity"
    )
    assert _launch(bob, demo_version, template="single", max_trials=1).status == ExperimentStatus.RUNNING


def test_the_stub_refuses_what_one_agent_cannot_hold_for_a_single_node_trial() -> None:
    stub = DeterminedMasterStub(username="u", password="p", agent_slots=(2, 2))
    try:
        single = {"resources": {"slots_per_trial": 3, "is_single_node": True}}
        assert stub._capacity_refusal(single) == (
            "validating resources: request unfulfillable, please try requesting less slots"
        )
        assert stub._capacity_refusal({"resources": {"slots_per_trial": 3}}) == ""  # spread over both agents
        assert (
            stub._capacity_refusal({"resources": {"slots_per_trial": 5}}) == "slots requested exceeds cluster capacity"
        )
    finally:
        stub.server.server_close()


def test_checkpoint_rows_and_the_best_checkpoint_are_read_as_the_master_sends_them(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub
) -> None:
    experiment = _launch(bob, demo_version, template="single", max_trials=1)
    det_trial = master.trials[master.experiments[experiment.det_experiment_id or 0].trials[0]]
    master.advance(steps=3)
    for step in (8, 16):
        master.add_metrics(det_trial.id, "training", step, {"loss": 1.0 / step})
        master.add_metrics(det_trial.id, "validation", step, {**VALIDATION, "eod": 1.0 / step})
        master.add_checkpoint(f"ckpt-{step}", det_trial.id, experiment.det_experiment_id or 0, step=step)
    _poll(experiment)
    trial = experiment.trials.get()
    # The unfiltered read held checkpoint rows among the metrics: none of them became a metric.
    assert _points(trial) == {
        **{(8, name): value for name, value in {**VALIDATION, "eod": 1 / 8}.items()},
        **{(16, name): value for name, value in {**VALIDATION, "eod": 1 / 16}.items()},
    }
    assert _points(trial, "training") == {(8, "loss"): 1 / 8, (16, "loss"): 1 / 16}
    assert (trial.steps_done, trial.metrics_offset, trial.checkpoint) == (16, 16, "ckpt-16")
    master.complete(det_trial.id)
    _poll(experiment)
    trial.refresh_from_db()
    assert (trial.state, trial.checkpoint) == (TrialState.COMPLETED, "ckpt-16")


@pytest.mark.parametrize("status", [502, 503])
def test_a_gateway_error_is_retried(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub, status: int
) -> None:
    master.fail_next(2, status=status, prefix="/api/v1/experiments")
    experiment = _launch(bob, demo_version)
    assert experiment.status == ExperimentStatus.RUNNING
    assert len(master.experiments) == 1
    assert master.count("POST", "/api/v1/experiments") == 3


def test_a_gateway_timeout_on_create_is_not_sent_again(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub
) -> None:
    # The gateway gave up waiting; the master may have created the experiment all the same.
    master.fail_next(1, status=504, prefix="/api/v1/experiments")
    experiment = _launch(bob, demo_version)
    assert experiment.status == ExperimentStatus.LAUNCH_FAILED
    assert experiment.error.startswith("launch failed: master unreachable: HTTP 504 from ")
    assert master.count("POST", "/api/v1/experiments") == 1


def test_a_master_that_keeps_answering_503_fails_the_launch_and_creates_nothing(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub
) -> None:
    master.fail_next(50, status=503)
    experiment = _launch(bob, demo_version)
    assert experiment.status == ExperimentStatus.LAUNCH_FAILED
    assert experiment.error.startswith("launch failed: master unreachable: HTTP 503 from ")
    assert experiment.trials.count() == 0
    assert master.experiments == {}
    assert len(master.requests) == 4  # DET_RETRY_ATTEMPTS


def test_an_unreachable_master_fails_the_launch_with_the_reason(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub, settings: SettingsWrapper
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings.DET_MASTER = f"http://127.0.0.1:{port}"
    experiment = _launch(bob, demo_version)
    assert experiment.status == ExperimentStatus.LAUNCH_FAILED
    assert experiment.error.startswith(f"launch failed: master unreachable: cannot connect to http://127.0.0.1:{port}")


def test_a_wrong_password_fails_the_launch_as_an_authentication_failure(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub, settings: SettingsWrapper
) -> None:
    settings.DET_PASSWORD = "wrong"
    experiment = _launch(bob, demo_version)
    assert experiment.status == ExperimentStatus.LAUNCH_FAILED
    assert experiment.error == (
        "launch failed: authentication failed: the master rejected user 'portal' (check DET_USER / DET_PASSWORD)"
    )


def test_an_expired_token_forces_one_relogin(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub
) -> None:
    experiment = _launch(bob, demo_version)
    assert master.logins == 1
    master.expire_tokens()
    experiment = _poll(experiment)
    assert master.logins == 2
    assert experiment.status == ExperimentStatus.RUNNING
    assert experiment.error == ""


def test_trials_follow_the_masters_states_until_the_experiment_completes(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub
) -> None:
    experiment = _launch(bob, demo_version, template="single", max_trials=1)
    trial = experiment.trials.get()
    seen = []
    for _ in range(3):  # QUEUED -> PULLING -> STARTING -> RUNNING
        master.advance()
        _poll(experiment)
        trial.refresh_from_db()
        seen.append((master.trials[trial.det_trial_id or 0].state, trial.state))
    assert seen == [
        ("STATE_PULLING", TrialState.STARTING),
        ("STATE_STARTING", TrialState.STARTING),
        ("STATE_RUNNING", TrialState.RUNNING),
    ]
    assert trial.started_at is not None
    master.add_metrics(trial.det_trial_id or 0, "validation", 32, VALIDATION)
    master.complete(trial.det_trial_id or 0)
    experiment = _poll(experiment)
    trial.refresh_from_db()
    assert (trial.state, trial.latest_step, experiment.status) == (
        TrialState.COMPLETED,
        32,
        ExperimentStatus.COMPLETED,
    )


def test_each_report_is_ingested_once_without_the_harness_time_metrics(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub
) -> None:
    experiment = _launch(bob, demo_version)
    first, second = (master.trials[det_id] for det_id in master.experiments[experiment.det_experiment_id or 0].trials)
    master.advance(steps=3)
    master.add_metrics(first.id, "training", 8, {"loss": 0.6})
    master.add_metrics(first.id, "validation", 8, VALIDATION)
    _poll(experiment)
    assert MetricPoint.objects.filter(trial__experiment=experiment).count() == 4
    # The harness adds batches and epochs to every report: time, not a metric of the model.
    assert not MetricPoint.objects.filter(name__in=["batches", "epochs"]).exists()

    master.add_metrics(first.id, "validation", 16, {"eod": 0.2, "fair_objective": 0.8, "accuracy": 0.72})
    master.add_metrics(second.id, "validation", 8, {"eod": 0.1, "fair_objective": 0.7, "accuracy": 0.6})
    _poll(experiment)
    _poll(experiment)
    points = MetricPoint.objects.filter(trial__experiment=experiment)
    assert len(set(points.values_list("trial__det_trial_id", "kind", "step", "name"))) == points.count() == 10
    trial = experiment.trials.get(det_trial_id=first.id)
    assert (trial.latest_step, trial.latest_eod, trial.latest_accuracy) == (16, 0.2, 0.72)
    assert trial.steps_done == 16
    assert trial.state == TrialState.RUNNING

    master.complete(first.id)
    master.complete(second.id)
    experiment = _poll(experiment)
    assert experiment.status == ExperimentStatus.COMPLETED
    assert set(experiment.trials.values_list("state", flat=True)) == {TrialState.COMPLETED}


def _history(master: DeterminedMasterStub, trial_id: int, validations: int, every: int = 4) -> None:
    for index in range(1, validations + 1):
        master.add_metrics(trial_id, "training", index * every, {"loss": 1.0 / index})
        master.add_metrics(trial_id, "validation", index * every, {**VALIDATION, "eod": 1.0 / index})


def test_a_poll_reads_only_what_is_new_however_long_the_history(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub
) -> None:
    experiment = _launch(bob, demo_version, max_trials=2)
    short, long = master.experiments[experiment.det_experiment_id or 0].trials
    master.advance(steps=3)
    _history(master, short, 3)
    _history(master, long, 600)
    _poll(experiment)
    assert experiment.trials.get(det_trial_id=long).latest_step == 2400

    # Nothing new: the trial list says so, and no metric is read.
    before = master.count("GET", "/api/v1/trials/")
    _poll(experiment)
    assert master.count("GET", "/api/v1/trials/") == before

    def poll_one_new_step(trial_id: int, step: int) -> tuple[int, int, int]:
        requests, served = master.count("GET", f"/api/v1/trials/{trial_id}/workloads"), master.workloads_served
        master.add_metrics(trial_id, "training", step, {"loss": 0.01})
        master.add_metrics(trial_id, "validation", step, VALIDATION)
        with CaptureQueriesContext(connection) as queries:
            _poll(experiment)
        reads = master.count("GET", f"/api/v1/trials/{trial_id}/workloads") - requests
        return reads, master.workloads_served - served, len(queries)

    # One new step costs the same on a trial with 1,200 workloads as on one with 6: one request for
    # one page of workloads from the master (newest first), and the same number of queries here.
    assert poll_one_new_step(short, 16)[:2] == (1, 8)
    assert poll_one_new_step(long, 2404)[:2] == (1, determined_backend.WORKLOAD_PAGE)
    assert poll_one_new_step(short, 20)[2] == poll_one_new_step(long, 2408)[2]
    long_trial = experiment.trials.get(det_trial_id=long)
    assert long_trial.metric_points.filter(kind="validation", name="eod").count() == 602


def test_a_read_broken_off_part_way_is_retried(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub
) -> None:
    experiment = _launch(bob, demo_version, template="single", max_trials=1)
    det_id = master.experiments[experiment.det_experiment_id or 0].trials[0]
    master.advance(steps=3)
    _history(master, det_id, 120)  # 240 workloads: three pages
    master.fail_next(2, status=503, prefix=f"/api/v1/trials/{det_id}/workloads")
    experiment = _poll(experiment)
    assert experiment.error == ""
    assert experiment.trials.get().metric_points.filter(kind="validation", name="eod").count() == 120


def test_a_read_that_keeps_failing_shows_last_poll_failed_and_loses_nothing(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub
) -> None:
    experiment = _launch(bob, demo_version, template="single", max_trials=1)
    det_id = master.experiments[experiment.det_experiment_id or 0].trials[0]
    master.advance(steps=3)
    _history(master, det_id, 120)
    # Every attempt reads the first page, then the next request fails: the read breaks part-way.
    workloads = f"/api/v1/trials/{det_id}/workloads"
    master.break_off(workloads, after=1, rounds=4)
    experiment = _poll(experiment)
    assert experiment.status == ExperimentStatus.RUNNING
    assert experiment.error == (
        f"last poll failed: master unreachable: HTTP 503 from {master.url} while trying to read the metrics of "
        f"trial {det_id}"
    )
    assert master.count("GET", workloads) == 8  # DET_RETRY_ATTEMPTS, each broken after its first page
    trial = experiment.trials.get()
    assert trial.metric_points.count() == 0
    assert trial.metrics_offset == 0

    experiment = _poll(experiment)
    assert experiment.error == ""
    assert experiment.trials.get().metric_points.filter(kind="validation", name="eod").count() == 120


def test_after_a_resume_the_steps_recorded_again_replace_the_old_ones(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub
) -> None:
    experiment = _launch(bob, demo_version, template="single", max_trials=1)
    det_id = master.experiments[experiment.det_experiment_id or 0].trials[0]
    master.advance(steps=3)
    master.add_metrics(det_id, "validation", 8, VALIDATION)
    master.add_metrics(det_id, "validation", 16, {"eod": 0.5, "fair_objective": 1.5, "accuracy": 0.6, "stale": 1.0})
    _poll(experiment)
    trial = experiment.trials.get()
    assert (trial.latest_step, trial.latest_eod) == (16, 0.5)

    # Paused and resumed from its checkpoint at step 8: step 16 is archived on the master...
    master.resume(det_id, from_step=8)
    _poll(experiment)
    trial.refresh_from_db()
    assert sorted({step for step, _ in _points(trial)}) == [8]
    assert (trial.latest_step, trial.latest_eod) == (8, 0.3)

    # ...and the new run records it again, with other values and without the old run's extra name.
    master.add_metrics(det_id, "validation", 16, {"eod": 0.1, "fair_objective": 0.4, "accuracy": 0.8})
    _poll(experiment)
    trial.refresh_from_db()
    assert {name: value for (step, name), value in _points(trial).items() if step == 16} == {
        "eod": 0.1,
        "fair_objective": 0.4,
        "accuracy": 0.8,
    }
    assert (trial.latest_step, trial.latest_eod, trial.latest_accuracy) == (16, 0.1, 0.8)


def test_cancel_kills_the_experiment_on_the_master(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub
) -> None:
    experiment = _launch(bob, demo_version)
    master.advance(steps=3)
    kill = f"/api/v1/experiments/{experiment.det_experiment_id}/kill"
    services.experiment_cancel(user=bob, experiment=experiment)
    # The web process only records the cancel; the worker's next poll kills it on the master, once.
    assert master.count("POST", kill) == 0
    experiment.refresh_from_db()
    assert experiment.status == ExperimentStatus.CANCELLING
    services.experiment_poll(experiment_id=experiment.pk)
    services.experiment_poll(experiment_id=experiment.pk)
    assert master.count("POST", kill) == 1
    submitted = master.experiments[experiment.det_experiment_id or 0]
    assert {master.trials[i].state for i in submitted.trials} == {"STATE_STOPPING_KILLED"}
    experiment.refresh_from_db()
    assert experiment.status == ExperimentStatus.CANCELLING  # the master is still stopping its trials
    master.settle_kills()
    assert {master.trials[i].state for i in submitted.trials} == {"STATE_CANCELED"}
    services.experiment_poll(experiment_id=experiment.pk)
    experiment.refresh_from_db()
    assert experiment.status == ExperimentStatus.CANCELLED
    assert set(experiment.trials.values_list("state", flat=True)) == {TrialState.CANCELED}


def test_the_stub_is_not_used_outside_tests() -> None:
    assert "stub" in (Path(__file__).parent.parent / "stubs" / "determined_master.py").read_text()[:200].lower()
