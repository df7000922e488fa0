"""Ratio intervals and the three-way four-fifths verdict, the per-group noise floor, and how equalized
odds' interval is shown (docs/audit-json.md, "Ratios and the four-fifths rule")."""

from __future__ import annotations

import math
import time
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from scipy import stats as scipy_stats  # type: ignore[import-untyped]
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from auditportal.accounts.models import User
from auditportal.audits.models import PredictionAudit
from auditportal.fairness.statistics import judge, stats
from auditportal.fairness.text import numbers, presentation
from tests.factories import PredictionAuditFactory

ORACLE = 1e-12
METRICS = ("tpr", "fpr", "selection_rate", "ppv")


def _counts(*rows: tuple[int, int, int, int]) -> stats.Counts:
    return np.array(rows, dtype=np.int64)


def _comparison(document: dict[str, Any], metric: str, group: str) -> dict[str, Any]:
    return next(c for c in document["comparisons"] if c["metric"] == metric and c["group"] == group)


def _katz(x: float, n: float, x_ref: float, n_ref: float, alpha: float) -> tuple[float, float]:
    low, high = confint_proportions_2indep(x, n, x_ref, n_ref, compare="ratio", method="log", alpha=alpha)
    return float(low), float(high)


def _bounds(x: int, n: int, alpha: float) -> tuple[float, float]:
    """statsmodels' Wilson interval, or its exact ("beta", Clopper-Pearson) one in a small cell: fewer
    than z**4 successes or failures, z at 1 - alpha/2 (docs/audit-json.md, "Intervals")."""
    small = min(x, n - x) < scipy_stats.norm.ppf(1 - alpha / 2) ** 4
    low, high = proportion_confint(x, n, alpha=alpha, method="beta" if small else "wilson")
    return float(low), float(high)


def _mover(x: int, n: int, x_ref: int, n_ref: int, alpha: float) -> tuple[float, float]:
    """Donner & Zou (2012), MOVER-R for p1/p2 from statsmodels' intervals of each rate (Wilson's, or
    Clopper-Pearson's in a small cell)."""
    (l1, u1), (l2, u2) = (_bounds(c, t, alpha) for c, t in ((x, n), (x_ref, n_ref)))
    p1, p2 = x / n, x_ref / n_ref
    if u2 >= 2 * p2:  # a reference too uncertain to bound the ratio from below
        low = 0.0
    else:
        low = (p1 * p2 - math.sqrt(max((p1 * p2) ** 2 - l1 * u2 * (2 * p1 - l1) * (2 * p2 - u2), 0))) / (
            u2 * (2 * p2 - u2)
        )
    high = (p1 * p2 + math.sqrt(max((p1 * p2) ** 2 - u1 * l2 * (2 * p1 - u1) * (2 * p2 - l2), 0))) / (
        l2 * (2 * p2 - l2)
    )
    return max(low, 0.0), high


def _expected(x: int, n: int, x_ref: int, n_ref: int, alpha: float) -> tuple[float, float, str]:
    """The wider of Katz's and MOVER's bound at each end, and which method gave each ("katz/mover")."""
    katz, mover = _katz(x, n, x_ref, n_ref, alpha), _mover(x, n, x_ref, n_ref, alpha)
    low, high = min(katz[0], mover[0]), max(katz[1], mover[1])
    return low, high, f"{'katz' if katz[0] <= mover[0] else 'mover'}/{'katz' if katz[1] >= mover[1] else 'mover'}"


# --------------------------------------------------------------------------- intervals


