"""What-if thresholds, the prepare and store path (no database): the scores grouped per segment and
sorted by threads block by block must be byte for byte what one stable argsort over the segments
then a sort of each segment gives, and the stored file must be numpy.save's, hashed as written."""

from __future__ import annotations

import hashlib
import io
import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from auditportal.fairness.statistics import whatif


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
    ("rows", "groups"),
    [
        (0, (3,)),
        (1, (3,)),
        (1000, (3,)),  # fewer rows than a block
        (20_011, (5, 2)),  # many blocks in each half; segments copied slice by slice (int8)
        (20_011, (40, 9)),  # one scatter per block (int16 segments)
        (30_000, (200, 90)),  # more than 32,768 segments (int32)
    ],
)
def test_the_scores_are_grouped_and_sorted_as_one_stable_argsort_then_a_sort_per_segment(
    monkeypatch: pytest.MonkeyPatch, rows: int, groups: tuple[int, ...]
) -> None:
    monkeypatch.setattr(whatif, "_BLOCK_ROWS", 1024)
    rng = np.random.default_rng(rows)
    shape = tuple(count + 1 for count in groups)
    codes = [rng.integers(-1, count, rows).astype(np.int32) for count in groups]
    target = (rng.random(rows) < 0.4).astype(np.int8)
    # Few distinct values, 0.0 and -0.0 among them: ties whose order shows in the bytes.
    scores = rng.choice(np.array([-0.0, 0.0, 0.25, -1.5, 1e-300, 0.5, 2.0]), rows)
    grouped, bounds = whatif._sorted_by_segment(scores, codes, target, shape)
    expected, expected_bounds = _reference(scores, codes, target, shape)
    assert grouped.tobytes() == expected.tobytes()
    assert bounds.tolist() == expected_bounds.tolist()


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
