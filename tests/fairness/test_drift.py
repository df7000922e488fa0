"""Group-share drift against the training data (fairness/statistics/drift.py): its level over repeated
looks, its power, and groups the training data never had."""

from __future__ import annotations

import math

import numpy as np
import pytest

from auditportal.fairness.documents.canonical import canonical_json
from auditportal.fairness.statistics import stats
from auditportal.fairness.statistics.drift import drift_groups, judge_drift
from auditportal.fairness.statistics.sequential import (
    MixturePrior,
    MonitorPolicyError,
    Status,
    confidence_sequence,
    confidence_sequence_bounds,
)

ALPHA = 0.05
LIMIT = 0.05
GROUPS = ("a", "b", "c")
POPULATION = np.array([0.5, 0.3, 0.2])
RUNS, LOOKS, BATCH, TRAINING = 2000, 50, 100, 5000


def _allowed(alpha: float, runs: int) -> float:
    return alpha + 3 * math.sqrt(alpha * (1 - alpha) / runs)


@pytest.mark.parametrize(
    "production", [pytest.param(POPULATION, id="no drift"), pytest.param([0.55, 0.25, 0.2], id="shift at the limit")]
)
def test_drift_holds_its_level_over_fifty_looks(production) -> None:
    """2,000 deployments, each with its own training sample of 5,000 rows, 50 looks of 100 production
    rows: any group's share judged a breach, at any look, in at most alpha of them. The hardest case
    shifts two shares by exactly the limit. The rule is judge_drift's (checked on looks drawn below);
    the naive monitor (each look's 95% Wilson interval at alpha/G against the training share) is not
    held at alpha."""
    rng = np.random.default_rng(2026)
    training = rng.multinomial(TRAINING, POPULATION, size=RUNS)
    cumulative = rng.multinomial(BATCH, production, size=(RUNS, LOOKS)).cumsum(axis=1)
    total = np.broadcast_to((np.arange(1, LOOKS + 1) * BATCH)[None, :, None], cumulative.shape)
    group_alpha = ALPHA / len(GROUPS)
    share = training / TRAINING
    priors = [[MixturePrior.tuned(value, alpha=group_alpha / 2) for value in row] for row in share]
    a = np.array([[prior.a for prior in row] for row in priors])[:, None, :]
    b = np.array([[prior.b for prior in row] for row in priors])[:, None, :]
    low, high = confidence_sequence_bounds(cumulative, total, alpha=group_alpha / 2, a=a, b=b)
    training_low, training_high = stats.proportion_interval(training, np.full_like(training, TRAINING), group_alpha / 2)
    shift_low, shift_high = low - training_high[:, None, :], high - training_low[:, None, :]
    breach = (shift_low > LIMIT) | (shift_high < -LIMIT)
    assert breach.any(axis=(1, 2)).mean() <= _allowed(ALPHA, RUNS)

    for run, look in [(int(rng.integers(RUNS)), int(rng.integers(LOOKS))) for _ in range(40)]:
        judged = judge_drift(
            dict(zip(GROUPS, cumulative[run, look].tolist(), strict=True)),
            dict(zip(GROUPS, training[run].tolist(), strict=True)),
            limit=LIMIT,
            alpha=ALPHA,
        )
        for index, finding in enumerate(judged.findings):
            assert finding.low == pytest.approx(shift_low[run, look, index], abs=1e-12)
            assert finding.high == pytest.approx(shift_high[run, look, index], abs=1e-12)
            assert (finding.status is Status.BREACH) == bool(breach[run, look, index])

    if production is not POPULATION:
        wilson_low, wilson_high = stats.wilson_interval(cumulative, total, group_alpha)
        naive = (wilson_low - share[:, None, :] > LIMIT) | (wilson_high - share[:, None, :] < -LIMIT)
        assert naive.any(axis=(1, 2)).mean() > 2 * ALPHA


def test_a_ten_point_shift_is_confirmed_within_a_few_thousand_rows() -> None:
    # Group a moves from 50% to 60% of the rows (b from 30% to 20%); looks every 250 rows.
    rng = np.random.default_rng(10)
    rows_to_detection = []
    for _ in range(150):
        training = dict(zip(GROUPS, rng.multinomial(TRAINING, POPULATION).tolist(), strict=True))
        counts = np.zeros(3, np.int64)
        found = math.inf
        for look in range(1, 25):
            counts += rng.multinomial(250, [0.6, 0.2, 0.2])
            judged = judge_drift(dict(zip(GROUPS, counts.tolist(), strict=True)), training, limit=LIMIT, alpha=ALPHA)
            if judged.breaches:
                assert {finding.group for finding in judged.breaches} <= {"a", "b"}
                found = look * 250
                break
        rows_to_detection.append(found)
    assert np.median(rows_to_detection) <= 3500
    assert np.mean(np.isfinite(rows_to_detection)) >= 0.9  # by 6,000 rows


