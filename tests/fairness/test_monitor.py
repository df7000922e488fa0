"""One look of a production monitor (fairness/statistics/monitor.py): the policy's comparisons, the
alpha split over them, and the document it stores."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from auditportal.fairness.documents.canonical import canonical_json
from auditportal.fairness.statistics.monitor import (
    DriftLimit,
    GapLimit,
    MonitorPolicy,
    RateLimit,
    WindowCounts,
    judge_look,
)
from auditportal.fairness.statistics.sequential import (
    Bound,
    MixturePrior,
    MonitorPolicyError,
    Status,
    confidence_sequence_bounds,
    judge_rate,
    window_alpha,
)

GROUPS = ("men", "women", "other")
TRAINING = {"men": 5000, "women": 4000, "other": 1000}


def _policy(**changes) -> MonitorPolicy:
    values: dict[str, Any] = {
        "groups": GROUPS,
        "reference": "men",
        "rate_limits": (RateLimit("fnr", 0.05), RateLimit("selection_rate", 0.2, Bound.AT_LEAST, groups=("women",))),
        "gap_limits": (GapLimit("fpr", 0.05),),
        "drift": DriftLimit(0.05, TRAINING),
        "alpha": 0.05,
        "min_rows": 100,
    }
    return MonitorPolicy(**(values | changes))


def _counts(fn_women: int = 10) -> dict[str, WindowCounts]:
    return {
        "men": WindowCounts(tp=280, fn=10, fp=60, tn=650),
        "women": WindowCounts(tp=300 - fn_women, fn=fn_women, fp=50, tn=600, unlabelled=50, unlabelled_selected=20),
        "other": WindowCounts(tp=20, fn=1, fp=5, tn=40),
    }


def test_the_policy_counts_its_comparisons_before_any_data() -> None:
    # FNR for 3 groups, selection rate for 1, the FPR gap for 2, and 3 training shares.
    assert _policy().comparisons == 3 + 1 + 2 + 3
    assert _policy(drift=None, gap_limits=()).comparisons == 4


def test_each_comparison_is_judged_at_its_share_of_the_window_alpha() -> None:
    look = judge_look(_policy(), _counts())
    k = 9
    # Counted since promotion: the whole alpha, split over the K comparisons.
    assert (look.comparisons, look.window, look.window_alpha) == (k, None, 0.05)
    assert look.comparison_alpha == pytest.approx(0.05 / k)
    assert {finding.interval.alpha for finding in look.rates} == {look.comparison_alpha}
    assert {finding.alpha for finding in look.gaps} == {look.comparison_alpha}
    assert {finding.group_interval.alpha for finding in look.gaps} == {look.comparison_alpha / 2}
    assert look.drift is not None
    for finding in look.drift.findings:
        assert finding.alpha == pytest.approx(look.comparison_alpha, rel=1e-12)
    # In the third tumbling window: that window's share of alpha, split alike.
    later = judge_look(_policy(), _counts(), window=3)
    assert later.window_alpha == window_alpha(0.05, 3)
    assert later.comparison_alpha == pytest.approx(0.05 * 6 / (np.pi**2 * 9) / k)


def test_a_look_judges_what_its_policy_names_from_the_window_counts() -> None:
    look = judge_look(_policy(), _counts(fn_women=60))
    rates = {(finding.metric, finding.group): finding for finding in look.rates}
    assert set(rates) == {("fnr", "men"), ("fnr", "women"), ("fnr", "other"), ("selection_rate", "women")}
    women = rates[("fnr", "women")]
    assert (women.interval.successes, women.interval.trials, women.rows) == (60, 300, 1000)
    assert women.status is Status.BREACH  # 20% against 5%
    # The same judgement as judge_rate's with the look's alpha and the prior tuned on the limit.
    alone = judge_rate(60, 300, limit=0.05, alpha=look.comparison_alpha, rows=1000, min_rows=100)
    assert alone.interval == women.interval
    assert women.interval.prior == MixturePrior.tuned(0.05, alpha=look.comparison_alpha)
    # The selection rate counts the unlabelled rows: (240 + 50 + 20) of 1,000.
    selection = rates[("selection_rate", "women")]
    assert (selection.interval.successes, selection.interval.trials) == (310, 1000)
    assert selection.status is Status.WITHIN
    assert rates[("fnr", "other")].status is Status.TOO_FEW  # 66 rows, fewer than 100
    assert [(finding.group, finding.reference) for finding in look.gaps] == [("women", "men"), ("other", "men")]
    assert look.breached
    assert look.status is Status.BREACH


def test_a_compliant_window_is_not_breached_and_groups_outside_the_policy_are_reported() -> None:
    counts = _counts() | {"unlisted": WindowCounts(tp=3, tn=4)}
    look = judge_look(_policy(), counts, unknown_rows=2)
    assert not look.breached
    assert look.undeclared == ("unlisted",)
    assert look.drift is not None
    drift = {finding.group: finding.status for finding in look.drift.findings}
    assert drift["unlisted"] is Status.UNSEEN
    assert drift[None] is Status.UNSEEN  # unknown rows where training had none
    assert look.status is Status.UNSEEN


def test_a_group_without_rows_keeps_its_comparisons_as_too_few() -> None:
    counts = _counts()
    del counts["other"]
    look = judge_look(_policy(drift=None), counts)
    assert look.comparisons == 6
    other = [finding for finding in look.findings if finding.group == "other"]
    assert [finding.status for finding in other] == [Status.TOO_FEW, Status.TOO_FEW]


def test_the_look_is_stored_as_canonical_json_with_method_source_and_split() -> None:
    document = judge_look(_policy(), _counts(fn_women=60)).as_json()
    canonical_json(document)
    assert document["method"].startswith("beta-binomial mixture confidence sequence")
    assert "Howard" in document["source"]
    assert "Bonferroni" in document["alpha_split"]
    assert document["comparisons"] == 9
    assert document["breached"] is True
    assert len(document["rates"]) == 4
    assert len(document["gaps"]) == 2
    assert len(document["drift"]["findings"]) == 3


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"groups": ("a", "a")}, "groups"),
        ({"alpha": 0.0}, "alpha"),
        ({"min_rows": -1}, "min_rows"),
        ({"rate_limits": (RateLimit("recall", 0.1),)}, "rate_limits[0].metric"),
        ({"rate_limits": (RateLimit("fnr", 1.5),)}, "rate_limits[0].limit"),
        ({"rate_limits": (RateLimit("fnr", 0.1, groups=("nobody",)),)}, "rate_limits[0].groups"),
        ({"reference": "nobody"}, "reference"),
        ({"gap_limits": (GapLimit("fpr", -0.1),)}, "gap_limits[0].limit"),
        ({"drift": DriftLimit(0.0, TRAINING)}, "drift.limit"),
        ({"drift": DriftLimit(0.05, {})}, "drift.training"),
        ({"rate_limits": (), "gap_limits": (), "drift": None}, "rate_limits"),
    ],
)
def test_a_policy_that_cannot_be_judged_is_refused_naming_the_field(changes, field) -> None:
    with pytest.raises(MonitorPolicyError) as error:
        _policy(**changes)
    assert error.value.field == field


def test_a_compliant_monitor_of_twelve_comparisons_holds_alpha_across_them_and_the_looks() -> None:
    """FNR at most 5% for 12 groups, each exactly at its limit, 50 looks, 1,000 deployments: any false
    breach, on any group at any look, in at most alpha of them (each comparison at alpha/12)."""
    rng = np.random.default_rng(12)
    runs, looks, groups = 1000, 50, 12
    policy = MonitorPolicy(groups=tuple(f"g{i}" for i in range(groups)), rate_limits=(RateLimit("fnr", 0.05),))
    alpha = judge_look(policy, {}).comparison_alpha
    assert alpha == pytest.approx(0.05 / groups)
    positives = rng.integers(10, 41, size=(runs, looks, groups)).cumsum(axis=1)
    misses = rng.binomial(np.diff(positives, axis=1, prepend=0), 0.05).cumsum(axis=1)
    prior = MixturePrior.tuned(0.05, alpha=alpha)
    low, _ = confidence_sequence_bounds(misses, positives, alpha=alpha, a=prior.a, b=prior.b)
    assert (low > 0.05).any(axis=(1, 2)).mean() <= 0.05 + 3 * (0.05 * 0.95 / runs) ** 0.5
