"""The searcher's fairness term, ``eod_beyond_noise``: each recall gap less its sampling noise.

It must agree with how the portal judges a gap (one definition, trainer/bias.py ``gap_beyond_noise``,
held here to ``stats.compare``'s noise floors on a grid of counts), stay within noise where small
groups make the raw ``eod`` large, see a real gap in large groups, and so rank a search's trials by
their true gap. All seeded; the whole file runs in a few seconds.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from auditportal.fairness.statistics import stats
from trainer import bias

GENDERS = ("female", "male")
RACES = ("a", "b", "c", "d", "e")  # c, d, e: a handful of positives in each intersection


def _judged_by_the_portal(tp: np.ndarray, positives: np.ndarray, alpha: float) -> np.ndarray:
    """For each case (rows of ``tp`` and ``positives``, one column per group), the largest
    ``|gap| - noise floor`` over every pair of groups, at least 0, as ``stats.compare`` gives them:
    each group with positives as the reference in turn, at its recall family's floor (alpha / k)."""
    counts = np.zeros((*tp.shape, 4), dtype=np.int64)
    counts[..., 0], counts[..., 1] = tp, positives - tp  # (tp, fn, fp, tn)
    best = np.zeros(tp.shape[0])
    for reference in range(tp.shape[1]):
        recall = stats.compare(counts, reference=reference, alpha=alpha, p_values=False)["tpr"]
        excess = np.where(recall.defined, np.abs(recall.difference) - recall.noise_floor, 0.0)
        best = np.maximum(best, excess.max(axis=-1))
    return best


