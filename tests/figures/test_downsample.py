"""The server-side downsampler: counts, extremes, verdict changes, short series untouched."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from auditportal.fairness.figures.downsample import MAX_POINTS, downsample_indices


def _walk(n: int, seed: int = 0) -> np.ndarray:
    return np.cumsum(np.random.default_rng(seed).normal(size=n))


def test_a_series_within_the_budget_is_kept_whole() -> None:
    values = _walk(MAX_POINTS)
    kept = downsample_indices(values)
    assert kept.tolist() == list(range(MAX_POINTS))
    assert downsample_indices([]).tolist() == []
    assert downsample_indices([0.5]).tolist() == [0]


@pytest.mark.parametrize("n", [MAX_POINTS + 1, 5_000, 100_000])
@pytest.mark.parametrize("max_points", [MAX_POINTS, 500, 9])
def test_a_long_series_keeps_at_most_the_budget_in_order(n: int, max_points: int) -> None:
    kept = downsample_indices(_walk(n, seed=n), max_points=max_points)
    assert 0 < kept.size <= max_points
    assert kept.size >= max_points // 2  # the budget is used, not wasted
    assert np.all(np.diff(kept) > 0)
    assert kept[0] == 0
    assert kept[-1] == n - 1


def test_the_extremes_are_kept_wherever_they_are() -> None:
    values = _walk(50_000, seed=3)
    values[12_345] = 1e6
    values[40_001] = -1e6
    kept = downsample_indices(values, max_points=100)
    assert {12_345, 40_001} <= set(kept.tolist())
    assert values[kept].max() == values.max()
    assert values[kept].min() == values.min()


def test_every_bucket_keeps_its_spikes() -> None:
    # A flat line with one spike up and one down in every 100 points: min/max per bucket keeps them all.
    values = np.zeros(10_000)
    values[50::100] = 1.0
    values[70::100] = -1.0
    kept = downsample_indices(values, max_points=200 + 4)
    assert np.count_nonzero(values[kept] == 1.0) == 100
    assert np.count_nonzero(values[kept] == -1.0) == 100


def test_every_change_of_verdict_is_kept_on_both_sides() -> None:
    n = 20_000
    labels: list[str | None] = [None] * 100 + ["PASS"] * 4_900 + ["FAIL"] * 3 + ["PASS"] * 14_997
    labels[15_000] = "INCONCLUSIVE"
    assert len(labels) == n
    kept = set(downsample_indices(np.zeros(n), max_points=50, labels=labels).tolist())
    for change in (100, 5_000, 5_003, 15_000, 15_001):
        assert change in kept, change
        assert change - 1 in kept, change - 1
    shown = [labels[i] for i in sorted(kept)]
    changes = sum(1 for a, b in itertools.pairwise(shown) if a != b)
    assert changes == 5  # the chart sees the same five changes the full series has


def test_a_gap_in_the_data_stays_a_gap() -> None:
    values = _walk(10_000, seed=5)
    values[3_000:3_010] = np.nan
    kept = downsample_indices(values, max_points=40)
    assert {2_999, 3_000, 3_009, 3_010} <= set(kept.tolist())
    assert np.isnan(values[kept]).any()


def test_more_changes_than_the_budget_are_thinned_evenly_but_the_budget_holds() -> None:
    n = 10_000
    labels = ["PASS" if (i // 2) % 2 else "FAIL" for i in range(n)]  # a change every second point
    kept = downsample_indices(np.arange(n, dtype=float), max_points=100, labels=labels)
    assert kept.size <= 100
    assert kept[0] == 0
    assert kept[-1] == n - 1
    spread = np.diff(kept)
    assert spread.max() < 4 * n / 100  # spread over the whole series, not bunched at its start


def test_a_series_of_only_missing_values_is_thinned_without_error() -> None:
    kept = downsample_indices([None] * 5_000, max_points=10)
    assert 0 < kept.size <= 10


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="max_points must be at least 8, not 2"):
        downsample_indices([1.0, 2.0], max_points=2)
    with pytest.raises(ValueError, match="labels has 1 entries for 2 values"):
        downsample_indices([1.0, 2.0], labels=["PASS"])
