from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.datasets.models import DatasetVersion
from auditportal.experiments import services
from auditportal.experiments.models import Experiment
from tests.factories import DemoDatasetVersionFactory


@pytest.fixture
def demo_version(db: None, dataset_storage: Path) -> DatasetVersion:
    return DemoDatasetVersionFactory.create(rows=400)


@pytest.fixture
def fake_trainer(settings: SettingsWrapper, tmp_path: Path) -> Path:
    settings.EXPERIMENT_TRAINER_MODULE = "tests.experiments.fake_trainer"
    settings.EXPERIMENT_RUN_DIR = tmp_path / "runs"
    settings.EXPERIMENT_BACKEND = "local"
    return tmp_path / "runs"


def metrics_in_file(path: Path) -> dict[tuple[str, int, str], float | None]:
    """What a trainer reported, keyed like the database's unique constraint (last value wins)."""
    reported: dict[tuple[str, int, str], float | None] = {}
    for line in path.read_text().splitlines():
        doc: dict[str, Any] = json.loads(line)
        for name, value in doc["metrics"].items():
            reported[(doc["kind"], doc["step"], name)] = None if value is None else float(value)
    return reported


def poll_until_done(experiment: Experiment, *, timeout: float = 60) -> Experiment:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        services.experiment_poll(experiment_id=experiment.pk)
        experiment.refresh_from_db()
        if not experiment.is_active:
            return experiment
        time.sleep(0.2)
    raise AssertionError(f"experiment {experiment.pk} still {experiment.status} after {timeout}s")


def processes_of(directory: Path) -> list[int]:
    """Live processes whose command line names ``directory`` (a trial's runner and trainer)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if state != "Z" and str(directory).encode() in cmdline:
            found.append(int(entry.name))
    return found