def test_the_trainer_and_the_portal_agree_on_a_grid_of_counts() -> None:
    sizes = (0, 1, 2, 3, 4, 7, 30, 400)
    grid = [
        ((tp1, tp2), (n1, n2))
        for n1, n2 in itertools.product(sizes, repeat=2)
        for tp1, tp2 in itertools.product(sorted({0, n1 // 3, n1 // 2, n1}), sorted({0, n2 // 2, n2}))
    ]
    tp, positives = np.array([case[0] for case in grid]), np.array([case[1] for case in grid])
    for alpha in (0.05, 0.01):
        expected = _judged_by_the_portal(tp, positives, alpha)
        got = [bias.gap_beyond_noise(t, n, alpha=alpha) for t, n in zip(tp, positives, strict=True)]
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    # Up to ten groups (a group without positives is no part of the family: zeros pad the fewer).
    rng = np.random.default_rng(32)
    positives = rng.choice(np.array(sizes), size=(300, 10)) * (rng.random((300, 10)) < rng.uniform(0.2, 1, (300, 1)))
    tp = rng.binomial(positives, rng.uniform(0, 1, size=(300, 10)))
    got = [bias.gap_beyond_noise(t, n) for t, n in zip(tp, positives, strict=True)]
    np.testing.assert_allclose(got, _judged_by_the_portal(tp, positives, stats.DEFAULT_ALPHA), rtol=0, atol=1e-12)
    assert len(grid) > 300
    assert (np.asarray(got) > 0).sum() > 50
    assert (np.asarray(got) == 0).sum() > 50
    assert bias.NOISE_ALPHA == stats.DEFAULT_ALPHA


def test_the_gap_beyond_noise_is_the_gap_less_the_pairs_plus_four_floor() -> None:
    # 300 of 400 against 200 of 400: gap 0.25; pooled plus-four p = 502/804; one comparison, z = 1.96.
    pooled = 502 / 804
    floor = 1.959963984540054 * np.sqrt(pooled * (1 - pooled) * (2 / 400))
    assert bias.gap_beyond_noise([300, 200], [400, 400]) == pytest.approx(0.25 - floor)
    # Rates of 0 and 1 still have a floor (plus four): 0 of 1 against 1 of 1 is noise, and of the
    # gap of 1 between 0 of 2 and 2 of 2 only 0.02 is beyond it.
    assert bias.gap_beyond_noise([0, 1], [1, 1]) == 0.0
    assert bias.gap_beyond_noise([0, 2], [2, 2]) == pytest.approx(1 - 1.959963984540054 * 0.5)
    # Fewer than two groups with positives: no gap.
    assert bias.gap_beyond_noise([3, 0], [5, 0]) == 0.0
    assert bias.gap_beyond_noise([], []) == 0.0


def _layout() -> bias.GroupLayout:
    return bias.GroupLayout.from_declared([("gender", GENDERS), ("race", RACES)])


def _validation(recall: dict[str, float], positives: dict[str, int], seed: int) -> dict[str, float]:
    """A validation's metrics, through the trainer's accumulator, on rows drawn with the given true
    recall per gender and ``positives[race]`` positives in each gender-and-race group (as many
    negatives, with a false-positive rate of 0.2)."""
    rng = np.random.default_rng(seed)
    layout = _layout()
    gender_attr, race_attr = layout.attributes[0], layout.attributes[1]
    codes, labels, probs = [], [], []
    for g, gender in enumerate(GENDERS):
        for r, race in enumerate(RACES):
            n = positives[race]
            hit = rng.random(n) < recall[gender]
            false_positive = rng.random(n) < 0.2
            labels += [1.0] * n + [0.0] * n
            probs += list(np.where(hit, 0.9, 0.1)) + list(np.where(false_positive, 0.9, 0.1))
            codes += [(g, r)] * (2 * n)
    pair = np.array(codes, dtype=np.int64)
    inter = bias.intersection_codes(pair[:, 0], pair[:, 1], gender_attr, race_attr)
    acc = bias.ConfusionAccumulator(layout)
    acc.update(
        torch.from_numpy(np.column_stack([pair, inter])),
        torch.tensor(labels),
        torch.tensor(probs, dtype=torch.float32),
        torch.tensor(0.5 * len(labels), dtype=torch.float64),
    )
    return acc.metrics([acc.state()], search_lambda=1.0)


SMALL = {"a": 1500, "b": 1500, "c": 2, "d": 3, "e": 4}  # under 5 positives in 6 intersection groups


@pytest.mark.parametrize("seed", range(5))
def test_no_true_gap_with_tiny_intersection_groups_the_term_stays_within_noise(seed: int) -> None:
    got = _validation({"female": 0.7, "male": 0.7}, SMALL, seed)
    assert min(got[f"count/gender&race/{g}&{r}/tp"] + got[f"count/gender&race/{g}&{r}/fn"]
               for g in GENDERS for r in ("c", "d", "e")) < 5  # fmt: skip
    assert got["eod"] >= 0.3  # the tiny groups' noise
    assert got["eod/gender"] < 0.05
    assert got["eod_beyond_noise"] <= 0.02
    assert got["fair_objective"] == pytest.approx(got["val_loss"] + got["eod_beyond_noise"])


@pytest.mark.parametrize("seed", range(5))
def test_a_true_gap_of_0_2_in_large_groups_is_seen_less_its_noise(seed: int) -> None:
    got = _validation({"female": 0.6, "male": 0.8}, SMALL, seed)
    # 3009 positives per gender: the floor at 95% is about 0.023, the gap's own sd about 0.011.
    assert got["eod_beyond_noise"] == got["eod_beyond_noise/gender"]
    assert 0.2 - 0.023 - 0.04 < got["eod_beyond_noise"] < 0.2
    assert got["eod_beyond_noise"] < got["eod/gender"]


def test_a_seeded_search_ranks_trials_by_their_true_gap_not_by_noise() -> None:
    """Eight trials of a search, alike but for their true recall gap between genders (the one a
    model's hyperparameters would change), each validated on data whose small intersection groups
    are noisy. The objective orders them by the true gap; raw eod by noise."""
    true_gaps = np.array([0.25, 0.0, 0.15, 0.3, 0.05, 0.2, 0.1, 0.35])
    results = [
        _validation({"female": 0.75 - gap, "male": 0.75}, SMALL, seed=100 + i) for i, gap in enumerate(true_gaps)
    ]
    objective = np.array([r["fair_objective"] for r in results])
    eod = np.array([r["eod"] for r in results])

    def rank_correlation(values: np.ndarray) -> float:
        return float(np.corrcoef(np.argsort(np.argsort(values)), np.argsort(np.argsort(true_gaps)))[0, 1])

    # The searcher's choice (the lowest objective) is the trial without a gap, and its order is the true one.
    assert true_gaps[np.argmin(objective)] == 0.0
    assert list(np.argsort(objective)) == list(np.argsort(true_gaps))
    assert rank_correlation(objective) == 1.0
    # Raw eod is the small groups' noise: it barely follows the true gap, and calls even the trial
    # without a gap more unfair than any trial truly is.
    assert rank_correlation(eod) < 0.6
    assert eod.min() >= 0.5
    assert eod[true_gaps == 0.0][0] > true_gaps.max()
