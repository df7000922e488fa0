"""Completed local trials with a checkpoint folder in their run folder and shards on disk: enough for the
checks made before a worker runs the checkpoint (test_real.py trains and runs a real one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.attributions import services
from auditportal.attributions.models import AttributionState, TrialAttribution
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments.models import Trial, TrialState
from auditportal.fairness.documents.canonical import canonical_json, canonical_sha256
from tests.attributions.documents import summary_document
from tests.factories import DatasetVersionFactory, ExperimentFactory, TrialFactory

GROUPS = {"gender": ["female", "male"], "age_group": ["18-29", "30-44", "45+"]}


@pytest.fixture
def runs(settings: SettingsWrapper, tmp_path: Path) -> Path:
    settings.EXPERIMENT_RUN_DIR = tmp_path / "runs"
    (tmp_path / "runs").mkdir()
    return tmp_path / "runs"


@pytest.fixture
def version(db: None) -> DatasetVersion:
    made: DatasetVersion = DatasetVersionFactory.create()
    return made


def write_manifest(shards: Path, version: DatasetVersion, groups: dict[str, list[str]] = GROUPS) -> Path:
    shards.mkdir(parents=True, exist_ok=True)
    manifest = {
        "dataset": {"sha256": version.sha256},
        "part_dirs": ["part-00000"],
        "num_examples": 10,
        "attributes": [{"name": name, "groups": values} for name, values in groups.items()],
    }
    (shards / "manifest.json").write_text(json.dumps(manifest))
    return shards


def local_trial(
    version: DatasetVersion,
    runs: Path,
    *,
    weights: bytes = b"weights",
    counted: dict[str, list[str]] | None = None,
    **fields: Any,
) -> Trial:
    """A completed local trial of a new experiment on ``version``, its checkpoint in its run folder
    (``runs/exp-<id>/trial-<n>/xdg/determined/ckpt-<pk>``) with ``weights`` as its state_dict.pth, a
    run.json naming ``version``, and ``counted`` groups in bias_stats.json."""
    shards = write_manifest(runs / f"shards-{version.pk}", version)
    experiment = ExperimentFactory.create(dataset_version=version, shard_dir=str(shards))
    trial: Trial = TrialFactory.create(experiment=experiment, state=fields.pop("state", TrialState.COMPLETED), **fields)
    run = runs / f"exp-{experiment.pk}" / f"trial-{trial.number}"
    checkpoint = run / "xdg" / "determined" / f"ckpt-{trial.pk}"
    checkpoint.mkdir(parents=True)
    (checkpoint / "state_dict.pth").write_bytes(weights)
    attributes = {
        name: {"groups": {group: {"tp": 1, "fn": 1, "fp": 1, "tn": 1} for group in values}, "unknown": 0}
        for name, values in (counted or GROUPS).items()
    }
    (checkpoint / "bias_stats.json").write_text(json.dumps({"schema": 1, "attributes": attributes}))
    record = {
        "experiment": experiment.pk,
        "trial": trial.pk,
        "dataset_version": {"id": version.pk, "sha256": version.sha256},
    }
    (run / "run.json").write_text(json.dumps(record))
    trial.checkpoint = str(checkpoint)
    trial.save(update_fields=["checkpoint"])
    return trial


@pytest.fixture
def trial(version: DatasetVersion, runs: Path) -> Trial:
    return local_trial(version, runs)


def done_attribution(
    trial: Trial, user: Any, document: dict[str, Any] | None = None, **fields: Any
) -> TrialAttribution:
    """A done attribution of ``trial`` written as the worker leaves one (without running anything): its
    summary ``document`` (by default tests/attributions/documents.py's) with its inputs."""
    summary = document or summary_document(attributes=GROUPS_FOR_DOCUMENT)
    checkpoint = Path(trial.checkpoint)
    version = trial.experiment.dataset_version
    attribution: TrialAttribution = TrialAttribution.objects.create(
        trial=trial,
        checkpoint=trial.checkpoint,
        checkpoint_name=checkpoint.name,
        checkpoint_sha256=fields.pop("checkpoint_sha256", "c" * 64),
        dataset_version=version,
        dataset_sha256=version.sha256,
        sample_size=fields.pop("sample_size", 400),
        seed=fields.pop("seed", 0),
        created_by=user,
        **fields,
    )
    stored = services.attribution_document(attribution, summary)
    TrialAttribution.objects.filter(pk=attribution.pk).update(
        state=AttributionState.DONE,
        method=stored["method"],
        canonical=canonical_json(stored).decode(),
        sha256=canonical_sha256(stored),
        completed_at=timezone.now(),
    )
    attribution.refresh_from_db()
    return attribution


GROUPS_FOR_DOCUMENT = {"gender": ("male", "female"), "age_group": ("30-44", "18-29", "45+")}
