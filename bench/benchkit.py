"""What the benchmark scripts share: fresh child processes, removing the generated file, a
PostgreSQL database to write into, and a placeholder dataset version for experiments.

The scripts run as ``python bench/NAME.py``, so this directory is on ``sys.path`` (and spawned
children inherit it).
"""

from __future__ import annotations

import multiprocessing
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any


def in_child(what: str, target: Callable[..., None], *args: Any) -> Any:
    """Run ``target(*args, queue)`` in a fresh (spawned) process and return what it put on the queue."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=target, args=(*args, queue))
    child.start()
    result = queue.get()
    child.join()
    if child.exitcode != 0:
        raise SystemExit(f"{what} failed with exit code {child.exitcode}")
    return result


def remove_generated(path: Path, directory: Path, *, keep: bool, directory_given: bool) -> None:
    """Keep ``path`` when asked; else delete it, and the temporary ``directory`` the script made."""
    if keep:
        print(f"kept {path}")
    elif directory_given:
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(directory, ignore_errors=True)


def ensure_database(url: str) -> None:
    """Create the PostgreSQL database ``url`` names, if it does not exist."""
    from urllib.parse import urlparse

    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    admin = parsed._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def bench_dataset_version() -> Any:
    """A dataset version for benchmark experiments (after ``django.setup()``): registered by no one,
    with no file behind it, which nothing the benchmarks run reads."""
    from auditportal.accounts.models import User
    from auditportal.datasets.models import Dataset, DatasetVersion

    user, _ = User.objects.get_or_create(username="bench")
    dataset, _ = Dataset.objects.get_or_create(name="bench", defaults={"created_by": user})
    version, _ = DatasetVersion.objects.get_or_create(
        dataset=dataset,
        number=1,
        defaults={
            "storage_path": "bench/none.csv",
            "original_name": "none.csv",
            "file_format": "csv",
            "sha256": "0" * 64,
            "size_bytes": 1,
            "num_rows": 1,
            "positives": 0,
            "negatives": 1,
            "label_column": "y",
            "positive_value": "1",
            "created_by": user,
        },
    )
    return version
