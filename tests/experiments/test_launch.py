from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from kombu.exceptions import OperationalError

from auditportal.accounts.models import User
from auditportal.activity.models import Event
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments import services, tasks
from auditportal.experiments.models import Experiment, ExperimentStatus
from auditportal.experiments.services import launch
from auditportal.outbox import broker
from auditportal.outbox.models import OutboxMessage
from auditportal.outbox.services import outbox_deliver_pending
from tests.experiments.conftest import poll_until_done


class Broker:
    """Stands in for the outbox's ``broker.publish``: records the tasks it was handed by name, or
    refuses them while ``down``, as a broker that cannot be reached does."""

    def __init__(self) -> None:
        self.published: list[tuple[str, list[Any]]] = []
        self.down = False

    def publish(self, *, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        if self.down:
            raise OperationalError("[Errno 111] Connection refused")
        self.published.append((name, list(args)))


@pytest.fixture
def fake_broker(monkeypatch: pytest.MonkeyPatch) -> Broker:
    fake = Broker()
    monkeypatch.setattr(broker, "publish", fake.publish)
    return fake


def _launches_queued(experiment: Experiment) -> int:
    return OutboxMessage.objects.filter(name="experiments.launch", args=[experiment.pk]).count()


def test_creating_an_experiment_queues_its_launch_with_it_and_hands_it_over_once_the_transaction_commits(
    bob: User, demo_version: DatasetVersion, django_capture_on_commit_callbacks: Any, fake_broker: Broker
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        experiment = services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=4)
    [message] = OutboxMessage.objects.all()
    assert (message.name, message.args, message.sent_at) == ("experiments.launch", [experiment.pk], None)
    assert fake_broker.published == []
    experiment.refresh_from_db()
    assert experiment.launch_queued_at is not None
    for callback in callbacks:
        callback()
    assert fake_broker.published == [("experiments.launch", [experiment.pk])]
    message.refresh_from_db()
    assert message.sent_at is not None


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


def _created_long_ago(experiment: Experiment, *, minutes: int = 60) -> None:
    Experiment.objects.filter(pk=experiment.pk).update(created_at=timezone.now() - timedelta(minutes=minutes))


def test_a_launch_claimed_long_after_creation_survives_the_periodic_poll_while_it_runs(
    bob: User, demo_version: DatasetVersion, fake_trainer: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The task waited an hour in the queue; the periodic poll runs while the launch shards the data.
    experiment = services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=4)
    _created_long_ago(experiment)
    shard = launch._shard
    seen: list[str] = []

    def slow_shard(launching: Experiment) -> Path:
        services.experiments_poll_active()
        seen.append(Experiment.objects.get(pk=launching.pk).status)
        return shard(launching)

    monkeypatch.setattr(launch, "_shard", slow_shard)
    tasks.experiment_launch_task(experiment.pk)
    assert seen == [ExperimentStatus.LAUNCHING]
    experiment = poll_until_done(experiment)
    assert experiment.status == ExperimentStatus.COMPLETED


def test_a_launch_whose_heartbeat_stopped_fails_with_the_reason(bob: User, demo_version: DatasetVersion) -> None:
    experiment = services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=4)
    _created_long_ago(experiment)
    now = timezone.now()
    Experiment.objects.filter(pk=experiment.pk).update(
        status=ExperimentStatus.LAUNCHING, launch_claimed_at=now - timedelta(minutes=5), launch_heartbeat_at=now
    )
    services.experiments_poll_active()
    experiment.refresh_from_db()
    assert experiment.status == ExperimentStatus.LAUNCHING  # claimed 5 minutes ago, but beating

    Experiment.objects.filter(pk=experiment.pk).update(launch_heartbeat_at=now - timedelta(seconds=121))
    services.experiments_poll_active()
    experiment.refresh_from_db()
    assert experiment.status == ExperimentStatus.LAUNCH_FAILED
    assert experiment.error == "launch failed: the worker stopped while launching; launch it again"
    assert Event.objects.filter(verb="experiment.launch_failed", target_id=str(experiment.pk)).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_launching_worker_stamps_its_heartbeat_while_it_works(
    bob: User, demo_version: DatasetVersion, fake_trainer: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    # Half a second (the setting is whole seconds from the environment; the heartbeat's wait takes any
    # number): the launch's first look, before any beat, still comes long before the first one.
    settings.EXPERIMENT_LAUNCH_HEARTBEAT_SECONDS = 0.5
    experiment = services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=4)
    shard = launch._shard
    beats: list[Any] = []

    def slow_shard(launching: Experiment) -> Path:
        deadline = time.monotonic() + 10
        while len(set(beats)) < 3 and time.monotonic() < deadline:
            beats.append(Experiment.objects.get(pk=launching.pk).launch_heartbeat_at)
            time.sleep(0.05)
        return shard(launching)

    monkeypatch.setattr(launch, "_shard", slow_shard)
    tasks.experiment_launch_task(experiment.pk)
    assert len(set(beats)) == 3, "the heartbeat moved twice while the launch worked"
    experiment.refresh_from_db()
    assert experiment.launch_claimed_at == beats[0]


def test_a_launch_the_broker_did_not_take_at_commit_is_handed_over_by_the_outbox_once_it_is_back(
    bob: User, demo_version: DatasetVersion, django_capture_on_commit_callbacks: Any, fake_broker: Broker
) -> None:
    fake_broker.down = True
    with django_capture_on_commit_callbacks(execute=True):
        experiment = services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=4)
    experiment.refresh_from_db()
    assert experiment.status == ExperimentStatus.QUEUED  # created; the user's request did not fail
    [message] = OutboxMessage.objects.all()
    assert message.sent_at is None
    assert "Connection refused" in message.last_error

    # The outbox holds the launch: the periodic poll does not queue it a second time.
    fake_broker.down = False
    _created_long_ago(experiment, minutes=1)
    services.experiments_poll_active()
    assert _launches_queued(experiment) == 1
    assert fake_broker.published == []
    outbox_deliver_pending()  # beat's outbox.deliver
    assert fake_broker.published == [("experiments.launch", [experiment.pk])]


def test_a_queued_launch_not_claimed_for_the_requeue_time_is_queued_again(
    bob: User, demo_version: DatasetVersion, settings: Any
) -> None:
    experiment = services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=4)
    assert _launches_queued(experiment) == 1
    now = timezone.now()
    Experiment.objects.filter(pk=experiment.pk).update(launch_queued_at=now - timedelta(seconds=599))
    services.experiments_poll_active()
    assert _launches_queued(experiment) == 1
    Experiment.objects.filter(pk=experiment.pk).update(launch_queued_at=now - timedelta(seconds=601))
    services.experiments_poll_active()
    assert _launches_queued(experiment) == 2
    experiment.refresh_from_db()
    assert experiment.launch_queued_at is not None
    assert experiment.launch_queued_at >= now
    services.experiments_poll_active()
    assert _launches_queued(experiment) == 2  # queued again just now: not again


def test_a_launch_queued_before_the_outbox_without_a_stamp_counts_from_the_experiments_creation(
    bob: User, demo_version: DatasetVersion
) -> None:
    experiment = services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=4)
    OutboxMessage.objects.all().delete()  # its task never reached the broker, under the old code
    Experiment.objects.filter(pk=experiment.pk).update(launch_queued_at=None)
    _created_long_ago(experiment, minutes=9)
    services.experiments_poll_active()
    assert _launches_queued(experiment) == 0
    _created_long_ago(experiment, minutes=11)
    services.experiments_poll_active()
    assert _launches_queued(experiment) == 1
