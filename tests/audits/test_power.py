"""positives_needed: the sample size at which an INCONCLUSIVE comparison would be decided.

Held to statsmodels' power functions at the recommended sizes (with the actual size ratio of the
reference to the group), and to the realised power of the portal's own verdicts by simulation.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from statsmodels.stats.power import NormalIndPower

from auditportal.fairness.statistics import judge, stats
from auditportal.fairness.statistics.distributions import normal_quantile
from auditportal.fairness.text import presentation

POWER = stats.DEFAULT_POWER
TOLERANCE = stats.DEFAULT_TOLERANCE


def _counts(*rows: tuple[int, int, int, int]) -> stats.Counts:
    return np.array(rows, dtype=np.int64)


def _planned_rates(successes: tuple[int, int], trials: tuple[int, int], planned: float) -> tuple[float, float]:
    """The rates the plan assumes: the reference's (Agresti-Caffo shrunk) and that plus the planning gap."""
    reference = (successes[0] + 1) / (trials[0] + 2)
    return reference, min(max(reference + planned, 0.0), 1.0)


def _statsmodels_power(*, nobs: float, ratio: float, planned: float, rates: tuple[float, float], alpha: float) -> float:
    """statsmodels' NormalIndPower with unequal variances: only effect * sqrt(nobs / (1 + 1/ratio)),
    which must be (|d| - delta) / se, enters its power, so the effect is standardised accordingly.
    Towards PASS, the power of the two one-sided tests (each at alpha/2) that both bounds need."""
    p_reference, p_group = rates
    spread = math.sqrt(p_group * (1 - p_group) + p_reference * (1 - p_reference) / ratio)
    scale = math.sqrt(1 + 1 / ratio) / spread
    one_sided = NormalIndPower()

    def power(distance: float) -> float:
        return float(
            one_sided.power(
                effect_size=distance * scale, nobs1=nobs, alpha=alpha / 2, ratio=ratio, alternative="larger"
            )
        )

    if abs(planned) > TOLERANCE:
        return power(abs(planned) - TOLERANCE)
    return power(TOLERANCE - abs(planned)) + power(TOLERANCE + abs(planned)) - 1


# (reference cells, group cells, metric): INCONCLUSIVE comparisons towards FAIL and towards PASS
CASES = [
    ((4_000, 1_000, 500, 4_500), (6, 3, 1, 10), "tpr"),  # 0.67 vs 0.80 from 9 positives: towards FAIL
    ((4_000, 1_000, 500, 4_500), (70, 30, 50, 450), "tpr"),  # -0.10, ratio 50: towards FAIL
    ((400, 100, 50, 450), (70, 30, 50, 450), "tpr"),  # the same gap, ratio 5
    ((4_000, 1_000, 500, 4_500), (40, 10, 5, 45), "tpr"),  # no gap in 50 positives: towards PASS
    ((4_000, 1_000, 500, 4_500), (39, 11, 5, 45), "tpr"),  # -0.02: towards PASS, both bounds
    ((40, 10, 5, 45), (4_000, 1_000, 500, 4_500), "tpr"),  # the small group as the reference
    ((4_000, 1_000, 500, 4_500), (30, 10, 3, 37), "selection_rate"),  # rows: -0.07
    ((4_000, 1_000, 500, 4_500), (420, 80, 50, 450), "tpr"),  # +0.04 planned at +0.025
    ((16_000, 4_000, 500, 4_500), (2_996, 1_004, 100, 900), "selection_rate"),  # -0.041 planned as observed
]


@pytest.mark.parametrize(("reference", "group", "metric"), CASES)
def test_the_recommended_size_has_the_power_statsmodels_gives_at_the_groups_size_ratio(
    reference: tuple[int, int, int, int], group: tuple[int, int, int, int], metric: str
) -> None:
    counts = _counts(reference, group)
    comparison = stats.compare(counts, reference=0)[metric]
    assert stats.VERDICTS[comparison.verdict[1]] == "INCONCLUSIVE"
    successes, trials = stats.rate_parts(counts)[metric]
    ratio = trials[0] / trials[1]
    planned = float(comparison.planning_difference[1])
    rates = _planned_rates((int(successes[0]), int(successes[1])), (int(trials[0]), int(trials[1])), planned)
    alpha = 1 - float(comparison.level[1])  # the family's level, read from the comparison
    n_needed = float(comparison.n_needed[1])
    assert n_needed > trials[1]

    def power(nobs: float) -> float:
        return _statsmodels_power(nobs=nobs, ratio=ratio, planned=planned, rates=rates, alpha=alpha)

    # The smallest whole group size (the reference grown at the same ratio) with the power.
    assert power(n_needed) >= POWER
    assert power(n_needed - 1) < POWER
    expected_towards = "FAIL" if abs(float(comparison.difference[1])) > TOLERANCE else "PASS"
    assert stats.VERDICTS[comparison.needed_towards[1]] == expected_towards
    # The group's label positives grow with it, at its own mix.
    positives = counts[1, 0] + counts[1, 1]
    assert comparison.positives_needed[1] == math.ceil(n_needed / trials[1] * positives - 1e-9)


