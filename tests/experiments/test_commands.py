from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.activity.models import Event
from auditportal.datasets.models import DatasetVersion, IntegrityCheck
from auditportal.experiments.configs import from_yaml
from auditportal.experiments.models import Experiment
from tests.datasets.conftest import flip_labels
from tests.stubs.expconf import config_errors


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


def _print_config(version: DatasetVersion, *args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("launch_experiment", "--dataset", str(version.pk), "--print-config", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_print_config_prints_the_config_a_launch_stores_and_launches_nothing(
    bob: User, demo_version: DatasetVersion, settings: SettingsWrapper
) -> None:
    # No master at all: the config is the same whichever backend runs it.
    settings.DET_MASTER = None
    settings.EXPERIMENT_BACKEND = "local"
    checks, events = IntegrityCheck.objects.count(), Event.objects.count()
    args = ["--template", "asha", "--max-trials", "8", "--batches", "320", "--name", "loans-asha"]
    printed, _ = _print_config(demo_version, *args)
    assert not Experiment.objects.exists()
    assert (IntegrityCheck.objects.count(), Event.objects.count()) == (checks, events)
    config = from_yaml(printed)
    assert config_errors(config) == []
    assert config["searcher"]["max_rungs"] == 3
    assert "num_rungs" not in printed

    call_command("launch_experiment", "--dataset", str(demo_version.pk), *args, "--user", "bob", stdout=StringIO())
    assert Experiment.objects.get().config_yaml == printed


def test_print_config_without_a_name_says_the_id_is_added(demo_version: DatasetVersion) -> None:
    printed, note = _print_config(demo_version, "--template", "single")
    assert from_yaml(printed)["name"] == "credit-demo-v1-single"
    assert "adds -<experiment id> to the default name" in note


def test_print_config_names_a_wrong_option_like_a_launch(demo_version: DatasetVersion) -> None:
    with pytest.raises(CommandError) as caught:
        _print_config(demo_version, "--template", "asha", "--batches", "8")
    assert str(caught.value).startswith("--batches: An ASHA search needs at least 16 batches")