def test_every_ratio_has_the_wider_of_katzs_and_movers_bounds_at_the_familys_level() -> None:
    large_reference = _counts((300, 100, 50, 550), (40, 10, 5, 45), (9, 3, 2, 20), (70, 50, 30, 150), (5, 15, 1, 40))
    small_reference = _counts((12, 8, 6, 14), (40, 10, 5, 45), (9, 3, 2, 20), (70, 50, 30, 150), (5, 15, 1, 40))
    sources = set()
    for counts in (large_reference, small_reference):
        compared = stats.compare(counts, reference=0, alpha=0.05)
        parts = stats.rate_parts(counts)
        for metric in METRICS:
            comparison = compared[metric]
            successes, trials = parts[metric]
            k = int(comparison.family_size)
            assert k == 4
            for group in (1, 2, 3, 4):
                cells = (int(successes[group]), int(trials[group]), int(successes[0]), int(trials[0]))
                low, high, source = _expected(*cells, alpha=0.05 / k)
                sources.add(source)
                assert comparison.ratio_low[group] == pytest.approx(low, rel=ORACLE), (metric, group)
                assert comparison.ratio_high[group] == pytest.approx(high, rel=ORACLE), (metric, group)
                # The same level as the difference's interval.
                assert comparison.level[group] == pytest.approx(1 - 0.05 / k)
            assert math.isnan(comparison.ratio_low[0])  # the reference is not compared with itself
    # Each method gives some of the bounds, at each end: both are checked.
    assert any(s.startswith("katz") for s in sources)
    assert any(s.startswith("mover") for s in sources)
    assert any(s.endswith("katz") for s in sources)
    assert any(s.endswith("mover") for s in sources)


def test_a_zero_cell_adds_a_half_to_every_cell_and_the_interval_holds_the_observed_ratio() -> None:
    # Group 1 selects nobody (x = 0); group 2 selects everyone (x = n); the reference neither.
    counts = _counts((300, 100, 50, 550), (0, 6, 0, 14), (8, 0, 4, 0))
    selection = stats.compare(counts, reference=0)["selection_rate"]
    alpha = 0.05 / 2
    # x = 0: the ratio is 0, the lower bound 0, the upper bound Katz's on x + 0.5 of n + 1 (here wider
    # than MOVER's).
    katz_high = _katz(0.5, 21, 350.5, 1001, alpha)[1]
    assert katz_high > _mover(0, 20, 350, 1000, alpha)[1]
    assert selection.ratio[1] == 0.0
    assert selection.ratio_low[1] == 0.0
    assert selection.ratio_high[1] == pytest.approx(katz_high, rel=ORACLE)
    # x = n: without the correction Katz's variance term for the group would be 0.
    katz = _katz(12.5, 13, 350.5, 1001, alpha)
    mover = _mover(12, 12, 350, 1000, alpha)
    assert selection.ratio[2] == pytest.approx(1 / 0.35)
    assert selection.ratio_low[2] == pytest.approx(min(katz[0], mover[0]), rel=ORACLE)
    assert selection.ratio_high[2] == pytest.approx(max(katz[1], mover[1], 1 / 0.35), rel=ORACLE)
    assert selection.ratio_low[2] < selection.ratio[2] <= selection.ratio_high[2]
    assert np.isfinite(selection.ratio_high[1:]).all()


def test_a_reference_rate_of_zero_leaves_the_ratio_its_interval_and_its_verdict_undefined() -> None:
    document = judge.judge_attribute(_counts((0, 10, 0, 10), (3, 7, 1, 9)), ["ref", "b"], unknown=0, reference=0)
    selection = _comparison(document, "selection_rate", "b")
    assert selection["ratio"] is None
    assert (selection["ratio_low"], selection["ratio_high"], selection["ratio_verdict"]) == (None, None, None)
    assert selection["four_fifths"] is None
    assert selection["difference"] == pytest.approx(0.2)  # the difference is still defined
    equalized_odds = _comparison(document, "equalized_odds", "b")
    assert (equalized_odds["ratio"], equalized_odds["ratio_low"], equalized_odds["ratio_verdict"]) == (None, None, None)


# --------------------------------------------------------------------------- the four-fifths verdict


