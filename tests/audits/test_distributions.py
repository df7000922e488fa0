"""The statistics' own normal quantile, beta quantile, score test, Wilson and Clopper-Pearson intervals
and Fisher test against scipy, statsmodels and exact arithmetic, and a published table."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import special as scipy_special  # type: ignore[import-untyped]
from scipy import stats as scipy_stats  # type: ignore[import-untyped]
from statsmodels.stats import proportion as sm_proportion

from auditportal.fairness.statistics import stats
from auditportal.fairness.statistics.distributions import (
    beta_quantile,
    fisher_exact_p,
    normal_quantile,
    normal_two_sided_p,
)

ORACLE = 1e-12


def _counts(*rows: tuple[int, int, int, int]) -> stats.Counts:
    return np.array(rows, dtype=np.int64)


# --------------------------------------------------------------------------- the normal distribution


def test_the_normal_quantile_equals_scipys_ndtri_from_the_centre_to_the_far_tails() -> None:
    rng = np.random.default_rng(1)
    p = np.concatenate(
        [rng.random(20_000), 10.0 ** -rng.uniform(0, 300, 20_000), 1 - 10.0 ** -rng.uniform(1, 15, 1_000)]
    )
    p = np.concatenate([p, [0.5, 0.025, 0.975, 1e-300, 5e-324, 0.05 / 2 / 49, 0.2]])
    np.testing.assert_allclose(normal_quantile(p), scipy_special.ndtri(p), rtol=ORACLE, atol=ORACLE)


def test_the_normal_quantile_keeps_the_shape_and_is_infinite_at_0_and_1_and_nan_outside() -> None:
    levels = np.array([[0.0, 1.0, 0.5], [-0.1, 1.5, np.nan]])
    result = normal_quantile(levels)
    assert result.shape == (2, 3)
    np.testing.assert_array_equal(result, scipy_special.ndtri(levels))
    assert normal_quantile(0.025).shape == ()
    assert float(normal_quantile(0.025)) == pytest.approx(-1.959963984540054, abs=ORACLE)


def test_the_two_sided_normal_p_value_equals_twice_scipys_survival_function() -> None:
    rng = np.random.default_rng(2)
    z = np.concatenate([rng.normal(0, 3, 20_000), rng.uniform(-38, 38, 2_000), [0.0, -0.0, 1e-300, np.inf, -np.inf]])
    ours = normal_two_sided_p(z)
    theirs = 2 * scipy_stats.norm.sf(np.abs(z))
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=ORACLE)
    assert math.isnan(float(normal_two_sided_p(np.array([np.nan]))[0]))


# --------------------------------------------------------------------------- the beta distribution

BETA_ORACLE = 1e-10
TRIALS = (1, 2, 3, 5, 10, 20, 50, 100, 1_000, 100_000)
LEVELS = (0.5, 0.05, 0.05 / 40, 1e-9)


def _clopper_pearson_cells() -> list[tuple[int, int]]:
    """Every count of small n; x = 0, 1, 2, 3, 9, n/2 and their mirror images of larger n."""
    cells = []
    for n in TRIALS:
        counts = range(n + 1) if n <= 20 else sorted({0, 1, 2, 3, 9, n // 2, n - 9, n - 3, n - 2, n - 1, n})
        cells += [(x, n) for x in counts]
    return cells


def test_the_beta_quantile_equals_scipys_at_every_clopper_pearson_bound() -> None:
    checked = 0
    for x, n in _clopper_pearson_cells():
        for alpha in LEVELS:
            if x > 0:  # the lower bound's quantile
                ours, theirs = beta_quantile(alpha / 2, x, n - x + 1), scipy_stats.beta.ppf(alpha / 2, x, n - x + 1)
                assert ours == pytest.approx(theirs, rel=BETA_ORACLE, abs=1e-300), (x, n, alpha)
                checked += 1
            if x < n:  # the upper bound's, by its upper tail, and by the lower tail at 1 - alpha/2
                upper = beta_quantile(alpha / 2, x + 1, n - x, upper=True)
                assert upper == pytest.approx(scipy_stats.beta.isf(alpha / 2, x + 1, n - x), rel=BETA_ORACLE)
                lower_tail = beta_quantile(1 - alpha / 2, x + 1, n - x)
                assert lower_tail == pytest.approx(scipy_stats.beta.ppf(1 - alpha / 2, x + 1, n - x), rel=BETA_ORACLE)
                checked += 2
    assert checked > 900


def test_the_beta_quantile_equals_scipys_for_any_shapes() -> None:
    rng = np.random.default_rng(6)
    for _ in range(1_500):
        a, b = 10.0 ** rng.uniform(-1, 4, size=2)
        p = float(rng.choice([rng.random(), 10.0 ** -rng.uniform(0, 12)]))
        for upper, theirs in ((False, scipy_stats.beta.ppf(p, a, b)), (True, scipy_stats.beta.isf(p, a, b))):
            ours = beta_quantile(p, a, b, upper=upper)
            assert ours == pytest.approx(theirs, rel=BETA_ORACLE, abs=1e-290), (p, a, b, upper)


def test_the_beta_quantile_is_exact_where_one_shape_is_in_the_millions() -> None:
    """The upper bound of 3 successes in ten million: the tail there, P(Bin(10**7, x) <= 3), is summed
    in 40-digit decimal arithmetic at our quantile and at scipy's; ours gives 0.025 to 1e-14, scipy's
    (the continued fraction next to the mean) is off by about 1e-10."""
    from decimal import Decimal, localcontext

    n, x = 10_000_000, 3

    def tail(bound: float) -> float:
        with localcontext() as context:
            context.prec = 40
            p = Decimal(bound)
            return float(sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(x + 1)))

    ours = beta_quantile(0.025, x + 1, n - x, upper=True)
    assert tail(ours) == pytest.approx(0.025, rel=1e-13)
    assert ours == pytest.approx(scipy_stats.beta.isf(0.025, x + 1, n - x), rel=1e-9)


def test_the_beta_quantile_at_the_ends_and_outside() -> None:
    assert beta_quantile(0.0, 2, 3) == 0.0
    assert beta_quantile(1.0, 2, 3) == 1.0
    assert beta_quantile(0.0, 2, 3, upper=True) == 1.0
    assert beta_quantile(1.0, 2, 3, upper=True) == 0.0
    for p, a, b in ((-0.1, 2, 3), (1.5, 2, 3), (0.5, 0, 3), (0.5, 2, -1), (math.nan, 2, 3)):
        assert math.isnan(beta_quantile(p, a, b))
    # Closed forms: a = 1 or b = 1.
    assert beta_quantile(0.3, 1, 4) == pytest.approx(1 - 0.7**0.25, rel=1e-15)
    assert beta_quantile(0.3, 4, 1) == pytest.approx(0.3**0.25, rel=1e-15)


@pytest.mark.parametrize("alpha", [0.05, 0.05 / 2 / 49, 0.5, 1e-9])
def test_clopper_pearson_intervals_equal_statsmodels_beta_method_including_x_0_x_n_and_n_1(alpha: float) -> None:
    x, n = (np.array(values, np.int64) for values in zip(*_clopper_pearson_cells(), strict=True))
    low, high = stats.clopper_pearson_interval(x, n, alpha)
    their_low, their_high = sm_proportion.proportion_confint(x, n, alpha=alpha, method="beta")
    np.testing.assert_allclose(low, their_low, rtol=BETA_ORACLE, atol=1e-300)
    np.testing.assert_allclose(high, their_high, rtol=BETA_ORACLE, atol=1e-300)
    assert (low[x == 0] == 0).all()
    assert (high[x == n] == 1).all()
    none_low, none_high = stats.clopper_pearson_interval(np.array([0]), np.array([0]), alpha)
    assert math.isnan(none_low[0])
    assert math.isnan(none_high[0])


def test_a_proportion_takes_clopper_pearson_in_a_small_cell_and_wilson_elsewhere() -> None:
    trials = np.array([2, 5, 40, 40, 40, 1_000, 1_000, 1_000, 1_000])
    successes = np.array([1, 5, 3, 20, 37, 500, 14, 90, 990])
    for alpha in (0.05, 0.05 / 20):
        threshold = stats.EXACT_FACTOR * float(normal_quantile(1 - alpha / 2)) ** 4
        small = (np.minimum(successes, trials - successes) < threshold) & (trials > 0)
        assert small.any()
        assert not small.all()
        np.testing.assert_array_equal(stats.small_cell(successes, trials, alpha), small)
        low, high = stats.proportion_interval(successes, trials, alpha)
        exact = sm_proportion.proportion_confint(successes, trials, alpha=alpha, method="beta")
        wilson = sm_proportion.proportion_confint(successes, trials, alpha=alpha, method="wilson")
        for ours, (exact_bound, wilson_bound) in zip((low, high), zip(exact, wilson, strict=True), strict=True):
            np.testing.assert_allclose(ours, np.where(small, exact_bound, wilson_bound), rtol=BETA_ORACLE)


# --------------------------------------------------------------------------- Wilson and the score test


def _wilson_inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    trials = np.concatenate(
        [rng.integers(1, 30, 2_000), rng.integers(1, 10**6, 2_000), rng.integers(10**8, 10**10, 200), [1, 1, 2]]
    )
    successes = np.floor(rng.random(len(trials)) * (trials + 1)).astype(np.int64)
    # Edge cases: no successes, all successes, n = 1.
    successes[:300] = 0
    successes[300:600] = trials[300:600]
    successes[-3:] = [0, 1, 1]
    return successes, trials


@pytest.mark.parametrize("alpha", [0.05, 0.05 / 2 / 49, 0.5, 1e-9])
def test_wilson_intervals_equal_statsmodels_for_any_counts_and_level(alpha: float) -> None:
    successes, trials = _wilson_inputs()
    low, high = stats.wilson_interval(successes, trials, alpha)
    their_low, their_high = sm_proportion.proportion_confint(successes, trials, alpha=alpha, method="wilson")
    np.testing.assert_allclose(low, their_low, rtol=ORACLE, atol=ORACLE)
    np.testing.assert_allclose(high, their_high, rtol=ORACLE, atol=ORACLE)


def test_wilson_intervals_take_one_level_per_batch_like_statsmodels() -> None:
    rng = np.random.default_rng(4)
    trials = rng.integers(1, 500, size=(50, 6))
    successes = np.floor(rng.random((50, 6)) * (trials + 1)).astype(np.int64)
    alpha = 0.05 / rng.integers(1, 6, size=(50, 1))
    low, high = stats.wilson_interval(successes, trials, alpha)
    their_low, their_high = sm_proportion.proportion_confint(successes, trials, alpha=alpha, method="wilson")
    np.testing.assert_allclose(low, their_low, rtol=ORACLE, atol=ORACLE)
    np.testing.assert_allclose(high, their_high, rtol=ORACLE, atol=ORACLE)


def test_the_wilson_interval_of_no_trials_is_undefined() -> None:
    low, high = stats.wilson_interval(np.array([0, 3]), np.array([0, 3]), 0.05)
    assert math.isnan(low[0])
    assert math.isnan(high[0])
    assert high[1] == 1.0


def test_score_test_p_values_equal_statsmodels_from_small_to_huge_groups() -> None:
    rng = np.random.default_rng(5)
    rows = []
    for high in (30, 3_000, 10**6, 10**9):
        trials = rng.integers(10, high + 10, size=(500, 2))
        successes = (rng.random((500, 2)) * (trials - 9)).astype(np.int64) + 5
        rows.append(np.column_stack([successes[:, 0], trials[:, 0], successes[:, 1], trials[:, 1]]))
    counts = np.concatenate([*rows, np.array([[5, 10, 5, 10], [5, 10, 995, 1000], [40, 50, 300, 400]])])
    x1, n1, x2, n2 = counts.T
    ours = stats._score_test(x1, n1, x2, n2)
    theirs = sm_proportion.test_proportions_2indep(x1, n1, x2, n2, method="score", compare="diff", correction=False)
    np.testing.assert_allclose(ours, theirs.pvalue, rtol=ORACLE, atol=ORACLE)


# --------------------------------------------------------------------------- Fisher's exact test


def _fisher_exact_rational(a: int, b: int, c: int, d: int) -> float:
    """The definition, in exact arithmetic: P of all tables with these margins no more probable."""
    row1, row2, column1 = a + b, c + d, a + c
    low, high = max(0, column1 - row2), min(row1, column1)
    # C(row1, x) C(row2, column1 - x) for every x, each from the one before (the division is exact).
    weights = [math.comb(row1, low) * math.comb(row2, column1 - low)]
    for x in range(low, high):
        weights.append(weights[-1] * (row1 - x) * (column1 - x) // ((x + 1) * (row2 - column1 + x + 1)))
    observed = weights[a - low]
    return float(Fraction(sum(w for w in weights if w <= observed), sum(weights)))


def _tables(count: int, scale: int, seed: int) -> list[tuple[int, int, int, int]]:
    rng = np.random.default_rng(seed)
    tables = []
    for _ in range(count):
        cells = [int(v) for v in rng.integers(0, scale + 1, size=4)]
        cells[int(rng.integers(0, 4))] = int(rng.integers(0, 5))  # the statistics use it for a cell below 5
        tables.append((cells[0], cells[1], cells[2], cells[3]))
    return tables


EDGE_TABLES = [
    (0, 0, 0, 0),
    (0, 5, 0, 7),  # no successes at all
    (3, 0, 4, 0),  # all successes
    (1, 0, 0, 1),
    (0, 1, 1, 0),
    (5, 5, 5, 5),  # the observed table is the most probable
    (2, 10, 10, 2),
    (3, 997, 997, 3),  # equal rows: every table ties with its mirror image
    (2, 8, 5, 5),
    (4, 1_000, 500, 500),
    (0, 20, 3, 17),
]


@pytest.mark.parametrize(("scale", "seed"), [(6, 10), (40, 11), (400, 12), (3_000, 13)])
def test_fishers_exact_test_equals_exact_rational_arithmetic(scale: int, seed: int) -> None:
    for table in [*EDGE_TABLES, *_tables(150, scale, seed)]:
        assert fisher_exact_p(*table) == pytest.approx(_fisher_exact_rational(*table), rel=ORACLE, abs=1e-300), table


@pytest.mark.parametrize(("scale", "seed"), [(6, 20), (60, 21), (3_000, 22), (10**6, 23)])
def test_fishers_exact_test_equals_scipy(scale: int, seed: int) -> None:
    for a, b, c, d in [*EDGE_TABLES, *_tables(300, scale, seed)]:
        theirs = scipy_stats.fisher_exact([[a, b], [c, d]]).pvalue
        assert fisher_exact_p(a, b, c, d) == pytest.approx(theirs, rel=1e-9, abs=ORACLE), (a, b, c, d)


def test_fishers_exact_test_on_millions_of_rows_is_exact_where_scipy_rounds() -> None:
    # 3 successes among 20 million nearly balanced rows: about 1/8 + 1/8. scipy gives 0.2499999620936,
    # 4e-10 off; the exact value is 0.24999996250002063.
    assert fisher_exact_p(0, 10_000_000, 3, 10_000_000) == pytest.approx(0.24999996250002063, rel=1e-14)
    assert fisher_exact_p(3, 1_000_000, 500_000, 4_500_000) == 0.0  # far below the smallest float
    with pytest.raises(ValueError, match="a contingency table holds counts"):
        fisher_exact_p(-1, 2, 3, 4)


# --------------------------------------------------------------------------- a published table


def test_intervals_match_newcombes_published_examples() -> None:
    """Newcombe, Statistics in Medicine 17 (1998): Wilson intervals (857-872, Table I, method 3) and
    hybrid score intervals for a difference (873-890, Table II, method 10), 95 %, 4 decimals: MOVER
    from the two Wilson intervals. The audits build the same MOVER interval from Clopper-Pearson
    bounds where a cell is small (every one of these examples has a proportion with fewer than 15
    successes or failures), so compare() gives the wider intervals checked at the end."""
    for (x, n), expected in (
        ((81, 263), (0.2553, 0.3662)),
        ((15, 148), (0.0624, 0.1605)),
        ((0, 20), (0.0000, 0.1611)),
        ((1, 29), (0.0061, 0.1718)),
    ):
        low, high = stats.wilson_interval(np.array([x]), np.array([n]), 0.05)
        assert (round(float(low[0]), 4), round(float(high[0]), 4)) == expected
    for (x1, n1, x2, n2), expected in (
        ((56, 70, 48, 80), (0.0524, 0.3339)),
        ((9, 10, 3, 10), (0.1705, 0.8090)),
        ((0, 10, 0, 20), (-0.1611, 0.2775)),
        ((0, 10, 0, 10), (-0.2775, 0.2775)),
        ((10, 10, 0, 20), (0.6791, 1.0000)),
        ((10, 10, 0, 10), (0.6075, 1.0000)),
    ):
        successes, trials = np.array([x1, x2]), np.array([n1, n2])
        low, high = stats.wilson_interval(successes, trials, 0.05)
        p = successes / trials
        wilson = stats.mover_difference(p[0], low[0], high[0], p[1], low[1], high[1])
        assert (round(float(wilson[0]), 4), round(float(wilson[1]), 4)) == expected
        # The TPR of the first group against the second (two groups: one comparison, no Bonferroni).
        tpr = stats.compare(_counts((x1, n1 - x1, 1, 1), (x2, n2 - x2, 1, 1)), reference=1)["tpr"]
        exact_low, exact_high = (
            np.where(stats.small_cell(successes, trials, 0.05), exact, score)
            for exact, score in zip(
                sm_proportion.proportion_confint(successes, trials, alpha=0.05, method="beta"),
                (low, high),
                strict=True,
            )
        )
        hybrid = stats.mover_difference(p[0], exact_low[0], exact_high[0], p[1], exact_low[1], exact_high[1])
        assert tpr.ci_low[0] == pytest.approx(hybrid[0], abs=1e-12)
        assert tpr.ci_high[0] == pytest.approx(hybrid[1], abs=1e-12)
        assert tpr.ci_low[0] <= wilson[0] + 1e-12
        assert tpr.ci_high[0] >= wilson[1] - 1e-12
