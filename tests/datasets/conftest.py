from __future__ import annotations

import csv
import functools
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from auditportal.celery import app
from auditportal.datasets.models import DatasetVersion

SMALL_CSV = """income,region,gender,age_group,approved
52000,north,female,18-29,1
48000,south,male,30-44,0
61000,north,female,30-44,1
39000,west,,45-64,0
75000,south,male,18-29,1
42000,west,unknown,30-44,0
58000,north,female,45-64,0
66000,south,male,45-64,1
"""


@pytest.fixture
def inline_worker(
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> Iterator[Callable[[], AbstractContextManager[Any]]]:
    """``with inline_worker(): ...``: the tasks queued inside run when their transaction commits, in
    this process (the worker's code without a worker; tests/experiments/test_worker_e2e.py and the
    browser tests run a real one)."""
    before = {name: app.conf[name] for name in ("task_always_eager", "task_eager_propagates")}
    app.conf.update(task_always_eager=True, task_eager_propagates=True)
    try:
        yield lambda: django_capture_on_commit_callbacks(execute=True)
    finally:
        app.conf.update(before)


@pytest.fixture
def small_csv(tmp_path: Path) -> Path:
    path = tmp_path / "incoming" / "loans.csv"
    path.parent.mkdir()
    path.write_text(SMALL_CSV, encoding="utf-8")
    return path


def flip_labels(version: DatasetVersion) -> None:
    """Tamper with a registered version's stored file: swap its 0/1 labels in place, as someone
    with access to the store could, leaving everything else (and the database) as it was."""
    path = version.path
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    column = rows[0].index(version.label_column)
    for row in rows[1:]:
        row[column] = {"0": "1", "1": "0"}[row[column]]
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)


def many_rows_parquet(path: Path, rows: int, *, extra_columns: int = 0) -> Path:
    """A small file declaring ``rows`` rows of repetitive values (a few kilobytes per million rows)."""
    path.write_bytes(_many_rows_parquet_bytes(rows, extra_columns))
    return path


@functools.cache
def _many_rows_parquet_bytes(rows: int, extra_columns: int) -> bytes:
    """The file's bytes, written once per test process for each size: the writer gives the same bytes
    every time, and encoding 50 million rows takes 1.5 s of CPU."""
    block = 1_000_000
    columns: dict[str, pa.Array[Any]] = {
        "label": pa.array((np.arange(block) % 2).astype(np.int8)),
        "gender": pa.DictionaryArray.from_arrays(np.zeros(block, dtype=np.int32), pa.array(["female", "male"])),
    }
    columns.update({f"x{i}": pa.array(np.zeros(block, dtype=np.int64)) for i in range(extra_columns)})
    table = pa.table(columns)
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, table.schema, compression="zstd") as writer:
        for start in range(0, rows, block):
            writer.write_table(table.slice(0, min(block, rows - start)))
    return bytes(sink.getvalue().to_pybytes())


@pytest.fixture
def no_data_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if anything reads a Parquet file's data (its metadata may be read)."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the file's data were read")

    monkeypatch.setattr(pq.ParquetFile, "read", refuse)
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", refuse)
    monkeypatch.setattr(pq, "read_table", refuse)
