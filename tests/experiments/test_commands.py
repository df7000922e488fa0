from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from auditportal.accounts.models import User
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments.models import Experiment
from tests.datasets.conftest import flip_labels


def _launch(version: DatasetVersion, hparams: dict[str, object]) -> str:
    out = StringIO()
    call_command(
        "launch_experiment",
        "--dataset",
        str(version.pk),
        "--template",
        "single",
        "--hparams",
        json.dumps(hparams),
        "--batches",
        "20",
        "--user",
        "bob",
        stdout=out,
    )
    return out.getvalue()


def test_launch_experiment_refuses_a_normalization_naming_the_option_and_the_allowed_values(
    bob: User, demo_version: DatasetVersion
) -> None:
    with pytest.raises(CommandError) as excinfo:
        _launch(demo_version, {"normalization": "layer"})
    assert str(excinfo.value) == '--hparams: normalization: "layer" is not one of none, batch, sync_batch.'
    assert not Experiment.objects.exists()


def test_launch_experiment_queues_sync_batch(bob: User, demo_version: DatasetVersion) -> None:
    out = _launch(demo_version, {"normalization": "sync_batch"})
    experiment = Experiment.objects.get(pk=int(out.strip().splitlines()[-1]))
    assert experiment.hparam_space["normalization"] == "sync_batch"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--template", "single", "--max-trials", "3"], "--max-trials: A single-trial experiment runs exactly one"),
        (["--template", "asha", "--batches", "8"], "--batches: An ASHA search needs at least 16 batches"),
        (["--template", "single", "--hparams", '{"lr": 0.1}'], "--hparams: Unknown hyperparameter 'lr'"),
        (
            ["--template", "random", "--slots-per-trial", "5"],
            "--slots-per-trial: slots_per_trial must be a whole number from 1 to 4, got 5.",
        ),
    ],
)
def test_a_wrong_launch_parameter_names_its_option(demo_version: DatasetVersion, args: list[str], message: str) -> None:
    with pytest.raises(CommandError) as caught:
        call_command("launch_experiment", "--dataset", str(demo_version.pk), *args, stdout=StringIO())
    assert str(caught.value).startswith(message)
    assert not Experiment.objects.exists()


def test_launch_experiment_refuses_a_tampered_dataset_file_naming_the_option(
    bob: User, demo_version: DatasetVersion
) -> None:
    flip_labels(demo_version)
    with pytest.raises(CommandError) as caught:
        _launch(demo_version, {})
    assert str(caught.value).startswith(
        "--dataset: Dataset version credit-demo v1 failed its integrity check: the stored file's SHA-256 is "
    )
    assert not Experiment.objects.exists()