def test_a_group_at_point_ratio_0_718_with_a_wide_interval_is_inconclusive_not_fail() -> None:
    # 7 of 25 selected against 390 of 1,000: 0.718 of the reference's rate, interval [0.31, 1.35].
    counts = _counts((390, 0, 0, 610), (7, 0, 0, 18))
    document = judge.judge_attribute(counts, ["ref", "small"], unknown=0, reference=0)
    selection = _comparison(document, "selection_rate", "small")
    assert selection["ratio"] == pytest.approx(0.718, abs=5e-4)
    assert (selection["ratio_low"], selection["ratio_high"]) == pytest.approx(_expected(7, 25, 390, 1000, 0.05)[:2])
    assert selection["ratio_low"] < 0.8 < selection["ratio_high"]
    assert selection["ratio_verdict"] == "INCONCLUSIVE"
    assert selection["four_fifths"] == "INCONCLUSIVE"
    assert selection["disparate_impact"] == selection["ratio"]


def test_the_four_fifths_verdict_fails_passes_and_abstains_on_large_groups() -> None:
    counts = _counts((500, 0, 0, 500), (300, 0, 0, 700), (480, 0, 0, 520), (650, 0, 0, 350), (410, 0, 0, 590))
    document = judge.judge_attribute(counts, ["ref", "low", "even", "high", "edge"], unknown=0, reference=0)
    verdicts = {g: _comparison(document, "selection_rate", g)["four_fifths"] for g in ("low", "even", "high", "edge")}
    # 0.6 of the reference: FAIL; 0.96: PASS; 1.3: above 1.25 but not decidedly; 0.82: straddles 0.8.
    assert verdicts == {"low": "FAIL", "even": "PASS", "high": "INCONCLUSIVE", "edge": "INCONCLUSIVE"}
    # The reference below four fifths of the group fails too.
    reverse = judge.judge_attribute(
        _counts((300, 0, 0, 700), (9_000, 0, 0, 1_000)), ["ref", "b"], unknown=0, reference=0
    )
    assert _comparison(reverse, "selection_rate", "b")["four_fifths"] == "FAIL"


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (0.8, 1.25, stats.PASS),  # both edges belong to PASS
        (0.8, 0.8, stats.PASS),
        (1.25, 1.25, stats.PASS),
        (math.nextafter(0.8, 0), 1.0, stats.INCONCLUSIVE),
        (0.9, math.nextafter(1.25, 2), stats.INCONCLUSIVE),
        (0.5, 0.8, stats.INCONCLUSIVE),  # touching 0.8 is not entirely below it
        (0.5, math.nextafter(0.8, 0), stats.FAIL),
        (1.25, 2.0, stats.INCONCLUSIVE),
        (math.nextafter(1.25, 2), 2.0, stats.FAIL),
        (0.0, 10.0, stats.INCONCLUSIVE),
    ],
)
def test_the_four_fifths_rule_at_its_edges(low: float, high: float, expected: int) -> None:
    verdict = stats.four_fifths_verdict(np.array([low]), np.array([high]), np.array([(low + high) / 2]))
    assert int(verdict[0]) == expected


def test_an_undefined_ratio_has_no_four_fifths_verdict() -> None:
    verdict = stats.four_fifths_verdict(np.array([np.nan]), np.array([np.nan]), np.array([np.nan]))
    assert int(verdict[0]) == stats.NO_VERDICT


def _simulated_verdicts(
    rng: np.random.Generator, *, n: int, rate: float, n_ref: int, rate_ref: float, k: int, reps: int
) -> tuple[stats.Comparison, float]:
    """Selection-rate comparisons of k groups with the same true rate against one reference."""
    counts = np.zeros((reps, k + 1, 4), np.int64)
    selected_ref = rng.binomial(n_ref, rate_ref, size=reps)
    selected = rng.binomial(n, rate, size=(reps, k))
    counts[:, 0, 0], counts[:, 0, 3] = selected_ref, n_ref - selected_ref
    counts[:, 1:, 0], counts[:, 1:, 3] = selected, n - selected
    return stats.compare(counts, reference=0, p_values=False)["selection_rate"], rate / rate_ref


REPS = 20_000
ALPHA = 0.05
SE = math.sqrt(ALPHA * (1 - ALPHA) / REPS)


