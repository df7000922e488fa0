from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments import services
from auditportal.experiments.backends import determined as determined_backend
from auditportal.experiments.configs import from_yaml
from auditportal.experiments.models import Experiment, ExperimentStatus, MetricPoint, TrialState
from auditportal.experiments.tasks import experiment_launch_task
from tests.stubs.determined_master import DeterminedMasterStub


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


def _launch(user: User, version: DatasetVersion, template: str = "random") -> Experiment:
    experiment = services.experiment_create(
        user=user, dataset_version=version, template=template, max_trials=2, batches=32
    )
    experiment_launch_task(experiment.pk)
    experiment.refresh_from_db()
    return experiment


def test_launch_submits_the_config_with_the_trainer_context_and_records_the_master_id(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub
) -> None:
    experiment = _launch(bob, demo_version, template="asha")
    assert experiment.status == ExperimentStatus.RUNNING
    submitted = master.experiments[experiment.det_experiment_id or 0]
    config = from_yaml(submitted.config)
    assert config["searcher"]["name"] == "adaptive_asha"
    assert config["searcher"]["metric"] == "fair_objective"
    assert config["searcher"]["max_time"] == 32
    assert "python3 -m trainer.train" in config["entrypoint"]
    # The uploaded context's root holds trainer/ itself, so `-m trainer.train` imports on the cluster.
    assert "trainer/train.py" in submitted.model_files
    assert not any(path.endswith(".pyc") for path in submitted.model_files)


def test_a_503_from_the_master_is_retried(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub
) -> None:
    master.fail_next(2, status=503)
    experiment = _launch(bob, demo_version)
    assert experiment.status == ExperimentStatus.RUNNING
    assert len(master.experiments) == 1


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
    assert services.experiment_poll(experiment_id=experiment.pk)
    assert master.logins == 2
    experiment.refresh_from_db()
    assert experiment.status == ExperimentStatus.RUNNING
    assert experiment.error == ""


def test_a_growing_metrics_snapshot_is_ingested_once_per_report(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub
) -> None:
    experiment = _launch(bob, demo_version)
    det_id = experiment.det_experiment_id or 0
    first = master.add_trial(det_id, {"learning_rate": 0.01, "seed": 0})
    second = master.add_trial(det_id, {"learning_rate": 0.001, "seed": 0})
    master.add_metrics(first.id, "training", 8, {"loss": 0.6})
    master.add_metrics(first.id, "validation", 8, {"eod": 0.3, "fair_objective": 0.9, "accuracy": 0.7})
    services.experiment_poll(experiment_id=experiment.pk)
    assert MetricPoint.objects.filter(trial__experiment=experiment).count() == 4

    # Between polls the snapshot grows; the master sends everything again each time.
    master.add_metrics(first.id, "validation", 16, {"eod": 0.2, "fair_objective": 0.8, "accuracy": 0.72})
    master.add_metrics(second.id, "validation", 8, {"eod": 0.1, "fair_objective": 0.7, "accuracy": 0.6})
    services.experiment_poll(experiment_id=experiment.pk)
    services.experiment_poll(experiment_id=experiment.pk)

    points = set(
        MetricPoint.objects.filter(trial__experiment=experiment).values_list(
            "trial__det_trial_id", "kind", "step", "name"
        )
    )
    assert len(points) == MetricPoint.objects.filter(trial__experiment=experiment).count() == 10
    trial = experiment.trials.get(det_trial_id=first.id)
    assert (trial.latest_step, trial.latest_eod, trial.latest_accuracy) == (16, 0.2, 0.72)
    assert trial.steps_done == 16
    assert trial.state == TrialState.RUNNING

    master.trials[first.id].state = "STATE_COMPLETED"
    master.trials[second.id].state = "STATE_COMPLETED"
    master.experiments[det_id].state = "STATE_COMPLETED"
    services.experiment_poll(experiment_id=experiment.pk)
    experiment.refresh_from_db()
    assert experiment.status == ExperimentStatus.COMPLETED
    assert set(experiment.trials.values_list("state", flat=True)) == {TrialState.COMPLETED}


def test_cancel_kills_the_experiment_on_the_master(
    bob: User, demo_version: DatasetVersion, master: DeterminedMasterStub
) -> None:
    experiment = _launch(bob, demo_version)
    master.add_trial(experiment.det_experiment_id or 0, {"seed": 0})
    services.experiment_poll(experiment_id=experiment.pk)
    kill = f"/api/v1/experiments/{experiment.det_experiment_id}/kill"
    services.experiment_cancel(user=bob, experiment=experiment)
    # The web process only records the cancel; the worker's next poll kills it on the master, once.
    assert master.count("POST", kill) == 0
    experiment.refresh_from_db()
    assert experiment.status == ExperimentStatus.CANCELLING
    services.experiment_poll(experiment_id=experiment.pk)
    services.experiment_poll(experiment_id=experiment.pk)
    assert master.count("POST", kill) == 1
    experiment.refresh_from_db()
    assert experiment.status == ExperimentStatus.CANCELLED
    assert set(experiment.trials.values_list("state", flat=True)) == {TrialState.CANCELED}


def test_the_stub_is_not_used_outside_tests() -> None:
    assert "stub" in (Path(__file__).parent.parent / "stubs" / "determined_master.py").read_text()[:200].lower()
