from __future__ import annotations

from pathlib import Path

import pytest

from auditportal.accounts.models import User
from auditportal.activity.models import Event
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments import services, tasks
from auditportal.experiments.models import Experiment, ExperimentStatus
from tests.experiments.conftest import poll_until_done


def test_creating_an_experiment_queues_its_launch_only_once_the_transaction_commits(
    bob: User, demo_version: DatasetVersion, django_capture_on_commit_callbacks, monkeypatch: pytest.MonkeyPatch
) -> None:
    queued: list[int] = []
    monkeypatch.setattr(tasks.experiment_launch_task, "delay", queued.append)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        experiment = services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=4)
    assert queued == []
    for callback in callbacks:
        callback()
    assert queued == [experiment.pk]


def test_only_the_first_claim_launches_and_a_redelivered_task_does_nothing(
    bob: User, demo_version: DatasetVersion, fake_trainer: Path
) -> None:
    experiment = services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=4)
    assert services.experiment_launch(experiment=experiment) is True
    assert fake_trainer.is_dir()  # the trial's folder
    tasks.experiment_launch_task(experiment.pk)  # redelivered
    assert services.experiment_launch(experiment=experiment) is False
    experiment = poll_until_done(experiment)
    assert experiment.status == ExperimentStatus.COMPLETED
    assert experiment.trials.count() == 1
    assert Event.objects.filter(verb="experiment.started", target_id=str(experiment.pk)).count() == 1


def test_an_experiment_cancelled_while_queued_is_never_launched(
    bob: User, demo_version: DatasetVersion, fake_trainer: Path
) -> None:
    experiment = services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=4)
    services.experiment_cancel(user=bob, experiment=experiment)
    tasks.experiment_launch_task(experiment.pk)
    experiment.refresh_from_db()
    assert experiment.status == ExperimentStatus.CANCELLED
    assert experiment.trials.count() == 0
    assert not fake_trainer.exists()  # no trial folder: nothing was submitted


def test_a_task_for_a_deleted_experiment_does_nothing(db: None) -> None:
    tasks.experiment_launch_task(987654)
    assert not Experiment.objects.exists()
