"""The stratified sample of trainer.attribute and its weights, on generated group codes (no model)."""

from __future__ import annotations

import numpy as np
import pytest

from trainer.attribute import cell_weights, stratified_sample


def _codes(n: int, seed: int = 0) -> tuple[np.ndarray, list[int]]:
    """Two attributes and their intersection, one group rare (2% of rows) and some rows unknown."""
    rng = np.random.default_rng(seed)
    a = rng.choice(3, size=n, p=[0.6, 0.3, 0.1])  # 2: unknown
    b = rng.choice(3, size=n, p=[0.78, 0.2, 0.02])
    known = (a < 2) & (b < 3)
    both = np.where(known, a * 3 + b, 6)
    return np.column_stack([a, b, both]), [2, 3, 6]


@pytest.mark.parametrize("size", [60, 400, 3000])
def test_every_group_is_represented_up_to_its_floor(size: int) -> None:
    codes, counts = _codes(5000)
    picked = stratified_sample(codes, counts, size, seed=1)
    assert picked.shape[0] == size
    assert np.array_equal(picked, np.unique(picked))
    groups = sum(counts)
    floor = max(30, size // (4 * groups))
    if floor * groups > size:
        floor = size // groups
    for column, count in enumerate(counts):
        for group in range(count):
            members = int((codes[:, column] == group).sum())
            assert int((codes[picked, column] == group).sum()) >= min(members, floor)


def test_the_same_seed_draws_the_same_rows_and_another_seed_others() -> None:
    codes, counts = _codes(5000)
    first = stratified_sample(codes, counts, 500, seed=4)
    assert np.array_equal(stratified_sample(codes, counts, 500, seed=4), first)
    assert not np.array_equal(stratified_sample(codes, counts, 500, seed=5), first)


def test_fewer_rows_than_the_sample_are_taken_whole() -> None:
    codes, counts = _codes(200)
    assert np.array_equal(stratified_sample(codes, counts, 500, seed=0), np.arange(200))


def test_a_sample_too_small_for_one_row_per_group_is_refused() -> None:
    codes, counts = _codes(500)
    with pytest.raises(ValueError, match="a sample of 10 rows cannot hold one row of each of the 11 groups"):
        stratified_sample(codes, counts, 10, seed=0)


def test_the_weights_give_every_group_its_validation_rows() -> None:
    codes, counts = _codes(20000, seed=2)
    picked = stratified_sample(codes, counts, 800, seed=3)
    weights = cell_weights(codes, picked)
    for column, count in enumerate(counts):
        for group in range(count + 1):  # the unknown rows too
            rows = codes[picked, column] == group
            assert weights[rows].sum() == pytest.approx(int((codes[:, column] == group).sum()))


def test_weighted_group_means_are_unbiased_although_small_groups_are_kept_whole() -> None:
    """Inside group 0 of the first attribute, the rows of the rare group of the second are over-sampled
    (its floor); a value that differs there is off in the plain mean, right in the weighted one."""
    codes, counts = _codes(20000, seed=2)
    value = np.where(codes[:, 1] == 2, 10.0, 0.0)
    truth = value[codes[:, 0] == 0].mean()
    plain, weighted = [], []
    for seed in range(40):
        picked = stratified_sample(codes, counts, 600, seed=seed)
        rows = codes[picked, 0] == 0
        weights = cell_weights(codes, picked)
        plain.append(value[picked][rows].mean())
        weighted.append(np.average(value[picked][rows], weights=weights[rows]))
    assert np.mean(weighted) == pytest.approx(truth, rel=0.1)
    assert np.mean(plain) > 2 * truth