@pytest.mark.parametrize(
    ("n", "rate", "n_ref", "rate_ref", "k"),
    [
        (50, 0.4, 5_000, 0.5, 1),  # true ratio 0.8: at the edge, inside
        (10, 0.4, 5_000, 0.5, 1),
        (200, 0.08, 5_000, 0.1, 1),
        (20, 0.4, 20, 0.5, 1),
        (100, 0.2, 100, 0.25, 3),  # a family of three: each at 1 - alpha/3
        (2_000, 0.04, 5_000, 0.05, 1),
        (40, 0.02, 5_000, 0.025, 1),
        (30, 0.625, 3_000, 0.5, 1),  # true ratio 1.25
    ],
)
def test_a_true_ratio_on_the_four_fifths_edge_is_failed_at_most_alpha_of_the_time(
    n: int, rate: float, n_ref: int, rate_ref: float, k: int
) -> None:
    started = time.perf_counter()
    comparison, _ = _simulated_verdicts(
        np.random.default_rng(n * 7 + k), n=n, rate=rate, n_ref=n_ref, rate_ref=rate_ref, k=k, reps=REPS
    )
    # Familywise: any of the k groups failed.
    fail_rate = np.mean((comparison.ratio_verdict[:, 1:] == stats.FAIL).any(axis=-1))
    assert fail_rate <= ALPHA + 3 * SE, fail_rate
    assert time.perf_counter() - started < 20


@pytest.mark.parametrize(
    ("n", "rate", "n_ref", "rate_ref"),
    [(200, 0.375, 5_000, 0.5), (500, 0.075, 5_000, 0.1), (300, 0.4, 300, 0.5), (400, 0.63, 2_000, 0.5)],
)
def test_in_ordinary_cells_a_ratio_beyond_the_edge_passes_at_most_alpha_of_the_time_and_coverage_is_nominal(
    n: int, rate: float, n_ref: int, rate_ref: float
) -> None:
    comparison, true_ratio = _simulated_verdicts(
        np.random.default_rng(n), n=n, rate=rate, n_ref=n_ref, rate_ref=rate_ref, k=1, reps=REPS
    )
    pass_rate = np.mean(comparison.ratio_verdict[:, 1] == stats.PASS)
    assert pass_rate <= ALPHA + 3 * SE, pass_rate
    low, high = comparison.ratio_low[:, 1], comparison.ratio_high[:, 1]
    coverage = np.mean((low <= true_ratio) & (true_ratio <= high))
    assert abs(coverage - (1 - ALPHA)) <= 3 * SE + 0.005, coverage


# --------------------------------------------------------------------------- noise floors


def test_the_noise_floor_is_the_familiar_per_group_form_on_the_plus_four_rate() -> None:
    counts = _counts((300, 100, 50, 550), (40, 10, 5, 45), (0, 12, 0, 8), (7, 0, 1, 9))
    tpr = stats.compare(counts, reference=0, alpha=0.05)["tpr"]
    z = scipy_stats.norm.ppf(1 - 0.05 / 2)
    for group, (x, n) in ((1, (40, 50)), (2, (0, 12)), (3, (7, 7))):
        p = (x + 2) / (n + 4)
        assert tpr.noise_floor_group[group] == pytest.approx(z * math.sqrt(p * (1 - p) / n), rel=ORACLE)
    # A rate of 0 or 1 still has a floor.
    assert tpr.noise_floor_group[2] > 0.1
    assert tpr.noise_floor_group[3] > 0.1


