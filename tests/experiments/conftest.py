from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, cast

import pytest
from django.conf import settings
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.datasets.models import DatasetVersion
from auditportal.experiments import services
from auditportal.experiments.backends import local
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
    """Poll the experiment, as a worker's periodic task does, until it has ended.

    The next poll comes as soon as there is something for it to see: a file in the experiment's run
    folder changed (a trial's runner started, its trainer reported or exited) or the last poll moved
    a trial (one handed back to the queue is started by the next), and at the latest after
    ``POLL_SECONDS``; never a fixed wait after every poll."""
    deadline = time.monotonic() + timeout
    folder = Path(settings.EXPERIMENT_RUN_DIR) / f"exp-{experiment.pk}"
    while time.monotonic() < deadline:
        files, trials = _files(folder), _trial_states(experiment)
        services.experiment_poll(experiment_id=experiment.pk)
        experiment.refresh_from_db()
        if not experiment.is_active:
            _runners_exit(folder, deadline)
            return experiment
        if _trial_states(experiment) != trials:
            continue
        until = min(deadline, time.monotonic() + POLL_SECONDS)
        while _files(folder) == files and time.monotonic() < until:
            time.sleep(0.02)
    raise AssertionError(f"experiment {experiment.pk} still {experiment.status} after {timeout}s")


# The longest wait between two polls of poll_until_done when nothing it can see has changed.
POLL_SECONDS = 0.2


def _files(folder: Path) -> set[tuple[str, int, int]]:
    """(path, size, modification time) of everything under ``folder``: a cheap look for a change."""
    found: set[tuple[str, int, int]] = set()
    for root, _, names in os.walk(folder):
        for name in names:
            try:
                stat = os.stat(os.path.join(root, name))
            except FileNotFoundError:  # removed while the folder was read
                continue
            found.add((os.path.join(root, name), stat.st_size, stat.st_mtime_ns))
    return found


def _runners_exit(folder: Path, deadline: float) -> None:
    """Wait for the experiment's trial runners that this process started to exit: a runner's exit
    status, which ended its trial, is the last thing it writes before it exits, a moment later."""
    for process in list(local._children.values()):
        if any(arg.startswith(f"{folder}{os.sep}") for arg in cast(list[str], process.args)):  # local._start's list
            process.wait(timeout=max(0.0, deadline - time.monotonic()))


def _trial_states(experiment: Experiment) -> list[tuple[int, str]]:
    return list(experiment.trials.order_by("pk").values_list("pk", "state"))


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
