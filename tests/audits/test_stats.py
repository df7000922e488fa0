"""The pure statistics: agreement with statsmodels, scipy and fairlearn, coverage, edge cases."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats  # type: ignore[import-untyped]
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from auditportal.fairness.statistics import judge, stats

FAIRLEARN_TOLERANCE = 1e-12


def _counts(*rows: tuple[int, int, int, int]) -> stats.Counts:
    return np.array(rows, dtype=np.int64)


def _expand(counts: stats.Counts, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row-level arrays (group code, label, prediction) with exactly these confusion counts, shuffled."""
    codes, y_true, y_pred = [], [], []
    for group, cells in enumerate(counts):
        for (label, predicted), n in zip(((1, 1), (1, 0), (0, 1), (0, 0)), cells, strict=True):
            codes += [group] * int(n)
            y_true += [label] * int(n)
            y_pred += [predicted] * int(n)
    order = np.random.default_rng(seed).permutation(len(codes))
    return (
        np.array(codes, np.int32)[order],
        np.array(y_true, np.int8)[order],
        np.array(y_pred, np.int8)[order],
    )


# --------------------------------------------------------------------------- counting and rates


def test_one_bincount_gives_each_groups_confusion_cells_and_the_unknown_rows() -> None:
    codes = np.array([0, 0, 1, -1, 1, 0, -1], np.int32)
    y_true = np.array([1, 1, 0, 1, 1, 0, 0], np.int8)
    y_pred = np.array([1, 0, 1, 1, 1, 0, 0], np.int8)
    counts, unknown = stats.confusion_counts(codes, y_true, y_pred, 2)
    assert counts.tolist() == [[1, 1, 0, 1], [1, 0, 1, 0]]
    assert unknown.tolist() == [1, 0, 0, 1]