def test_the_two_sample_noise_floor_is_at_the_familys_z_on_the_pooled_plus_four_rate() -> None:
    counts = _counts((300, 100, 50, 550), (40, 10, 5, 45), (0, 12, 0, 8))
    compared = stats.compare(counts, reference=0, alpha=0.05)
    z = scipy_stats.norm.ppf(1 - 0.05 / 2 / 2)  # k = 2
    pooled = (40 + 300 + 2) / (50 + 400 + 4)
    expected = z * math.sqrt(pooled * (1 - pooled) * (1 / 50 + 1 / 400))
    assert compared["tpr"].noise_floor[1] == pytest.approx(expected, rel=ORACLE)
    # The half-width of the family's interval when the two rates are equal.
    width = (compared["tpr"].ci_high[1] - compared["tpr"].ci_low[1]) / 2
    assert compared["tpr"].noise_floor[1] == pytest.approx(width, rel=0.1)
    # Equalized odds: the component's floor at the components' level, 1 - alpha/2k.
    z_eo = scipy_stats.norm.ppf(1 - 0.05 / 2 / 4)
    assert compared["equalized_odds"].noise_floor[1] == pytest.approx(expected * z_eo / z, rel=ORACLE)
    assert compared["tpr"].noise_floor[2] > 0  # the group's TPR is 0


# --------------------------------------------------------------------------- equalized odds, shown


def _equalized_odds(ci: tuple[float, float], components: dict[str, tuple[float, float]] | None) -> dict[str, Any]:
    item: dict[str, Any] = {"metric": "equalized_odds", "ci_low": ci[0], "ci_high": ci[1]}
    if components is not None:
        item["components"] = {
            name: {"difference": (low + high) / 2, "ci_low": low, "ci_high": high, "ci_level": 0.99}
            for name, (low, high) in components.items()
        }
    return item


def test_equalized_odds_interval_is_shown_as_a_magnitude_naming_the_component_of_each_bound() -> None:
    # [-0.401, 0]: the gap is at most 0.401, and that bound is TPR's.
    text, parts = presentation.magnitude_interval(
        _equalized_odds((-0.401, 0.0), {"tpr": (-0.401, 0.02), "fpr": (-0.05, 0.03)})
    )
    assert text == "|gap| ≤ 0.401 (TPR)"
    assert parts == ["TPR [-0.401, +0.0200]", "FPR [-0.0500, +0.0300]"]  # 3 significant digits
    # Both bounds from one component.
    text, _ = presentation.magnitude_interval(
        _equalized_odds((-0.177, -0.044), {"tpr": (-0.177, -0.044), "fpr": (-0.01, 0.1)})
    )
    assert text == "0.0440 ≤ |gap| ≤ 0.177 (TPR)"
    # The lower bound from FPR, the upper from TPR.
    text, _ = presentation.magnitude_interval(_equalized_odds((0.06, 0.3), {"tpr": (-0.3, 0.01), "fpr": (0.06, 0.12)}))
    assert text == "0.0600 (FPR) ≤ |gap| ≤ 0.300 (TPR)"
    # Documents stored before the components: the magnitude alone.
    assert presentation.magnitude_interval(_equalized_odds((-0.401, 0.0), None)) == ("|gap| ≤ 0.401", [])


def test_the_document_keeps_both_components_intervals_for_equalized_odds() -> None:
    counts = _counts((4_000, 1_000, 500, 4_500), (60, 40, 8, 92))
    document = judge.judge_attribute(counts, ["ref", "b"], unknown=0, reference=0)
    item = _comparison(document, "equalized_odds", "b")
    compared = stats.compare(counts, reference=0)
    for name in ("tpr", "fpr"):
        part = item["components"][name]
        assert part["ci_level"] == pytest.approx(1 - 0.05 / 2)
        assert part["difference"] == pytest.approx(_comparison(document, name, "b")["difference"])
        assert (part["ci_low"], part["ci_high"]) == (
            pytest.approx(float(compared["equalized_odds"].components[name].low[1])),
            pytest.approx(float(compared["equalized_odds"].components[name].high[1])),
        )
    # The signed interval is the magnitude interval with the sign of the difference.
    low, high = item["ci_low"], item["ci_high"]
    largest = max(max(abs(p["ci_low"]), abs(p["ci_high"])) for p in item["components"].values())
    assert max(abs(low), abs(high)) == pytest.approx(largest)
    row = presentation.attribute_tables({"attributes": {"a": document}})[0].comparisons
    shown = next(r for r in row if r.metric == "equalized_odds")
    assert shown.interval.startswith("|gap| ≤ ") or "≤ |gap| ≤" in shown.interval
    assert shown.interval.endswith("(TPR)")
    assert shown.parts_level == "97.5%"


