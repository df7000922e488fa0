"""A production batch's pending rows and the labels that arrive later (fairness/statistics/batchcount.py):
labels_apply's matching by key, the row-key checks, and the side file's dictionary-encoded groups."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from auditportal.fairness.files.tabular import DatasetError, ReadLimits
from auditportal.fairness.statistics import batchcount
from auditportal.fairness.statistics.batchcount import BatchColumns, LabelRows, PendingRows, cells_zero

LIMITS = ReadLimits(rows=10_000_000)
HOSTILE = '=HYPERLINK("http://x")<script>alert(1)</script>\'; DROP TABLE x;--\u202e\u00e9'


def _pending(keys: list[str], selected: list[bool], groups: list[str | None]) -> PendingRows:
    return PendingRows(
        pa.table(
            {
                "key": pa.array(keys, pa.string()),
                "selected": pa.array(selected, pa.bool_()),
                "group_0": pa.array(groups, pa.string()),
            }
        )
    )


def _labels(keys: list[str], positive: list[bool]) -> LabelRows:
    return LabelRows(keys=pa.array(keys, pa.string()), positive=np.array(positive, dtype=bool))


def _cells(**given: int) -> dict[str, int]:
    return {**cells_zero(), **given}


def test_a_key_labelled_twice_takes_its_last_label() -> None:
    pending = _pending(["a", "b"], [True, False], ["f", "m"])
    # "a": negative, then positive (last wins: selected and positive, a tp); "b": positive then negative (tn).
    applied = batchcount.labels_apply(pending, _labels(["a", "b", "a", "b"], [False, True, True, False]), ["gender"])
    assert applied.labelled == 2
    assert applied.unmatched == 0
    assert applied.remaining.rows == 0
    groups = applied.delta["gender"].groups
    assert groups["f"] == _cells(tp=1, unlabelled=-1, unlabelled_selected=-1)
    assert groups["m"] == _cells(tn=1, unlabelled=-1)


def test_no_pending_rows_labels_nothing_and_every_distinct_key_is_unmatched() -> None:
    applied = batchcount.labels_apply(None, _labels(["a", "b", "a"], [True, False, True]), ["gender", "age"])
    assert (applied.labelled, applied.unmatched, applied.remaining.rows) == (0, 2, 0)
    assert all(not delta.groups and delta.unknown == cells_zero() for delta in applied.delta.values())


def test_keys_matching_no_pending_row_are_counted_unmatched_and_the_rest_stay_pending() -> None:
    pending = _pending(["r1", "r2", "r3", "r4"], [True, True, False, False], ["f", None, "m", "f"])
    applied = batchcount.labels_apply(pending, _labels(["r2", "zz", "r1 ", "zz", "R3"], [True] * 5), ["gender"])
    # "r1 " and "R3" are other keys (read_labels trims a file's keys; matching is exact), "zz" is one key.
    assert applied.labelled == 1
    assert applied.unmatched == 3
    assert applied.remaining.table.column("key").to_pylist() == ["r1", "r3", "r4"]
    assert applied.delta["gender"].unknown == _cells(tp=1, unlabelled=-1, unlabelled_selected=-1)
    assert applied.delta["gender"].groups == {}


def test_a_hostile_key_is_only_compared_and_its_group_kept_as_text() -> None:
    pending = _pending([HOSTILE, "plain"], [False, True], [HOSTILE, "m"])
    applied = batchcount.labels_apply(pending, _labels([HOSTILE, "%s%n"], [True, False]), ["gender"])
    assert (applied.labelled, applied.unmatched) == (1, 1)
    assert applied.delta["gender"].groups == {HOSTILE: _cells(fn=1, unlabelled=-1)}
    assert applied.remaining.table.column("key").to_pylist() == ["plain"]


def _batch(directory: Path, keys: list[str], groups: list[str | None], name: str = "batch.csv") -> Path:
    rows = len(keys)
    table = pa.table(
        {
            "id": pa.array(keys, pa.string()),
            "score": pa.array(np.linspace(0, 1, rows)),
            "gender": pa.array(groups, pa.string()),
            "label": pa.array([1 if index % 3 == 0 else None for index in range(rows)], pa.int8()),
        }
    )
    path = directory / name
    if name.endswith(".csv"):
        pacsv.write_csv(table, path)
    else:
        pq.write_table(table, path)
    return path


COLUMNS = BatchColumns(attributes=("gender",), score="score", threshold=0.5, label="label", row_key="id")


def _count(path: Path) -> batchcount.BatchCount:
    return batchcount.count_batch_file(path, COLUMNS, display_name=path.name, max_bytes=10**9, limits=LIMITS)


@pytest.mark.parametrize("keys", [["a", "b", "b", "c"], ["c", "a", "b", "a"]], ids=["ascending", "shuffled"])
def test_a_repeated_row_key_is_refused_whether_or_not_the_keys_come_in_order(tmp_path: Path, keys: list[str]) -> None:
    with pytest.raises(DatasetError, match="row keys repeat"):
        _count(_batch(tmp_path, keys, ["f"] * len(keys)))


@pytest.mark.parametrize("name", ["batch.csv", "batch.parquet"])
def test_pending_rows_survive_the_side_file_and_their_labels_give_the_naive_counts(tmp_path: Path, name: str) -> None:
    rng = np.random.default_rng(7)
    rows = 3000
    keys = [f"k{index}" for index in rng.permutation(rows)]
    groups: list[str | None] = [[" f", "f", "m", "unknown", None, HOSTILE][index] for index in rng.integers(0, 6, rows)]
    counted = _count(_batch(tmp_path, keys, groups, name))
    assert counted.pending is not None
    pq.write_table(counted.pending.table, tmp_path / "pending.parquet")  # as the portal keeps it
    pending = PendingRows(pq.read_table(tmp_path / "pending.parquet"))
    assert pending.rows == sum(1 for index in range(rows) if index % 3 != 0)
    late = rng.random(rows) < 0.5
    applied = batchcount.labels_apply(pending, _labels(keys, late.tolist()), ["gender"])
    assert applied.labelled == pending.rows
    assert applied.unmatched == rows - pending.rows
    total = counted.counts["gender"]
    total.add(applied.delta["gender"])
    expected: dict[str | None, dict[str, int]] = {}
    selected = np.linspace(0, 1, rows) >= 0.5
    for index in range(rows):
        group = groups[index]
        group = None if group is None or group == "unknown" else group.strip()
        positive = bool(index % 3 == 0) or bool(late[index])
        cell = ("tp" if selected[index] else "fn") if positive else ("fp" if selected[index] else "tn")
        expected.setdefault(group, cells_zero())[cell] += 1
    assert total.unknown == expected.pop(None)
    assert total.groups == expected


def test_a_parquet_dictionary_counts_only_the_groups_in_use(tmp_path: Path) -> None:
    rows = 100
    unused = [f"unused {index}" for index in range(batchcount.MAX_GROUPS + 5)]
    gender = pa.DictionaryArray.from_arrays(
        pa.array([index % 2 for index in range(rows)], pa.int32()), pa.array(["f", "m", *unused])
    )
    table = pa.table(
        {
            "id": [f"r{index:03d}" for index in range(rows)],
            "score": pa.array(np.linspace(0, 1, rows)),
            "gender": gender,
            "label": pa.nulls(rows, pa.int8()),
        }
    )
    pq.write_table(table, tmp_path / "batch.parquet")
    counted = _count(tmp_path / "batch.parquet")
    assert sorted(counted.counts["gender"].groups) == ["f", "m"]
    assert counted.pending is not None
    assert counted.pending.rows == rows
