"""A real Celery worker (with embedded beat) in a subprocess, for end-to-end tests.

The worker gets the test process's environment (same var directory, so the same filesystem broker,
dataset store and shards) and a DATABASE_URL naming the test database: a file for SQLite (see
conftest.py), ``test_<name>`` for PostgreSQL. Tests that use it must be transactional so the worker
sees their rows. Import the fixture into the test module to use it as ``start_worker``:
``from tests.worker import start_worker_fixture``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings

from tests.database import subprocess_database_url

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(name="start_worker")
def start_worker_fixture(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    workers: list[subprocess.Popen[bytes]] = []

    def start(**extra_env: str) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "auditportal.settings.test",
            "DATABASE_URL": subprocess_database_url(),
            "DATASET_STORAGE_DIR": str(settings.DATASET_STORAGE_DIR),
            "SHARD_DIR": str(settings.SHARD_DIR),
            "EXPERIMENT_RUN_DIR": str(settings.EXPERIMENT_RUN_DIR),
            "EXPERIMENT_POLL_SECONDS": "1",
            **extra_env,
        }
        log = (tmp_path / f"worker-{len(workers)}.log").open("wb")
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "auditportal",
                "worker",
                "--pool=solo",
                "--beat",
                "--schedule",
                str(tmp_path / f"beat-{len(workers)}"),
                "--loglevel=INFO",
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        workers.append(worker)
        return worker

    yield start
    # The test is over: its worker (and what it started in its process group, the warm Chromium of the
    # figures) is killed rather than asked to stop. A warm shutdown took 5 to 8 s a worker here (the
    # consumer loop notices the request only at the end of its 2-second drain, then beat, the timer and
    # the Chromium are stopped one after another) and checked nothing; the next test's database and
    # queue are emptied whatever the worker left (a transactional test's flush, tasks_left_purged).
    for worker in workers:
        if worker.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
