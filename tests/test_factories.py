from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from auditportal.accounts.models import Role
from auditportal.experiments import configs, services
from auditportal.experiments.models import Template
from tests.audits.conftest import PREDICTIONS_CSV
from tests.datasets.conftest import SMALL_CSV
from tests.factories import (
    DatasetVersionFactory,
    DemoDatasetVersionFactory,
    ExperimentFactory,
    PredictionAuditFactory,
    TrialFactory,
)

pytestmark = pytest.mark.django_db


def test_a_dataset_version_is_registered_from_its_file_by_a_steward(dataset_storage: Path) -> None:
    version = DatasetVersionFactory.create()
    assert version.created_by.has_role(Role.DATA_STEWARD)
    assert version.path.read_text(encoding="utf-8") == SMALL_CSV
    assert version.sha256 == hashlib.sha256(SMALL_CSV.encode()).hexdigest()
    assert (version.num_rows, version.positives, version.negatives) == (8, 4, 4)
    assert list(version.attributes.values_list("name", flat=True)) == ["gender", "age_group"]
    again = DatasetVersionFactory.create(name=version.dataset.name, created_by=version.created_by)  # its steward
    assert (again.dataset_id, again.number) == (version.dataset_id, 2)


def test_what_registration_derives_from_the_file_cannot_be_set(dataset_storage: Path) -> None:
    with pytest.raises(TypeError, match="num_rows"):
        DatasetVersionFactory.create(num_rows=1000)


def test_the_demo_version_is_the_seeded_demo_table(dataset_storage: Path) -> None:
    version = DemoDatasetVersionFactory.create(rows=300)
    assert (version.dataset.name, version.original_name) == ("credit-demo", "credit-demo-300-seed20261129.csv")
    assert version.num_rows == 300
    assert version.label_column == "repaid"
    assert version.attributes.get(name="gender").unknown_count > 0


def test_an_experiment_holds_the_config_experiment_create_would_store(dataset_storage: Path) -> None:
    experiment = ExperimentFactory.create(template=Template.RANDOM, batches=32)
    assert experiment.launched_by.has_role(Role.ML_ENGINEER)
    assert (experiment.max_trials, experiment.validation_period) == (4, 8)
    assert experiment.hparam_space == configs.space_build("random", None)
    assert experiment.shard_dir.endswith(f"version-{experiment.dataset_version_id}-k1-seed0")
    config = configs.from_yaml(experiment.config_yaml)
    assert config["name"] == experiment.name
    assert config["searcher"]["max_trials"] == 4
    folder = Path(experiment.shard_dir).name
    assert f"--data {configs.CONTAINER_SHARD_ROOT}/{folder} " in config["entrypoint"]
    assert experiment.config_yaml == services.experiment_config_preview(
        dataset_version=experiment.dataset_version, template="random", batches=32, name=experiment.name
    )


def test_trials_are_numbered_within_their_experiment_and_drawn_from_its_space(dataset_storage: Path) -> None:
    experiment = ExperimentFactory.create(template=Template.RANDOM, batches=32)
    first, second = TrialFactory.create(experiment=experiment), TrialFactory.create(experiment=experiment)
    assert (first.number, second.number) == (1, 2)
    assert [first.hparams, second.hparams] == configs.sample(experiment.hparam_space, 2, seed=experiment.pk)
    assert first.hparams != second.hparams
    assert first.steps_planned == 32
    assert TrialFactory.create().number == 1  # a trial of a new experiment


def test_a_prediction_audit_is_the_services_result_on_its_file() -> None:
    audit = PredictionAuditFactory.create()
    assert audit.created_by.has_role(Role.ML_ENGINEER)
    assert audit.sha256 == hashlib.sha256(PREDICTIONS_CSV.encode()).hexdigest()
    assert audit.num_rows == 12
    assert audit.result["file"]["sha256"] == audit.sha256
    assert audit.verdict == "INCONCLUSIVE"
