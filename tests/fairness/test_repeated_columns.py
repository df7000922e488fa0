"""Repeated column names in the tabular reader (issue 32): pyarrow keeps a CSV header's repeated
names as they are (it does not rename them as pandas does), reads only the first of them when asked
for the name by ``include_columns``, and reads every one from Parquet (which can store them)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from auditportal.fairness.files.tabular import DatasetError, DatasetSpec, read

SPEC = DatasetSpec(label="y", positive="1", attributes=("g",))


def _csv(path: Path, second: list[str]) -> Path:
    rows = [f"{y},{g},{a},{b}" for y, g, a, b in zip("0101", "abab", ["1", "2", "", "4"], second, strict=True)]
    path.write_text("y,g,s,s\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_a_used_repeated_name_whose_columns_are_identical_is_read_once(tmp_path: Path) -> None:
    path = _csv(tmp_path / "f.csv", ["1", "2", "", "4"])  # a null in the same row of both
    raw = read.read_columns(path, SPEC, others=[("s", "score")], display_name="f.csv", max_bytes=2**20)
    assert raw.columns == ("y", "g", "s", "s")
    assert raw.table.column_names.count("s") == 1
    assert raw.table.column("s").to_pylist() == [1, 2, None, 4]
    assert raw.repeats == {"s": None}
    assert read.repeated_columns_warnings(raw.columns, ["s"]) == [
        "columns 3 and 4 are both named 's' with identical values; the first is used"
    ]


@pytest.mark.parametrize(("second", "row"), [(["1", "2", "", "5"], 4), (["1", "2", "3", "4"], 3)])
def test_a_used_repeated_name_whose_columns_differ_is_refused_with_the_first_differing_row(
    tmp_path: Path, second: list[str], row: int
) -> None:
    path = _csv(tmp_path / "f.csv", second)
    with pytest.raises(DatasetError) as caught:
        read.read_columns(path, SPEC, others=[("s", "score")], display_name="f.csv", max_bytes=2**20)
    assert caught.value.column == "s"
    assert f"(columns 3 and 4 from the left) whose values differ (first in data row {row})" in str(caught.value)


def test_an_unused_repeated_name_is_not_compared(tmp_path: Path) -> None:
    path = _csv(tmp_path / "f.csv", ["9", "9", "9", "9"])
    raw = read.read_columns(path, SPEC, others=[], display_name="f.csv", max_bytes=2**20)
    assert raw.repeats == {}
    assert "s" not in raw.table.column_names
    (warning,) = read.repeated_columns_warnings(raw.columns)
    assert warning.startswith("the file has more than one column named 's' (columns 3 and 4); these were not used")


def test_parquet_stores_repeated_names_and_identical_values_of_two_widths_are_one_column(tmp_path: Path) -> None:
    table = pa.table(
        [
            pa.array([0, 1, 0, 1]),
            pa.array(list("abab")),
            pa.array([0.5, float("nan"), None, 2.0]),
            pa.array([1, 2, 3, 4], pa.int32()),
            pa.array([1, 2, 3, 4], pa.int64()),
            pa.array([0.5, float("nan"), None, 2.0]),
        ],
        names=["y", "g", "f", "s", "s", "f"],
    )
    pq.write_table(table, tmp_path / "f.parquet")
    raw = read.read_columns(
        tmp_path / "f.parquet", SPEC, others=[("s", "score"), ("f", "other")], display_name="f.parquet", max_bytes=2**20
    )
    assert raw.columns == ("y", "g", "f", "s", "s", "f")
    assert raw.repeats == {"s": None, "f": None}  # NaN and null in the same rows are the same values
    assert sorted(raw.table.column_names) == ["f", "g", "s", "y"]


def test_three_columns_of_one_name(tmp_path: Path) -> None:
    columns = ("a", "x", "b", "x", "x")
    assert read.identical_columns_warning(columns, "x") == (
        "columns 2, 4 and 5 are all named 'x' with identical values; the first is used"
    )
