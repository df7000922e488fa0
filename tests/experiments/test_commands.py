from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from auditportal.datasets.models import DatasetVersion
from auditportal.experiments.models import Experiment


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--template", "single", "--max-trials", "3"], "--max-trials: A single-trial experiment runs exactly one"),
        (["--template", "asha", "--batches", "8"], "--batches: An ASHA search needs at least 16 batches"),
        (["--template", "single", "--hparams", '{"lr": 0.1}'], "--hparams: Unknown hyperparameter 'lr'"),
    ],
)
def test_a_wrong_launch_parameter_names_its_option(demo_version: DatasetVersion, args: list[str], message: str) -> None:
    with pytest.raises(CommandError) as caught:
        call_command("launch_experiment", "--dataset", str(demo_version.pk), *args, stdout=StringIO())
    assert str(caught.value).startswith(message)
    assert not Experiment.objects.exists()
