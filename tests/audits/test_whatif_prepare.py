"""What-if thresholds, the prepare and store path (no database).

The scores are grouped per segment block by block in two threads, then each segment is sorted: the
result must be, byte for byte, what one stable argsort over every row's segment followed by a sort
of each segment gives. The common file is read straight from the reader's blocks (the audit's block
path); it must give what the general path, which decodes every column, gives. The stored file must
be numpy.save's, and its SHA-256 that of its bytes."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from auditportal.fairness.files.tabular import DatasetError
from auditportal.fairness.statistics import whatif
from auditportal.fairness.statistics.audit import AuditSpec
from tests.audits.conftest import write

MAX = 1 << 30


def _reference(
    scores: npt.NDArray[np.float64],
    codes: Sequence[npt.NDArray[Any]],
    target: npt.NDArray[np.int8],
    shape: tuple[int, ...],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """The plain way: every row's segment, one stable argsort, then each segment sorted."""
    segment = np.zeros(len(scores), np.int64)
    for size, values in zip(shape, codes, strict=True):
        segment = segment * size + values + 1
    segment = segment * 2 + target
    grouped = scores[np.argsort(segment, kind="stable")]
    bounds = np.concatenate([[0], np.cumsum(np.bincount(segment, minlength=2 * math.prod(shape)))]).astype(np.int64)
    for start, end in itertools.pairwise(bounds.tolist()):
        grouped[start:end].sort()
    return grouped, bounds


@pytest.mark.parametrize(
    ("rows", "groups", "cuts"),
    [
        (0, (3,), 0),
        (1, (3,), 0),
        (1000, (3,), 0),  # one block
        (20_011, (5, 2), 25),  # blocks of uneven lengths in each half; copied slice by slice (int8 segments)
        (20_011, (40, 9), 25),  # one scatter per block (int16 segments)
        (30_000, (200, 90), 25),  # more than 32,768 segments (int32)
        (70_000, (200, 90), 0),  # one block of 70,000 rows: keys of 17 + 16 bits, in uint64
    ],
)
def test_the_scores_are_grouped_and_sorted_as_one_stable_argsort_then_a_sort_per_segment(
    rows: int, groups: tuple[int, ...], cuts: int
) -> None:
    rng = np.random.default_rng(rows)
    shape = tuple(count + 1 for count in groups)
    codes = [rng.integers(-1, count, rows).astype(np.int32) for count in groups]
    target = (rng.random(rows) < 0.4).astype(np.int8)
    # Few distinct values, 0.0 and -0.0 among them: ties whose order shows in the bytes.
    scores = rng.choice(np.array([-0.0, 0.0, 0.25, -1.5, 1e-300, 0.5, 2.0]), rows)
    edges = sorted({0, rows, *rng.integers(0, rows + 1, cuts).tolist()})
    blocks = list(itertools.pairwise(edges))
    reference_segment = np.zeros(rows, np.int64)
    for size, values in zip(shape, codes, strict=True):
        reference_segment = reference_segment * size + values + 1
    reference_segment = reference_segment * 2 + target

    def fill(index: int, out: npt.NDArray[Any]) -> None:
        out[...] = reference_segment[slice(*blocks[index])]

    grouped, bounds = whatif._sorted_by_segment(
        rows, 2 * math.prod(shape), blocks, fill, lambda index: scores[slice(*blocks[index])]
    )
    expected, expected_bounds = _reference(scores, codes, target, shape)
    assert grouped.tobytes() == expected.tobytes()
    assert bounds.tolist() == expected_bounds.tolist()


def _both_paths(monkeypatch: pytest.MonkeyPatch, path: Path, spec: AuditSpec) -> tuple[Any, Any]:
    """The file prepared as it comes (which must take the block path) and by the general path."""
    taken = []
    block_path = whatif._prepared_from_blocks

    def spy(*args: Any, **kwargs: Any) -> Any:
        result = block_path(*args, **kwargs)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(whatif, "_BLOCK_ROWS", 512)  # many blocks, a Parquet row group in several
    monkeypatch.setattr(whatif, "_prepared_from_blocks", spy)
    fast = whatif.prepare(path, spec, display_name=path.name, max_bytes=MAX)
    assert taken == [True]
    monkeypatch.setattr(whatif, "_prepared_from_blocks", lambda *args, **kwargs: None)
    general = whatif.prepare(path, spec, display_name=path.name, max_bytes=MAX)
    return fast, general