def test_rates_carry_wilson_intervals_and_exact_ones_in_small_cells_equal_to_statsmodels() -> None:
    # Issue 13, item 1: a group with fewer than z**4 successes or failures (14.8 at 95%) gets the exact
    # (Clopper-Pearson, statsmodels' "beta") interval; the others Wilson's, as before.
    counts = _counts((400, 100, 50, 450), (3, 0, 0, 7))
    rates = stats.group_rates(counts, alpha=0.05)
    wilson = proportion_confint(400, 500, alpha=0.05, method="wilson")
    exact = proportion_confint(3, 3, alpha=0.05, method="beta")
    np.testing.assert_allclose(rates["tpr"].low, [wilson[0], exact[0]], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(rates["tpr"].high, [wilson[1], exact[1]], rtol=1e-12, atol=1e-15)
    assert rates["tpr"].value.tolist() == [0.8, 1.0]
    assert rates["selection_rate"].value.tolist() == [0.45, 0.3]


def test_a_rate_without_denominator_is_undefined_not_an_error() -> None:
    rates = stats.group_rates(_counts((0, 0, 3, 7), (2, 1, 0, 0)))
    assert math.isnan(rates["tpr"].value[0])
    assert math.isnan(rates["tpr"].low[0])
    assert math.isnan(rates["fpr"].value[1])
    assert rates["tpr"].undefined.tolist() == [True, False]
    assert rates["ppv"].undefined.tolist() == [False, False]


# --------------------------------------------------------------------------- comparisons


def test_difference_intervals_are_newcombe_at_the_bonferroni_level() -> None:
    # Every proportion with at least z**4 successes and failures (25.2 at 97.5%): Wilson's bounds.
    counts = _counts((300, 100, 50, 550), (160, 40, 5, 45), (90, 30, 2, 20))
    tpr = stats.compare(counts, reference=0)["tpr"]
    assert tpr.family_size == 2
    for group, (x, n) in ((1, (160, 200)), (2, (90, 120))):
        low, high = confint_proportions_2indep(x, n, 300, 400, method="newcomb", compare="diff", alpha=0.05 / 2)
        assert tpr.ci_low[group] == pytest.approx(low, abs=1e-12)
        assert tpr.ci_high[group] == pytest.approx(high, abs=1e-12)
        assert tpr.level[group] == pytest.approx(0.975)
    assert math.isnan(tpr.difference[0])  # the reference is not compared with itself


def test_in_small_cells_the_difference_interval_is_mover_from_clopper_pearson_bounds() -> None:
    # Issue 13, item 1: 1 of 2 positives, 9 of 12 (3 failures) and 0 of 7 against 300 of 400; at the
    # family's level (k = 3) each small group's bounds are exact, the reference's Wilson's.
    counts = _counts((300, 100, 50, 550), (1, 1, 5, 45), (9, 3, 2, 20), (0, 7, 1, 9))
    tpr = stats.compare(counts, reference=0)["tpr"]
    alpha = 0.05 / 3
    ref_low, ref_high = proportion_confint(300, 400, alpha=alpha, method="wilson")
    for group, (x, n) in ((1, (1, 2)), (2, (9, 12)), (3, (0, 7))):
        low, high = proportion_confint(x, n, alpha=alpha, method="beta")
        d = x / n - 0.75
        expected_low = d - math.sqrt((x / n - low) ** 2 + (ref_high - 0.75) ** 2)
        expected_high = d + math.sqrt((high - x / n) ** 2 + (0.75 - ref_low) ** 2)
        assert tpr.ci_low[group] == pytest.approx(max(expected_low, -1), abs=1e-12)
        assert tpr.ci_high[group] == pytest.approx(min(expected_high, 1), abs=1e-12)
        # Wider than Newcombe's (Wilson) interval on the side where Wilson's bound was too tight.
        wilson = confint_proportions_2indep(x, n, 300, 400, method="newcomb", compare="diff", alpha=alpha)
        assert tpr.ci_low[group] <= wilson[0] + 1e-12
    # 1 of 2 positives against a reference of 0.75: far too few to decide.
    assert stats.VERDICTS[tpr.verdict[1]] == "INCONCLUSIVE"


def test_large_cells_use_the_score_test_and_small_cells_fishers_exact_test() -> None:
    counts = _counts((300, 100, 50, 550), (40, 10, 5, 45), (3, 9, 2, 20))
    tpr = stats.compare(counts, reference=0)["tpr"]
    assert tpr.exact.tolist() == [False, False, True]
    pooled = (300 + 40) / 450
    z = (0.8 - 0.75) / math.sqrt(pooled * (1 - pooled) * (1 / 50 + 1 / 400))
    assert tpr.p_value[1] == pytest.approx(2 * scipy_stats.norm.sf(abs(z)), rel=1e-9)
    assert tpr.p_value[2] == pytest.approx(scipy_stats.fisher_exact([[3, 9], [300, 100]]).pvalue, rel=1e-12)
    expected = multipletests(tpr.p_value[1:], method="holm")[1]
    np.testing.assert_allclose(tpr.p_adjusted[1:], expected, rtol=1e-12)


def test_holm_leaves_undefined_p_values_out_of_the_family() -> None:
    p = np.array([[0.01, np.nan, 0.04, 0.03], [0.5, 0.2, np.nan, np.nan]])
    adjusted = stats.holm(p)
    np.testing.assert_allclose(adjusted[0, [0, 2, 3]], multipletests([0.01, 0.04, 0.03], method="holm")[1])
    np.testing.assert_allclose(adjusted[1, :2], multipletests([0.5, 0.2], method="holm")[1])
    assert np.isnan(adjusted[0, 1])
    assert np.isnan(adjusted[1, 2:]).all()


def test_the_noise_floor_is_the_one_sample_formula_and_the_two_sample_one_at_the_familys_z() -> None:
    # Issue 13, item 5: the plus-four rate (x+2)/(n+4), and the two-sample floor at the family's z
    # (k = 1 here); tests/audits/test_ratio.py checks the rest.
    counts = _counts((300, 100, 50, 550), (40, 10, 5, 45))
    tpr = stats.compare(counts, reference=0)["tpr"]
    pooled = 342 / 454
    assert tpr.noise_floor[1] == pytest.approx(
        1.959963984540054 * math.sqrt(pooled * (1 - pooled) * (1 / 50 + 1 / 400))
    )
    assert tpr.noise_floor_group[1] == pytest.approx(1.959963984540054 * math.sqrt(42 / 54 * 12 / 54 / 50))


def test_a_large_gap_on_many_rows_fails_and_a_tiny_gap_on_many_rows_passes() -> None:
    counts = _counts((40_000, 10_000, 5_000, 45_000), (30_000, 20_000, 5_000, 45_000), (40_100, 9_900, 5_000, 45_000))
    tpr = stats.compare(counts, reference=0, tolerance=0.05)["tpr"]
    assert [stats.VERDICTS[v] for v in tpr.verdict[1:]] == ["FAIL", "PASS"]
    assert np.isnan(tpr.positives_needed[1:]).all()  # decided: nothing more is needed


def test_the_same_gap_on_nine_positives_is_inconclusive_and_says_how_many_positives_would_decide() -> None:
    counts = _counts((4_000, 1_000, 500, 4_500), (6, 3, 1, 10))  # TPR 0.8 vs 0.667: 0.13 from 9 positives
    tpr = stats.compare(counts, reference=0, tolerance=0.05)["tpr"]
    assert stats.VERDICTS[tpr.verdict[1]] == "INCONCLUSIVE"
    assert tpr.ci_low[1] < -0.05
    assert tpr.ci_high[1] > -0.05
    needed = tpr.positives_needed[1]
    assert needed > 9
    # tests/audits/test_power.py holds the size to statsmodels' NormalIndPower at the groups' ratio.
    assert stats.VERDICTS[tpr.needed_towards[1]] == "FAIL"


def test_a_gap_exactly_at_the_tolerance_is_planned_half_a_tolerance_beyond_it() -> None:
    # 0.80 - 0.75 is 0.05 up to rounding: planned at the observed gap (as before) no size decided it.
    counts = _counts((300, 100, 50, 550), (40, 10, 5, 45))
    tpr = stats.compare(counts, reference=0, tolerance=0.05)["tpr"]
    assert stats.VERDICTS[tpr.verdict[1]] == "INCONCLUSIVE"
    assert abs(tpr.planning_difference[1]) in (pytest.approx(0.025), pytest.approx(0.075))
    assert tpr.positives_needed[1] > 50


def test_equalized_odds_takes_the_larger_gap_with_its_sign_and_a_conservative_interval() -> None:
    counts = _counts((400, 100, 100, 400), (150, 50, 40, 160))  # TPR -0.05, FPR -0.00
    result = stats.compare(counts, reference=0)
    eo, tpr = result["equalized_odds"], result["tpr"]
    assert eo.difference[1] == pytest.approx(-0.05)
    assert eo.component[1] == 0
    # Its interval uses each component at 1 - alpha/2 (k = 1), so it is wider than the TPR interval.
    tpr_half = confint_proportions_2indep(150, 200, 400, 500, method="newcomb", compare="diff", alpha=0.025)
    fpr_half = confint_proportions_2indep(40, 200, 100, 500, method="newcomb", compare="diff", alpha=0.025)
    size_high = max(abs(tpr_half[0]), abs(tpr_half[1]), abs(fpr_half[0]), abs(fpr_half[1]))
    assert eo.ci_low[1] == pytest.approx(-size_high, abs=1e-12)
    assert eo.ci_high[1] == pytest.approx(0.0)  # both component intervals contain 0
    assert eo.ci_low[1] < tpr.ci_low[1]
    assert eo.p_value[1] == pytest.approx(min(1.0, 2 * min(tpr.p_value[1], result["fpr"].p_value[1])))
    assert math.isnan(eo.ratio[1])


def test_equalized_odds_fails_when_one_component_is_decidedly_beyond_the_tolerance() -> None:
    counts = _counts((40_000, 10_000, 5_000, 45_000), (40_000, 10_000, 10_000, 40_000))  # FPR +0.10
    eo = stats.compare(counts, reference=0)["equalized_odds"]
    assert stats.VERDICTS[eo.verdict[1]] == "FAIL"
    assert eo.component[1] == 1
    assert eo.ci_low[1] > 0.05


def test_comparisons_reject_counts_of_the_wrong_shape_and_a_missing_reference() -> None:
    with pytest.raises(ValueError, match=r"counts must be shaped \(\.\.\., groups, 4\)"):
        stats.compare(np.zeros((3, 3), np.int64), reference=0)
    with pytest.raises(ValueError, match="reference 2 is not a group index"):
        stats.compare(np.ones((2, 4), np.int64), reference=2)


# --------------------------------------------------------------------------- against fairlearn


@st.composite
def _audits(draw: st.DrawFn) -> tuple[stats.Counts, int]:
    groups = draw(st.integers(min_value=1, max_value=5))
    cells = draw(
        st.lists(
            st.tuples(*(st.integers(min_value=0, max_value=25) for _ in range(4))),
            min_size=groups,
            max_size=groups,
        )
    )
    counts = np.array(cells, np.int64)
    # fairlearn reports 0 where a rate is undefined; the comparison needs every rate defined.
    assume(bool((counts[:, 0] + counts[:, 1] > 0).all() and (counts[:, 2] + counts[:, 3] > 0).all()))
    assume(bool((counts[:, 0] + counts[:, 2] > 0).all()))
    return counts, draw(st.integers(min_value=0, max_value=2**32 - 1))


@pytest.mark.slow  # about 7 s: 40 examples through fairlearn's MetricFrame
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(_audits())
def test_group_rates_and_differences_equal_fairlearns_metricframe(audit: tuple[stats.Counts, int]) -> None:
    from fairlearn.metrics import (
        MetricFrame,
        equalized_odds_difference,
        false_negative_rate,
        false_positive_rate,
        selection_rate,
        true_positive_rate,
    )
    from sklearn.metrics import precision_score

    counts, seed = audit
    codes, y_true, y_pred = _expand(counts, seed)
    counted, unknown = stats.confusion_counts(codes, y_true, y_pred, len(counts))
    assert counted.tolist() == counts.tolist()
    assert unknown.sum() == 0

    frame = MetricFrame(
        metrics={
            "tpr": true_positive_rate,
            "fpr": false_positive_rate,
            "fnr": false_negative_rate,
            "ppv": precision_score,
            "selection_rate": selection_rate,
        },
        y_true=y_true,
        y_pred=y_pred,
        sensitive_features=codes,
    )
    rates = stats.group_rates(counted)
    spreads = stats.spreads(rates)
    reference = judge.default_reference(counted)
    assert reference is not None
    compared = stats.compare(counted, reference=reference)
    by_group = frame.by_group
    for metric in stats.RATES:
        theirs = by_group[metric].to_numpy(dtype=float)
        np.testing.assert_allclose(rates[metric].value, theirs, rtol=0, atol=FAIRLEARN_TOLERANCE)
        between = frame.difference(method="between_groups")[metric]
        assert spreads[metric].max_minus_min == pytest.approx(between, abs=FAIRLEARN_TOLERANCE)
        if metric in compared:
            differences = theirs - theirs[reference]
            ours = compared[metric].difference
            mask = np.arange(len(counts)) != reference
            np.testing.assert_allclose(ours[mask], differences[mask], rtol=0, atol=FAIRLEARN_TOLERANCE)
    eo = equalized_odds_difference(y_true, y_pred, sensitive_features=codes)
    assert spreads["equalized_odds"].max_minus_min == pytest.approx(eo, abs=FAIRLEARN_TOLERANCE)
    ratio = frame.ratio(method="between_groups")["selection_rate"]
    if not math.isnan(spreads["selection_rate"].min_over_max):
        assert spreads["selection_rate"].min_over_max == pytest.approx(ratio, abs=FAIRLEARN_TOLERANCE)


# --------------------------------------------------------------------------- coverage


def test_familywise_intervals_cover_the_true_differences_in_small_sample_simulations() -> None:
    """2,000 simulated audits of four small groups, all in one vectorised call."""
    simulations, alpha = 2_000, 0.05
    rng = np.random.default_rng(20260501)
    # rows, prevalence, true TPR, true FPR per group; the reference is group 0 (the largest).
    truth = np.array([[60, 0.4, 0.8, 0.2], [25, 0.3, 0.6, 0.1], [15, 0.5, 0.9, 0.3], [40, 0.2, 0.7, 0.05]])
    rows, prevalence, tpr, fpr = truth.T
    cell_probabilities = np.stack(
        [prevalence * tpr, prevalence * (1 - tpr), (1 - prevalence) * fpr, (1 - prevalence) * (1 - fpr)], axis=1
    )
    counts = np.stack(
        [rng.multinomial(int(n), p, size=simulations) for n, p in zip(rows, cell_probabilities, strict=True)], axis=1
    )
    result = stats.compare(counts, reference=0, alpha=alpha, p_values=False)

    tp, _fn, fp, _tn = cell_probabilities.T
    true_rates = {"tpr": tpr, "fpr": fpr, "selection_rate": tp + fp, "ppv": tp / (tp + fp)}
    true_gap = {name: value - value[0] for name, value in true_rates.items()}
    true_gap["equalized_odds"] = np.maximum(np.abs(true_gap["tpr"]), np.abs(true_gap["fpr"]))
    # Nominal rate minus three simulation standard errors.
    floor = (1 - alpha) - 3 * math.sqrt(alpha * (1 - alpha) / simulations)
    for metric, comparison in result.items():
        low, high = comparison.ci_low[:, 1:], comparison.ci_high[:, 1:]
        gap = true_gap[metric][1:]
        if metric == "equalized_odds":  # an interval for the size of the gap, shown with a sign
            low, high = np.minimum(np.abs(low), np.abs(high)), np.maximum(np.abs(low), np.abs(high))
        covered = (low <= gap + 1e-12) & (gap <= high + 1e-12)
        defined = comparison.defined[:, 1:]
        familywise = np.where(defined, covered, True).all(axis=1)
        assert defined.mean() > 0.99
        assert familywise.mean() >= floor, (metric, familywise.mean())


# --------------------------------------------------------------------------- edge cases via the report


def _report(counts: stats.Counts, groups: list[str], unknown: int = 0, reference: int | None = None) -> dict[str, Any]:
    document = judge.judge_attribute(counts, groups, unknown=unknown, reference=reference)
    json.dumps(document, allow_nan=False)  # undefined values are null, never NaN
    return document


def _comparison(document: dict[str, Any], metric: str, group: str) -> dict[str, Any]:
    return next(c for c in document["comparisons"] if c["metric"] == metric and c["group"] == group)


def test_a_group_without_positives_has_undefined_tpr_flagged_and_inconclusive() -> None:
    document = _report(_counts((40, 10, 5, 45), (0, 0, 2, 18)), ["a", "b"])
    assert document["groups"]["b"]["tpr"] is None
    assert document["groups"]["b"]["ci"]["tpr"] is None
    assert document["groups"]["b"]["undefined"] == ["tpr", "fnr"]
    tpr = _comparison(document, "tpr", "b")
    assert tpr["undefined"] is True
    assert tpr["difference"] is None
    assert tpr["verdict"] == "INCONCLUSIVE"
    assert tpr["positives_needed"] is None
    assert _comparison(document, "equalized_odds", "b")["difference"] is None
    assert _comparison(document, "fpr", "b")["difference"] == pytest.approx(0.1 - 5 / 50)


def test_a_group_without_negatives_has_undefined_fpr() -> None:
    document = _report(_counts((40, 10, 5, 45), (7, 3, 0, 0)), ["a", "b"])
    assert document["groups"]["b"]["fpr"] is None
    assert _comparison(document, "fpr", "b")["undefined"] is True
    assert _comparison(document, "tpr", "b")["difference"] == pytest.approx(-0.1)


def test_a_single_group_has_rates_but_nothing_to_compare() -> None:
    document = _report(_counts((40, 10, 5, 45)), ["only"])
    assert document["reference"] == "only"
    assert document["comparisons"] == []
    assert document["verdict"] is None
    assert document["summary"]["tpr"]["max_minus_min"] == 0.0


def test_all_predictions_positive_make_the_selection_rate_one_and_the_ppv_the_base_rate() -> None:
    document = _report(_counts((50, 0, 50, 0), (10, 0, 30, 0)), ["a", "b"])
    assert document["groups"]["a"]["selection_rate"] == 1.0
    assert document["groups"]["b"]["ppv"] == 0.25
    selection = _comparison(document, "selection_rate", "b")
    assert selection["difference"] == 0.0
    assert selection["disparate_impact"] == 1.0
    assert selection["four_fifths"] == "PASS"
    assert _comparison(document, "fpr", "b")["difference"] == 0.0


def test_all_unknown_values_leave_no_groups_and_report_the_count() -> None:
    document = _report(np.zeros((0, 4), np.int64), [], unknown=12)
    assert document == {
        "reference": None,
        "unknown": 12,
        "groups": {},
        "comparisons": [],
        "summary": {},
        "verdict": None,
        "verdicts": {"PASS": 0, "INCONCLUSIVE": 0, "FAIL": 0},
    }


def test_the_reference_defaults_to_the_group_with_most_rows_and_can_be_chosen() -> None:
    counts = _counts((4, 1, 1, 4), (40, 10, 5, 45))
    assert _report(counts, ["small", "big"])["reference"] == "big"
    chosen = _report(counts, ["small", "big"], reference=0)
    assert chosen["reference"] == "small"
    assert {c["group"] for c in chosen["comparisons"]} == {"big"}


def test_the_four_fifths_rule_fails_below_eighty_percent_of_the_reference_selection_rate() -> None:
    document = _report(_counts((400, 100, 100, 400), (150, 350, 0, 500)), ["a", "b"])
    selection = _comparison(document, "selection_rate", "b")
    assert selection["disparate_impact"] == pytest.approx(0.3)
    assert selection["four_fifths"] == "FAIL"
    assert selection["verdict"] == "FAIL"
    assert document["verdict"] == "FAIL"