def test_towards_fail_the_size_is_statsmodels_solve_power_with_the_ratio() -> None:
    counts = _counts((4_000, 1_000, 500, 4_500), (6, 3, 1, 10))
    tpr = stats.compare(counts, reference=0)["tpr"]
    rates = _planned_rates((4_000, 6), (5_000, 9), float(tpr.planning_difference[1]))
    ratio = 5_000 / 9
    spread = math.sqrt(rates[1] * (1 - rates[1]) + rates[0] * (1 - rates[0]) / ratio)
    effect = (abs(6 / 9 - 0.8) - TOLERANCE) * math.sqrt(1 + 1 / ratio) / spread
    nobs = NormalIndPower().solve_power(
        effect_size=effect, alpha=0.05 / 2, power=POWER, ratio=ratio, alternative="larger"
    )
    assert tpr.n_needed[1] == math.ceil(nobs)


def test_towards_pass_at_no_gap_the_size_needs_z_at_one_minus_beta_over_two() -> None:
    # Both bounds must clear delta: at d = 0 each one-sided test needs power 1 - beta/2 (0.90, not
    # the 0.60 that z at 1 - beta gives).
    counts = _counts((4_000, 1_000, 500, 4_500), (40, 10, 5, 45))
    tpr = stats.compare(counts, reference=0)["tpr"]
    assert tpr.planning_difference[1] == 0
    rate = 4_001 / 5_002
    z = float(normal_quantile(1 - 0.05 / 2)) + float(normal_quantile(1 - (1 - POWER) / 2))
    variance = rate * (1 - rate) * (1 / 50 + 1 / 5_000)
    assert tpr.n_needed[1] == math.ceil(50 * variance * z**2 / TOLERANCE**2)
    rates = (rate, rate)
    at_size = _statsmodels_power(nobs=tpr.n_needed[1], ratio=100, planned=0.0, rates=rates, alpha=0.05)
    assert at_size == pytest.approx(POWER, abs=0.002)


def test_a_larger_family_plans_at_its_own_bonferroni_level() -> None:
    one = stats.compare(_counts((4_000, 1_000, 500, 4_500), (70, 30, 50, 450)), reference=0)["tpr"]
    three = stats.compare(
        _counts((4_000, 1_000, 500, 4_500), (70, 30, 50, 450), (70, 30, 50, 450), (70, 30, 50, 450)), reference=0
    )["tpr"]
    assert three.level[1] == pytest.approx(1 - 0.05 / 3)
    assert three.n_needed[1] > one.n_needed[1]


def test_equalized_odds_towards_pass_needs_both_components_with_the_joint_power() -> None:
    counts = _counts((4_000, 1_000, 500, 4_500), (40, 10, 5, 45))
    result = stats.compare(counts, reference=0)
    eo = result["equalized_odds"]
    assert stats.VERDICTS[eo.needed_towards[1]] == "PASS"
    scale = eo.positives_needed[1] / 50
    alpha = 1 - float(eo.level[1])  # each component at half of it
    joint = 1.0
    for successes, trials in (((4_000, 40), (5_000, 50)), ((500, 5), (5_000, 50))):
        planned = successes[1] / trials[1] - successes[0] / trials[0]
        joint *= _statsmodels_power(
            nobs=scale * trials[1],
            ratio=trials[0] / trials[1],
            planned=planned,
            rates=_planned_rates(successes, trials, planned),
            alpha=alpha / 2,
        )
    assert joint >= POWER
    assert joint < POWER + 0.01
    assert eo.positives_needed[1] > result["tpr"].positives_needed[1]  # more than either component alone


