"""A Parquet file's dictionary encoding cannot make a small file decode to gigabytes: the decoded
size of the columns read is summed from each row group's dictionary before any value is expanded,
and the read stops, naming the column, as soon as it passes the limit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from auditportal.fairness.files.tabular import DatasetError, DatasetSpec, ReadLimits, read_columns

SPEC = DatasetSpec(label="label", positive="1", attributes=("gender",))


def dictionary_bomb(path: Path, *, rows: int, value_length: int) -> Path:
    """``rows`` rows whose ``gender`` takes two distinct values of ``value_length`` characters each:
    a dictionary page of two values and one bit per row, however long the values."""
    codes = (np.arange(rows) % 2).astype(np.int32)
    gender = pa.DictionaryArray.from_arrays(codes, pa.array(["a" * value_length, "b" * value_length]))
    label = pa.array(codes.astype(np.int8))
    pq.write_table(pa.table({"label": label, "gender": gender}), path, compression="zstd")
    return path


# Run in a fresh interpreter, so that its peak resident size is this read's alone.
_READ = """
import json, resource, sys
from pathlib import Path
from auditportal.fairness.files.tabular import DatasetError, DatasetSpec, ReadLimits, read_columns
path, limit = Path(sys.argv[1]), int(sys.argv[2])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    limits = ReadLimits(rows=20_000_000, decompressed_bytes=limit)
    spec = DatasetSpec(label="label", positive="1", attributes=("gender",))
    read_columns(path, spec, others=[], display_name=path.name, max_bytes=1 << 30, limits=limits)
    error = None
except DatasetError as exc:
    error = str(exc)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"error": error, "grown_kib": after - before}))
"""


def _read_in_subprocess(path: Path, limit: int) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _READ, str(path), str(limit)], capture_output=True, text=True, check=True, timeout=300
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.slow
@pytest.mark.parametrize(
    ("rows", "value_length", "limit", "at_least"),
    [
        # The finding's file: 124 KB, 1M rows, two values of 1,000 characters (about 1 GB decoded).
        (1_000_000, 1_000, 64 * 1024**2, "64.0 MiB"),
        # Values of 1 MiB: the same shape asks for terabytes; the default limit (4 GiB) refuses it.
        (1_000_000, 1024**2, 4 * 1024**3, "4.0 GiB"),
    ],
)
def test_a_dictionary_encoded_column_that_decodes_past_the_limit_is_refused_in_bounded_memory(
    tmp_path: Path, rows: int, value_length: int, limit: int, at_least: str
) -> None:
    path = dictionary_bomb(tmp_path / "bomb.parquet", rows=rows, value_length=value_length)
    assert path.stat().st_size < 200_000
    result = _read_in_subprocess(path, limit)
    assert result["error"] is not None, "the file was read whole"
    error = str(result["error"])
    assert error.startswith("bomb.parquet, column 'gender': ")
    assert f"over the limit of {at_least}" in error
    # The row group's dictionary indices (4 bytes a row) and its two values, not the decoded column.
    grown_mib = int(str(result["grown_kib"])) / 1024
    assert grown_mib < 128, f"the read grew the process by {grown_mib:.0f} MiB"


def test_the_error_names_the_column_that_decodes_largest(tmp_path: Path) -> None:
    path = dictionary_bomb(tmp_path / "bomb.parquet", rows=100_000, value_length=100)
    with pytest.raises(DatasetError) as caught:
        read_columns(
            path, SPEC, others=[], display_name="preds.parquet", max_bytes=1 << 30,
            limits=ReadLimits(decompressed_bytes=4 * 1024**2),
        )  # fmt: skip
    assert caught.value.column == "gender"
    assert str(caught.value).startswith("preds.parquet, column 'gender': ")


def test_a_dictionary_encoded_file_within_the_limit_reads_its_values(tmp_path: Path) -> None:
    path = dictionary_bomb(tmp_path / "ok.parquet", rows=10_000, value_length=10)
    raw = read_columns(
        path, SPEC, others=[], display_name="ok.parquet", max_bytes=1 << 30,
        limits=ReadLimits(decompressed_bytes=1024**2),
    )  # fmt: skip
    gender = raw.table.column("gender")
    assert gender.type == pa.string()  # decoded, as before
    assert gender.to_pylist()[:3] == ["a" * 10, "b" * 10, "a" * 10]
    assert raw.table.num_rows == 10_000


def test_a_csv_file_decodes_to_at_most_eight_bytes_a_byte_of_the_file(tmp_path: Path) -> None:
    # CSV has no dictionary: every value is spelled out in the file, so what it decodes to grows with
    # the file (bounded by the upload limit). The worst case is a one-character number and its
    # separator becoming an 8-byte integer and its validity bit, or an empty text value its 4-byte offset.
    path = tmp_path / "dense.csv"
    path.write_text("label,gender,score\n" + "1,,7\n0,a,\n" * 50_000, encoding="utf-8")
    raw = read_columns(
        path, SPEC, others=[("score", "score")], display_name="dense.csv", max_bytes=1 << 30,
        limits=ReadLimits(decompressed_bytes=1 << 30),
    )  # fmt: skip
    assert raw.table.num_rows == 100_000
    assert raw.table.nbytes <= 8 * path.stat().st_size