def test_a_document_stored_before_ratio_intervals_is_shown_as_it_was() -> None:
    item = {
        "metric": "selection_rate", "group": "b", "reference": "a", "difference": -0.2, "ratio": 0.6,
        "ci_low": -0.3, "ci_high": -0.1, "ci_level": 0.95, "family_size": 1, "p_value": 0.001,
        "p_adjusted": 0.001, "test": "score", "noise_floor": 0.05, "noise_floor_group": 0.04,
        "verdict": "FAIL", "positives_needed": None, "n_needed": None, "n_unit": "rows", "undefined": False,
        "disparate_impact": 0.6, "four_fifths": "FAIL",
    }  # fmt: skip
    document = {"attributes": {"g": {"reference": "a", "unknown": 0, "groups": {}, "comparisons": [item]}}}
    row = presentation.attribute_tables(document)[0].comparisons[0]
    assert row.note == "disparate impact 0.600, four-fifths FAIL"
    assert (row.ratio, row.ratio_interval, row.ratio_verdict) == ("0.600", "", "")
    assert (row.noise_floor, row.noise_floor_family) == ("±0.0400", "")


# --------------------------------------------------------------------------- page and table


@pytest.mark.django_db
def test_the_audit_page_shows_ratio_intervals_four_fifths_verdicts_noise_floors_and_the_gaps_magnitude(
    bob: User, dataset_storage: Path
) -> None:
    audit = PredictionAuditFactory.create(created_by=bob)
    client = Client()
    client.force_login(bob)
    page = client.get(reverse("audits:prediction", args=[audit.pk])).content.decode()
    document = audit.result["attributes"]["gender"]
    selection = _comparison(document, "selection_rate", "m")
    ratio_cell = (
        f'<td class="num ratio">{numbers.ratio(selection["ratio"])}<br><small class="muted">'
        f"{numbers.interval(selection['ratio_low'], selection['ratio_high'], signed=False)}</small><br>"
        f'<span class="badge verdict-{selection["ratio_verdict"]}"'
    )
    assert ratio_cell in page
    assert f"±{numbers.rate(selection['noise_floor_group'])}<br>" in page
    assert f"±{numbers.rate(selection['noise_floor'])}</small>" in page
    equalized_odds = _comparison(document, "equalized_odds", "m")
    text, parts = presentation.magnitude_interval(equalized_odds)
    assert "|gap|" in text
    assert f'<span class="wrap">{text}</span>' in page
    for part in parts:
        assert f'<small class="muted">{part}</small>' in page
    assert "disparate impact" not in page  # the point-ratio label is gone


@pytest.mark.django_db
def test_the_cli_table_shows_the_ratio_its_interval_and_the_four_fifths_verdict(predictions_csv: Path) -> None:
    out = StringIO()
    call_command(
        "audit_predictions", str(predictions_csv), "--label", "label", "--prediction", "pred", "--attribute", "gender",
        "--format", "table", stdout=out,
    )  # fmt: skip
    lines = out.getvalue().splitlines()
    header = next(line for line in lines if line.startswith("metric"))
    assert header.split("  ")[:1] == ["metric"]
    for column in ("noise 2s", "ratio", "ratio interval", "4/5"):
        assert f"  {column}  " in header
    audit = PredictionAudit.objects.get()
    selection = _comparison(audit.result["attributes"]["gender"], "selection_rate", "m")
    row = next(line for line in lines if line.startswith("selection_rate  m"))
    ratio_interval = numbers.interval(selection["ratio_low"], selection["ratio_high"], signed=False)
    assert f"{numbers.ratio(selection['ratio'])}  {ratio_interval}" in row
    assert selection["ratio_verdict"] in row
    eo_row = next(line for line in lines if line.startswith("equalized_odds  m"))
    assert "|gap| ≤" in eo_row
    assert "TPR [" in eo_row
    assert "FPR [" in eo_row