def test_the_planning_gap_is_the_observed_one_kept_half_a_tolerance_from_it() -> None:
    gaps = np.array([0.0, 0.01, -0.049, 0.05, 0.0501, -0.06, 0.2])
    np.testing.assert_allclose(
        stats.planning_difference(gaps, 0.05), [0.0, 0.01, -0.025, 0.025, 0.075, -0.075, 0.2], atol=1e-15
    )


def test_a_gap_next_to_the_tolerance_gets_a_sensible_number_not_millions() -> None:
    # Planned at the observed gap (0.001 beyond delta), equal group sizes, this was 2,733,400.
    counts = _counts((40_000, 10_000, 5_000, 45_000), (749, 251, 500, 4_500))  # 0.749 vs 0.80
    tpr = stats.compare(counts, reference=0)["tpr"]
    assert stats.VERDICTS[tpr.verdict[1]] == "INCONCLUSIVE"
    assert tpr.planning_difference[1] == pytest.approx(-0.075)
    assert tpr.positives_needed[1] == 2_545


def test_a_gap_near_the_tolerance_on_data_that_already_decides_the_margin_is_planned_as_observed() -> None:
    # Selection rate 0.619 on 5,000 rows against 0.660 on 25,000: -0.041, inside delta but its interval
    # crosses -0.05. The data at hand already decides a gap of 0.025, so the plan is the gap itself.
    counts = _counts((16_000, 4_000, 500, 4_500), (2_996, 1_004, 100, 900))
    selection = stats.compare(counts, reference=0)["selection_rate"]
    assert stats.VERDICTS[selection.verdict[1]] == "INCONCLUSIVE"
    assert selection.planning_difference[1] == pytest.approx(selection.difference[1])
    assert stats.VERDICTS[selection.needed_towards[1]] == "PASS"
    assert 5_000 < selection.n_needed[1] <= 100 * 5_000


def test_a_gap_next_to_the_tolerance_that_the_data_would_already_decide_is_not_decidable() -> None:
    # 4,000 positives decide a gap of 0.075 with power above 0.8, yet the interval straddles -0.05;
    # at the observed 0.001 beyond delta it would take some 380 times the data: no size is a plan.
    counts = _counts((80_000, 20_000, 5_000, 45_000), (2_996, 1_004, 500, 4_500))  # 0.749 vs 0.80
    document = judge.judge_attribute(counts, ["a", "b"], unknown=0)
    tpr = next(c for c in document["comparisons"] if c["metric"] == "tpr")
    assert tpr["verdict"] == "INCONCLUSIVE"
    assert tpr["positives_needed"] is None
    assert tpr["n_needed"] is None
    assert tpr["needed_decidable"] is False
    assert tpr["planning_difference"] == pytest.approx(-0.075)
    assert tpr["needed_reason"] == (
        "not decidable at this gap: the data at hand would already decide a gap of -0.075 with power 0.8, "
        "and the observed gap would take more than 100 times the data"
    )


def test_more_than_the_cap_is_not_decidable_at_this_gap_in_the_document_page_row_and_table() -> None:
    # A 12-positive reference against 600,000 positives: growing both at that ratio, the reference
    # stays the bottleneck until the group would need some 10^7 positives.
    counts = _counts((10, 2, 5, 45), (500_000, 100_000, 50_000, 450_000))
    comparison = stats.compare(counts, reference=0)["tpr"]
    assert comparison.needed_reason[1] == stats.NEEDED_OVER_CAP
    assert math.isnan(comparison.positives_needed[1])
    assert math.isnan(comparison.n_needed[1])

    document = {"attributes": {"g": judge.judge_attribute(counts, ["small", "large"], unknown=0, reference=0)}}
    json.dumps(document, allow_nan=False)
    tpr = next(c for c in document["attributes"]["g"]["comparisons"] if c["metric"] == "tpr")
    assert tpr["verdict"] == "INCONCLUSIVE"
    assert tpr["positives_needed"] is None
    assert tpr["needed_decidable"] is False
    assert tpr["needed_towards"] == "PASS"
    assert tpr["needed_reason"] == (
        "not decidable at this gap: more than 10,000,000 positives in the group would be needed"
    )
    (table,) = presentation.attribute_tables(document)
    row = next(row for row in table.comparisons if row.metric == "tpr")
    assert row.positives_needed == "not decidable"
    assert tpr["needed_reason"] in row.note


