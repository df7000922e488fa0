"""Paired comparison of two models on the same rows (fairness/statistics/paired.py), held to
statsmodels' McNemar test and to seeded simulations (coverage, and the power of "rows needed")."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar

from auditportal.fairness.statistics import paired, stats


@pytest.mark.parametrize("exact", [True, False])
def test_mcnemar_p_values_match_statsmodels(exact: bool) -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        both, only_a, only_b, neither = (int(x) for x in rng.integers(0, 60, size=4))
        if only_a + only_b == 0:
            continue
        ours = float(paired.mcnemar_p(only_a, only_b, exact=exact))
        theirs = mcnemar([[both, only_a], [only_b, neither]], exact=exact, correction=True).pvalue
        assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12), (only_a, only_b)


def test_mcnemar_is_exact_in_small_cells_and_asymptotic_in_large_ones() -> None:
    small = float(paired.mcnemar_p(3, 12))
    assert small == pytest.approx(mcnemar([[0, 3], [12, 0]], exact=True).pvalue)
    large = float(paired.mcnemar_p(30, 52))
    assert large == pytest.approx(mcnemar([[0, 30], [52, 0]], exact=False, correction=True).pvalue)
    assert np.isnan(paired.mcnemar_p(0, 0))


def test_joint_cells_give_the_audits_confusion_counts_for_each_model() -> None:
    rng = np.random.default_rng(3)
    rows = 5000
    label = rng.integers(0, 2, rows)
    a = rng.integers(0, 2, rows)
    b = np.where(rng.random(rows) < 0.8, a, 1 - a)
    groups = rng.integers(0, 3, rows)
    cells = paired.joint_cells(label, a, b, groups, 3)
    counts_a, _ = stats.confusion_counts_from_cells(groups, stats.confusion_cells(label, a), 3)
    counts_b, _ = stats.confusion_counts_from_cells(groups, stats.confusion_cells(label, b), 3)
    for metric, (num, den) in {
        "tpr": ([0], [0, 1]),
        "fpr": ([2], [2, 3]),
        "fnr": ([1], [0, 1]),
        "selection_rate": ([0, 2], [0, 1, 2, 3]),
        "accuracy": ([0, 3], [0, 1, 2, 3]),
    }.items():
        table = paired.paired_table(cells, metric)
        np.testing.assert_array_equal(table.n, counts_a[:, den].sum(axis=1))
        np.testing.assert_array_equal(table.both + table.only_a, counts_a[:, num].sum(axis=1))
        np.testing.assert_array_equal(table.both + table.only_b, counts_b[:, num].sum(axis=1))


def test_newcombe_interval_holds_the_difference_and_covers_at_its_level() -> None:
    rng = np.random.default_rng(11)
    # True cell probabilities (n11, n10, n01, n00): correlated models, B better by 0.05.
    probabilities = np.array([0.55, 0.05, 0.10, 0.30])
    truth = probabilities[2] - probabilities[1]
    for n in (40, 400):
        draws = rng.multinomial(n, probabilities, size=4000)
        table = paired.PairedTable(draws[:, 0], draws[:, 1], draws[:, 2], draws[:, 3])
        low, high = paired.newcombe_interval(table, 0.05)
        difference = (draws[:, 2] - draws[:, 1]) / n
        assert np.all(low <= difference + 1e-12)
        assert np.all(difference <= high + 1e-12)
        coverage = np.mean((low <= truth) & (truth <= high))
        assert 0.93 <= coverage <= 0.985, (n, coverage)


def test_an_unpaired_interval_would_be_wider_on_correlated_models() -> None:
    table = paired.PairedTable(np.array([400]), np.array([10]), np.array([30]), np.array([560]))
    low, high = paired.newcombe_interval(table, 0.05)
    a_successes, b_successes, n = np.array([410]), np.array([430]), np.array([1000])
    _a_low, a_high = stats.wilson_interval(a_successes, n, 0.05)
    b_low, _b_high = stats.wilson_interval(b_successes, n, 0.05)
    unpaired_half = np.sqrt((0.43 - b_low) ** 2 + (a_high - 0.41) ** 2)
    assert (high - low)[0] < unpaired_half[0]
    assert low[0] > 0  # paired, B's gain of 0.02 is clear; unpaired it would not be


@pytest.mark.parametrize(
    ("probabilities", "tolerance", "target"),
    [
        # B better by 0.08 on TPR, beyond a tolerance of 0.02: towards BETTER.
        ((0.60, 0.06, 0.14, 0.20), 0.02, paired.BETTER),
        # Equal models that disagree on 10% of rows: towards EQUIVALENT within 0.05.
        ((0.60, 0.05, 0.05, 0.30), 0.05, paired.EQUIVALENT),
    ],
)
def test_rows_needed_reach_their_power_in_a_seeded_simulation(
    probabilities: tuple[float, ...], tolerance: float, target: str
) -> None:
    power, alpha = 0.8, 0.05
    p = np.array(probabilities)
    # A pilot at the true shares: the rows needed at the planning difference (here the true one).
    pilot = paired.PairedTable(*(np.array([round(x * 10_000)]) for x in p))
    needed, planned, _psi = paired.rows_needed(pilot, tolerance=tolerance, alpha=alpha, power=power)
    assert planned[0] == pytest.approx(p[2] - p[1])
    n = int(needed[0])
    assert 50 < n < 100_000
    rng = np.random.default_rng(2024)
    draws = rng.multinomial(n, p, size=4000)
    table = paired.PairedTable(draws[:, 0], draws[:, 1], draws[:, 2], draws[:, 3])
    low, high = paired.newcombe_interval(table, alpha)
    verdicts = paired.verdict_of(low, high, tolerance=tolerance, direction=1)
    realised = verdicts.count(target) / len(verdicts)
    assert abs(realised - power) <= 0.05, (n, realised)


def test_compare_judges_each_group_and_holds_the_family() -> None:
    # Group "x": the challenger finds many more positives; group "y": the same model.
    rng = np.random.default_rng(5)
    rows = 20_000
    groups = rng.integers(0, 2, rows)
    label = rng.integers(0, 2, rows)
    a = np.where(rng.random(rows) < 0.7, label, 1 - label)
    b = a.copy()
    gain = (groups == 0) & (label == 1) & (a == 0) & (rng.random(rows) < 0.8)
    b[gain] = 1
    cells = paired.joint_cells(label, a, b, groups, 2)
    result = paired.compare_groups(cells, ["x", "y"], tolerance=0.05, alpha=0.05, metrics=("tpr", "fnr", "fpr"))
    tpr = result["metrics"]["tpr"]["groups"]
    assert tpr["x"]["verdict"] == paired.BETTER
    assert tpr["y"]["verdict"] == paired.EQUIVALENT
    assert result["metrics"]["fnr"]["groups"]["x"]["verdict"] == paired.BETTER
    assert tpr["x"]["level"] == pytest.approx(1 - 0.05 / 2)
    assert result["verdicts"] == {"x": paired.BETTER, "y": paired.EQUIVALENT}
    assert result["verdict"] == paired.EQUIVALENT or result["verdict"] == paired.BETTER


def test_an_undecided_group_says_how_many_rows_would_decide_it() -> None:
    cells = np.zeros((1, 8), dtype=np.int64)
    # 60 positives: A and B disagree on 12 of them, B slightly ahead.
    cells[0, 4 + 3] = 30  # label 1, both positive
    cells[0, 4 + 2] = 4  # only A
    cells[0, 4 + 1] = 8  # only B
    cells[0, 4 + 0] = 18
    cells[0, 0] = 100
    result = paired.compare_groups(cells, ["g"], tolerance=0.05, alpha=0.05, metrics=("tpr",))
    row = result["metrics"]["tpr"]["groups"]["g"]
    assert row["verdict"] == paired.INCONCLUSIVE
    assert row["p_exact"] is True
    assert row["rows_needed"] > 60


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"tolerance": 1.5}, "tolerance"), ({"alpha": 0}, "alpha"), ({"metrics": ("ppv",)}, "metrics")],
)
def test_bad_levels_name_their_field(kwargs: dict[str, object], field: str) -> None:
    arguments: dict[str, object] = {"tolerance": 0.05, "alpha": 0.05, **kwargs}
    with pytest.raises(paired.PairedInputError) as caught:
        paired.compare_groups(np.zeros((1, 8), np.int64), ["g"], **arguments)  # type: ignore[arg-type]
    assert caught.value.field == field