def test_a_group_the_training_data_never_had_is_flagged_never_dropped() -> None:
    judged = judge_drift(
        {"a": 500, "b": 300, "newcomer": 2}, {"a": 5000, "b": 3000, "c": 2000}, limit=LIMIT, alpha=ALPHA
    )
    by_group = {finding.group: finding for finding in judged.findings}
    assert list(by_group) == ["a", "b", "c", "newcomer"]
    newcomer = by_group["newcomer"]
    assert newcomer.status is Status.UNSEEN
    assert (newcomer.production_rows, newcomer.training_rows, newcomer.low, newcomer.high) == (2, 0, None, None)
    assert judged.unseen == (newcomer,)
    assert judged.groups_judged == 3  # the unseen group has no share of alpha: it is not a test
    assert by_group["c"].status is Status.BREACH  # 0 of 802 where training had 20%
    assert by_group["c"].production_total == 802  # the newcomer's rows count in every share
    assert judged.status is Status.BREACH


def test_rows_of_unknown_group_are_judged_when_training_had_some_and_flagged_when_it_had_none() -> None:
    flagged = judge_drift({"a": 60, "b": 40}, {"a": 600, "b": 400}, limit=LIMIT, alpha=ALPHA, production_unknown=5)
    unknown = flagged.findings[-1]
    assert (unknown.group, unknown.unknown, unknown.status) == (None, True, Status.UNSEEN)
    judged = judge_drift(
        {"a": 60, "b": 40}, {"a": 600, "b": 300}, limit=LIMIT, alpha=ALPHA, production_unknown=5, training_unknown=100
    )
    assert judged.groups_judged == 3 == drift_groups({"a": 600, "b": 300}, 100)
    unknown = judged.findings[-1]
    assert unknown.unknown
    assert unknown.status in (Status.WATCHING, Status.WITHIN)
    assert unknown.training_share == pytest.approx(0.1)


def test_without_training_error_the_training_share_is_exact_and_production_gets_the_whole_alpha() -> None:
    judged = judge_drift(
        {"a": 640, "b": 360}, {"a": 60_000, "b": 40_000}, limit=LIMIT, alpha=ALPHA, training_error=False
    )
    a = judged.findings[0]
    production = confidence_sequence(640, 1000, alpha=ALPHA / 2, prior=MixturePrior.tuned(0.6, alpha=ALPHA / 2))
    assert a.production == production
    assert (a.training_low, a.training_high) == (0.6, 0.6)
    assert a.low == pytest.approx(production.low - 0.6)
    assert a.high == pytest.approx(production.high - 0.6)
    with_error = judge_drift({"a": 640, "b": 360}, {"a": 60_000, "b": 40_000}, limit=LIMIT, alpha=ALPHA).findings[0]
    assert a.low is not None
    assert a.high is not None
    assert with_error.low is not None
    assert with_error.high is not None
    assert with_error.low < a.low  # the training interval widens it
    assert with_error.high > a.high


def test_too_few_production_rows_are_not_judged_but_unseen_groups_still_show() -> None:
    judged = judge_drift({"a": 20, "z": 1}, {"a": 500, "b": 500}, limit=LIMIT, alpha=ALPHA, min_rows=50)
    statuses = {finding.group: finding.status for finding in judged.findings}
    assert statuses == {"a": Status.TOO_FEW, "b": Status.TOO_FEW, "z": Status.UNSEEN}
    empty = judge_drift({}, {"a": 500, "b": 500}, limit=LIMIT, alpha=ALPHA)
    assert {finding.status for finding in empty.findings} == {Status.TOO_FEW}


def test_drift_findings_are_canonical_json_and_bad_values_name_their_field() -> None:
    judged = judge_drift({"a": 600, "b": 300, "new": 5}, {"a": 5000, "b": 5000}, limit=LIMIT, alpha=ALPHA)
    document = judged.as_json()
    canonical_json(document)
    assert document["group_alpha"] == pytest.approx(ALPHA / 2)
    assert document["method"].startswith("per-group share: beta-binomial mixture")
    assert [finding["status"] for finding in document["findings"]] == ["breach", "breach", "unseen"]
    near = judge_drift({"a": 58, "b": 42}, {"a": 5000, "b": 5000}, limit=LIMIT, alpha=ALPHA).findings[0]
    assert near.status is Status.WATCHING
    assert near.near  # an observed shift of 8 points, not yet confirmed
    with pytest.raises(MonitorPolicyError) as error:
        judge_drift({"a": 1}, {"a": 1}, limit=0.0, alpha=ALPHA)
    assert error.value.field == "drift_limit"
    with pytest.raises(ValueError, match="negative"):
        judge_drift({"a": -1}, {"a": 1}, limit=LIMIT, alpha=ALPHA)