def test_with_a_tolerance_of_zero_nothing_passes_and_the_reason_says_so() -> None:
    counts = _counts((400, 100, 50, 450), (40, 10, 5, 45))  # no gap at all
    document = judge.judge_attribute(counts, ["a", "b"], unknown=0, tolerance=0.0)
    tpr = next(c for c in document["comparisons"] if c["metric"] == "tpr")
    assert (tpr["verdict"], tpr["positives_needed"], tpr["needed_decidable"]) == ("INCONCLUSIVE", None, False)
    assert tpr["needed_reason"] == "not decidable: with a tolerance of 0 no interval lies within ±δ"


def test_a_group_without_positives_gets_its_size_in_the_metrics_own_unit() -> None:
    counts = _counts((400, 100, 50, 450), (0, 0, 2, 18))
    document = judge.judge_attribute(counts, ["a", "b"], unknown=0)
    fpr = next(c for c in document["comparisons"] if c["metric"] == "fpr")
    assert fpr["verdict"] == "INCONCLUSIVE"
    assert fpr["positives_needed"] is None
    assert fpr["n_needed"] > 20
    assert fpr["needed_decidable"] is True
    assert fpr["needed_reason"] == "the group has no label positives; n_needed counts negatives"
    (table,) = presentation.attribute_tables({"attributes": {"g": document}})
    assert next(row for row in table.comparisons if row.metric == "fpr").positives_needed == "—"


def test_decided_and_undefined_comparisons_need_nothing_and_give_no_reason() -> None:
    counts = _counts((40_000, 10_000, 5_000, 45_000), (30_000, 20_000, 5_000, 45_000), (0, 0, 3, 17))
    document = judge.judge_attribute(counts, ["a", "b", "c"], unknown=0)
    decided = next(c for c in document["comparisons"] if c["metric"] == "tpr" and c["group"] == "b")
    undefined = next(c for c in document["comparisons"] if c["metric"] == "tpr" and c["group"] == "c")
    for item in (decided, undefined):
        assert item["positives_needed"] is None
        assert item["needed_decidable"] is None
        assert item["needed_reason"] is None
        assert item["needed_towards"] is None
        assert item["planning_difference"] is None


def test_a_stored_document_without_the_new_keys_still_shows_a_dash() -> None:
    counts = _counts((40, 10, 5, 45), (0, 0, 2, 18))
    document = judge.judge_attribute(counts, ["a", "b"], unknown=0)
    for item in document["comparisons"]:
        for key in ("planning_difference", "needed_towards", "needed_decidable", "needed_reason"):
            del item[key]
    (table,) = presentation.attribute_tables({"attributes": {"g": document}})
    assert next(row for row in table.comparisons if row.metric == "tpr").positives_needed == "—"


# --------------------------------------------------------------------------- realised power


SIMULATIONS = 10_000


def _realised(
    reference: tuple[int, int, int, int],
    group: tuple[int, int, int, int],
    metric: str,
    truth: tuple[float, float, float, float],
    seed: int,
) -> tuple[float, float]:
    """The share of simulated audits, at the recommended size, with the verdict it planned for.

    ``truth`` is (reference TPR, group TPR, reference FPR, group FPR) of the simulated populations.
    """
    comparison = stats.compare(_counts(reference, group), reference=0)[metric]
    planned_for = int(comparison.needed_towards[1])
    scale = comparison.positives_needed[1] / (group[0] + group[1])
    sizes = [round(scale * cells) for cells in (reference[0] + reference[1], group[0] + group[1])]
    negatives = [round(scale * cells) for cells in (reference[2] + reference[3], group[2] + group[3])]
    rng = np.random.default_rng(seed)
    counts = np.empty((SIMULATIONS, 2, 4), np.int64)
    for index in (0, 1):
        tp = rng.binomial(sizes[index], truth[index], SIMULATIONS)
        fp = rng.binomial(negatives[index], truth[2 + index], SIMULATIONS)
        counts[:, index] = np.stack([tp, sizes[index] - tp, fp, negatives[index] - fp], axis=-1)
    verdicts = stats.compare(counts, reference=0, p_values=False)[metric].verdict[:, 1]
    rate = float(np.mean(verdicts == planned_for))
    return rate, math.sqrt(rate * (1 - rate) / SIMULATIONS)


