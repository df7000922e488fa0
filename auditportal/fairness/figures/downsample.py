"""Which points of a long series a chart keeps: at most ``max_points``, the shape intact.

Rule (docs/dashboard.md): a series no longer than the budget is kept whole. A longer one keeps, in
this order of priority, its first and last point, its smallest and largest value, the first point
after every change of its label (a verdict) and the last point before it, and then, with what is
left of the budget, the smallest and the largest value of each of equally many consecutive buckets
(min/max per bucket, which keeps every spike a line chart would show; where one of them is kept
already, that slot stays unused). Missing values (NaN) count as
a label of their own, so a gap in the data stays a gap. Should the changes alone not fit, evenly
spaced ones are kept: the budget is a hard limit.

Pure numpy, no Django, no plotly: the selectors call it before building a figure, the CSV export
does not (it writes every point).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

MAX_POINTS = 2000
# Below this a bucket budget is meaningless (one bucket gives two points).
MIN_POINTS = 8

IndexArray = npt.NDArray[np.intp]


def downsample_indices(
    values: Sequence[float | None] | npt.NDArray[np.float64],
    *,
    max_points: int = MAX_POINTS,
    labels: Sequence[object] | npt.NDArray[np.int64] | None = None,
) -> IndexArray:
    """The indices (ascending) of the points to keep out of ``values``.

    ``labels``, one per value, mark each point's category (a verdict, or None); every change of
    label is kept. Indices rather than values, so that the caller picks steps, values and any
    per-point data alike.
    """
    if max_points < MIN_POINTS:
        raise ValueError(f"max_points must be at least {MIN_POINTS}, not {max_points}")
    y = np.asarray(values, dtype=np.float64)
    n = y.size
    if labels is not None and len(labels) != n:
        raise ValueError(f"labels has {len(labels)} entries for {n} values")
    if n <= max_points:
        return np.arange(n, dtype=np.intp)

    missing = np.isnan(y)
    kept: list[IndexArray] = [np.array([0, n - 1], dtype=np.intp)]
    if not missing.all():
        kept.append(np.array([np.nanargmin(y), np.nanargmax(y)], dtype=np.intp))
    required = np.unique(np.concatenate(kept))

    starts = _change_starts(missing, labels)  # first point under a new label
    befores = starts - 1  # last point under the old one
    for candidates in (starts, befores):
        candidates = np.setdiff1d(candidates, required, assume_unique=False)
        room = max_points - required.size
        if candidates.size > room:
            candidates = candidates[_evenly(candidates.size, room)]
        required = np.union1d(required, candidates)

    buckets = (max_points - required.size) // 2
    if buckets < 1:
        return required
    # Bucket extremes that are kept already (the first point, the overall extremes) leave a little
    # of the budget unused: cheaper than a second pass.
    return np.union1d(required, _bucket_extremes(y, missing, buckets))


def label_changes(labels: Sequence[object] | npt.NDArray[np.int64]) -> IndexArray:
    """The indices where a label differs from the one before (the first point under a new label)."""
    if isinstance(labels, np.ndarray) and labels.dtype.kind in "iub":
        return (np.flatnonzero(labels[1:] != labels[:-1]) + 1).astype(np.intp)
    # Compared as Python objects (None, strings): numpy's element-wise object equality.
    as_array = np.empty(len(labels), dtype=object)
    as_array[:] = list(labels)
    return (np.flatnonzero(as_array[1:] != as_array[:-1]) + 1).astype(np.intp)


def _change_starts(
    missing: npt.NDArray[np.bool_], labels: Sequence[object] | npt.NDArray[np.int64] | None
) -> IndexArray:
    starts = np.flatnonzero(missing[1:] != missing[:-1]) + 1
    if labels is not None:
        starts = np.union1d(starts, label_changes(labels))
    return starts.astype(np.intp)


def _evenly(size: int, count: int) -> IndexArray:
    """``count`` positions spread evenly over ``range(size)``, first and last included."""
    if count <= 0:
        return np.array([], dtype=np.intp)
    return np.unique(np.round(np.linspace(0, size - 1, count)).astype(np.intp))


def _bucket_extremes(y: npt.NDArray[np.float64], missing: npt.NDArray[np.bool_], buckets: int) -> IndexArray:
    """The index of the smallest and the largest value in each of ``buckets`` consecutive runs of
    (nearly) equal length; a bucket of missing values only keeps its first point."""
    n = y.size
    bucket = (np.arange(n, dtype=np.int64) * buckets) // n  # 0 .. buckets-1, non-decreasing
    first = np.searchsorted(bucket, np.arange(buckets, dtype=np.int64))
    low = np.where(missing, np.inf, y)
    high = np.where(missing, -np.inf, -y)
    # Sorting by (bucket, value) puts each bucket's smallest value first; ties keep index order.
    by_low = np.lexsort((low, bucket))
    by_high = np.lexsort((high, bucket))
    return np.unique(np.concatenate([by_low[first], by_high[first]])).astype(np.intp)