def _table(rows: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    score = rng.normal(0.4, 0.3, rows).round(2)  # rounding makes -0.0 as well as 0.0, and ties
    return {
        "label": (rng.random(rows) < 0.4).astype(np.int64),
        "score": score,
        "gender": rng.choice(["f", "m", "x", "unknown", "", "N/A"], rows),
        "age": rng.choice(["young", "old", "mid"], rows),
        "region": rng.integers(0, 50, rows),  # a number column as an attribute: encoded, not read as one
    }


@pytest.mark.parametrize(
    ("name", "spec"),
    [
        ("one.csv", AuditSpec(label="label", score="score", threshold=0.5, attributes=("gender",))),
        (
            "two.csv",
            AuditSpec(label="label", score="score", threshold=0.4, attributes=("gender", "age"), intersect=True),
        ),
        ("many.csv", AuditSpec(label="label", score="score", threshold=0.5, attributes=("region", "age"))),
        ("one.parquet", AuditSpec(label="label", score="score", threshold=0.5, attributes=("gender", "age"))),
        ("shifted.csv", AuditSpec(label="label", score="score", threshold=0.5, attributes=("age",), positive="2")),
        ("low.csv", AuditSpec(label="label", score="score", threshold=0.5, attributes=("age",), positive="1")),
    ],
)
def test_the_block_path_prepares_what_the_general_path_prepares(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, spec: AuditSpec
) -> None:
    # Over 1 MiB of CSV: several reader blocks, each with its own dictionary (values in another order).
    columns = _table(120_001, seed=len(name))
    if name == "shifted.csv":
        columns["label"] = columns["label"] + 1  # labels 1 and 2, 2 positive
    if name == "low.csv":
        columns["label"] = columns["label"] + 1  # labels 1 and 2, 1 positive: the lower value
    path = tmp_path / name
    if name.endswith(".parquet"):
        table = pa.table(columns)
        table = table.set_column(2, "gender", pa.array(np.where(columns["gender"] == "", None, columns["gender"])))
        pq.write_table(table, path, row_group_size=4_000)
    else:
        pacsv.write_csv(pa.table(columns), path)
    fast, general = _both_paths(monkeypatch, path, spec)
    assert np.asarray(fast.scores).tobytes() == np.asarray(general.scores).tobytes()
    assert json.dumps(fast.meta(), sort_keys=True) == json.dumps(general.meta(), sort_keys=True)
    assert fast.positives == int(np.count_nonzero(columns["label"] == int(spec.positive)))


@pytest.mark.parametrize(
    ("text", "words", "row", "column"),
    [
        ("label,score,g\n1,0.9,a\n0,nan,b\n", "the score is missing", 2, "score"),
        ("label,score,g\n1,0.9,a\n0,,b\n", "the score is missing", 2, "score"),
        ("label,score,g\n1,0.9,a\n1,0.3,b\n", "the label has a single value", None, "label"),
        ("label,score,g\n1,0.9,a\n2,0.3,b\n0,0.1,a\n", "value '2' makes the label non-binary", 2, "label"),
        (
            "label,score,g\n1,0.9,unknown\n0,0.3,unknown\n",
            "every value of the sensitive attribute is unknown",
            None,
            "g",
        ),
    ],
    ids=["nan-score", "no-score", "one-label-value", "three-label-values", "all-unknown"],
)
def test_a_file_the_block_path_leaves_is_refused_by_the_general_path_naming_the_place(
    tmp_path: Path, text: str, words: str, row: int | None, column: str
) -> None:
    path = write(tmp_path / "p.csv", text)
    with pytest.raises(DatasetError) as caught:
        whatif.prepare(
            path,
            AuditSpec(label="label", score="score", threshold=0.5, attributes=("g",)),
            display_name="p.csv",
            max_bytes=MAX,
        )
    assert words in str(caught.value)
    assert caught.value.row == row
    assert caught.value.column == column


def test_saved_scores_are_numpy_saves_bytes_and_their_sha256(tmp_path: Path) -> None:
    scores = np.sort(np.random.default_rng(3).normal(size=70_001))
    digest = whatif.save_scores(scores, tmp_path / "scores.npy")
    saved = io.BytesIO()
    np.save(saved, scores, allow_pickle=False)
    on_disk = (tmp_path / "scores.npy").read_bytes()
    assert on_disk == saved.getvalue()
    assert digest == hashlib.sha256(on_disk).hexdigest()
    assert np.load(tmp_path / "scores.npy", mmap_mode="r").tobytes() == scores.tobytes()


def test_no_scores_save_as_an_empty_array(tmp_path: Path) -> None:
    digest = whatif.save_scores(np.empty(0), tmp_path / "scores.npy")
    assert digest == hashlib.sha256((tmp_path / "scores.npy").read_bytes()).hexdigest()
    assert np.load(tmp_path / "scores.npy").shape == (0,)