@pytest.mark.parametrize(
    ("reference", "group", "metric", "truth"),
    [
        # towards FAIL: TPR 0.70 against 0.80 at a size ratio of 50
        ((4_000, 1_000, 500, 4_500), (70, 30, 50, 450), "tpr", (0.8, 0.7, 0.1, 0.1)),
        # towards PASS at no gap (both bounds), and at a gap planned half a tolerance from delta
        ((4_000, 1_000, 500, 4_500), (40, 10, 5, 45), "tpr", (0.8, 0.8, 0.1, 0.1)),
        ((4_000, 1_000, 500, 4_500), (39, 11, 5, 45), "tpr", (0.8, 0.78, 0.1, 0.1)),
        ((40_000, 10_000, 5_000, 45_000), (420, 80, 50, 450), "tpr", (0.8, 0.825, 0.1, 0.1)),
        # -0.041 on 4,000 positives: the margin is already decided, so planned at the observed gap
        ((16_000, 4_000, 500, 4_500), (3_036, 964, 100, 900), "tpr", (0.8, 0.759, 0.1, 0.1)),
        # equalized odds: towards FAIL through TPR, towards PASS with both components
        ((4_000, 1_000, 500, 4_500), (70, 30, 50, 450), "equalized_odds", (0.8, 0.7, 0.1, 0.1)),
        ((4_000, 1_000, 500, 4_500), (40, 10, 5, 45), "equalized_odds", (0.8, 0.8, 0.1, 0.1)),
    ],
)
def test_the_realised_power_at_the_recommended_size_is_close_to_the_target(
    reference: tuple[int, int, int, int],
    group: tuple[int, int, int, int],
    metric: str,
    truth: tuple[float, float, float, float],
) -> None:
    """The plan is a normal approximation; the verdict comes from the score-based intervals, whose
    asymmetry costs or gives a few points (docs/audit-json.md, "Sample sizes")."""
    rate, error = _realised(reference, group, metric, truth, seed=sum(group))
    assert abs(rate - POWER) <= 0.04 + 3 * error, (rate, error)


def test_where_the_score_interval_leans_towards_one_half_the_plan_errs_on_the_safe_side() -> None:
    """FPR 0.2 against 0.1 in a group of 10 negatives: Wilson's bounds lean towards 1/2, so the
    group's interval sits higher than the normal approximation assumes and the FAIL comes sooner.
    Measured 0.85: more power than asked, never markedly less."""
    rate, error = _realised((4_000, 1_000, 500, 4_500), (16, 4, 2, 8), "fpr", (0.8, 0.8, 0.1, 0.2), seed=7)
    assert POWER - 3 * error <= rate <= POWER + 0.08, (rate, error)


@pytest.mark.parametrize("power", [0.3, 0.5, 0.9, 0.99])
@pytest.mark.parametrize("group", [(40, 10, 5, 45), (39, 11, 5, 45), (70, 30, 50, 450)])
def test_any_power_is_met_by_the_smallest_size_that_meets_it(power: float, group: tuple[int, int, int, int]) -> None:
    counts = _counts((4_000, 1_000, 500, 4_500), group)
    tpr = stats.compare(counts, reference=0, power=power)["tpr"]
    planned = float(tpr.planning_difference[1])
    positives = group[0] + group[1]
    rates = _planned_rates((4_000, group[0]), (5_000, positives), planned)
    ratio = 5_000 / positives

    def at(nobs: float) -> float:
        return _statsmodels_power(nobs=nobs, ratio=ratio, planned=planned, rates=rates, alpha=0.05)

    n_needed = float(tpr.n_needed[1])
    if math.isnan(n_needed):  # a low power the data at hand has, at a gap near delta
        assert tpr.needed_reason[1] == stats.NEEDED_TOO_CLOSE
    else:
        assert at(n_needed) >= power > at(n_needed - 1)


def test_simulations_that_skip_p_values_skip_sample_sizes_unless_asked() -> None:
    counts = np.broadcast_to(_counts((4_000, 1_000, 500, 4_500), (6, 3, 1, 10)), (3, 2, 4))
    skipped = stats.compare(counts, reference=0, p_values=False)
    asked = stats.compare(counts, reference=0, p_values=False, sample_sizes=True)
    for metric in stats.COMPARED:
        assert np.isnan(skipped[metric].positives_needed).all()
        assert (skipped[metric].needed_reason == 0).all()
    assert np.isfinite(asked["tpr"].positives_needed[:, 1]).all()
    assert np.isfinite(asked["equalized_odds"].positives_needed[:, 1]).all()
    single = stats.compare(counts[0], reference=0)
    np.testing.assert_array_equal(
        asked["equalized_odds"].positives_needed[0], single["equalized_odds"].positives_needed
    )
