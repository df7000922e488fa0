"""Trials of more than one process (slots_per_trial) on the local backend: torch.distributed.run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.urls import reverse
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments import configs, services
from auditportal.experiments.backends.local import run_dir
from auditportal.experiments.models import Experiment, ExperimentStatus, MetricKind, MetricPoint, TrialState
from auditportal.experiments.tasks import experiment_launch_task
from auditportal.fairness.errors import UserError
from tests.experiments.conftest import poll_until_done
from tests.factories import DemoDatasetVersionFactory, client_for


@pytest.mark.parametrize("slots", [0, 5, -1])
def test_slots_outside_one_to_four_are_refused_naming_the_field(slots: int) -> None:
    with pytest.raises(UserError) as caught:
        configs.check_slots_per_trial(slots, configs.default_space("single"))
    assert caught.value.field == "slots_per_trial"
    assert str(caught.value) == f"slots_per_trial must be a whole number from 1 to 4, got {slots}."


def test_slots_need_a_global_batch_of_at_least_one_row_per_process() -> None:
    space = {**configs.default_space("random"), "global_batch_size": {"type": "int", "minval": 2, "maxval": 64}}
    assert configs.check_slots_per_trial(2, space) == 2
    with pytest.raises(UserError, match=r"slots_per_trial 3 needs a global_batch_size of at least 3 .*allow 2\."):
        configs.check_slots_per_trial(3, space)


def test_the_config_asks_the_cluster_for_the_chosen_slots(bob: User, demo_version: DatasetVersion) -> None:
    experiment = services.experiment_create(
        user=bob, dataset_version=demo_version, template="random", max_trials=2, batches=8, slots_per_trial=3
    )
    assert experiment.slots_per_trial == 3
    assert configs.from_yaml(experiment.config_yaml)["resources"] == {"slots_per_trial": 3}


def test_a_trial_of_two_slots_runs_two_ranks_with_free_determined_ports(
    bob: User, demo_version: DatasetVersion, fake_trainer: Path, settings: SettingsWrapper
) -> None:
    settings.EXPERIMENT_LOCAL_CONCURRENCY = 1  # fewer slots than the trial needs: it runs alone
    experiment = services.experiment_create(
        user=bob, dataset_version=demo_version, template="single", batches=4, slots_per_trial=2
    )
    experiment_launch_task(experiment.pk)
    experiment = poll_until_done(experiment, timeout=120)

    assert experiment.status == ExperimentStatus.COMPLETED
    trial = experiment.trials.get()
    ranks = [json.loads((run_dir(trial) / "work" / f"rank-{k}.json").read_text()) for k in (0, 1)]
    assert [(r["RANK"], r["WORLD_SIZE"]) for r in ranks] == [("0", "2"), ("1", "2")]
    ports = {r["INTER_TRAIN_PROCESS_COMM_PORT_1"] for r in ranks} | {
        r["INTER_TRAIN_PROCESS_COMM_PORT_2"] for r in ranks
    }
    assert len(ports) == 2, "one pair of ports for the trial, not Determined's fixed 12360 and 12376"
    assert not ports & {"12360", "12376"}
    assert trial.steps_done == 4


def test_the_form_and_the_api_take_slots_per_trial_within_the_range(bob: User, demo_version: DatasetVersion) -> None:
    client = client_for(bob)
    form = {"dataset_version": demo_version.pk, "template": "random", "max_trials": 2, "batches": 8}
    page = client.get(reverse("experiments:new")).content.decode()
    assert 'name="slots_per_trial"' in page
    assert 'min="1"' in page
    assert 'max="4"' in page
    refused = client.post(reverse("experiments:new"), {**form, "slots_per_trial": 5})
    assert refused.status_code == 400
    assert refused.context["form"].errors == {"slots_per_trial": ["Ensure this value is less than or equal to 4."]}
    assert client.post(reverse("experiments:new"), {**form, "slots_per_trial": 2}).status_code == 302
    assert Experiment.objects.get().slots_per_trial == 2

    api = client.post(reverse("api-experiment-list"), {**form, "slots_per_trial": 0}, content_type="application/json")
    assert api.status_code == 400
    assert "slots_per_trial" in api.json()
    created = client.post(
        reverse("api-experiment-list"), {**form, "slots_per_trial": 4}, content_type="application/json"
    )
    assert created.status_code == 201
    assert Experiment.objects.get(pk=created.json()["experiment"]).slots_per_trial == 4


@pytest.mark.slow
def test_a_random_search_of_two_slots_per_trial_stores_worker_shares_of_ranks_0_and_1(
    bob: User, dataset_storage: Path, settings: SettingsWrapper, tmp_path: Path
) -> None:
    # The real trainer in Determined's local training mode, two gloo processes per trial.
    settings.EXPERIMENT_RUN_DIR = tmp_path / "runs"
    settings.EXPERIMENT_BACKEND = "local"
    version = DemoDatasetVersionFactory.create(rows=2000)
    experiment = services.experiment_create(
        user=bob,
        dataset_version=version,
        template="random",
        max_trials=2,
        batches=8,
        slots_per_trial=2,
        hparams={"global_batch_size": 32, "share_window": 4},
    )
    experiment_launch_task(experiment.pk)
    experiment = poll_until_done(experiment, timeout=300)

    assert experiment.status == ExperimentStatus.COMPLETED, [t.log_tail for t in experiment.trials.all()]
    for trial in experiment.trials.all():
        assert trial.state == TrialState.COMPLETED
        shares = MetricPoint.objects.filter(trial=trial, kind=MetricKind.TRAINING, name__startswith="worker_share/")
        ranks = {name.rsplit("/", 1)[1] for name in shares.values_list("name", flat=True)}
        assert ranks == {"rank0", "rank1"}
        # Each rank's shares of an attribute's groups (unknown included) sum to one.
        for rank in ("rank0", "rank1"):
            gender = shares.filter(attribute="gender", name__endswith=f"/{rank}", step=8)
            assert sum(point.value or 0.0 for point in gender) == pytest.approx(1.0)
        spread = MetricPoint.objects.get(
            trial=trial, kind=MetricKind.TRAINING, step=8, name="worker_share_spread/gender"
        )
        assert spread.value is not None
