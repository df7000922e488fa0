"""One look of a production monitor: the policy's comparisons judged on a window's counts, with the
monitor's alpha split over them (docs/monitoring.md, "Judging repeated looks").

The policy (:class:`MonitorPolicy`) declares its groups (those of the approved model's training data),
absolute limits per metric (:class:`RateLimit`), gap limits against the reference group
(:class:`GapLimit`), a group-share drift limit (:class:`DriftLimit`) and the smallest judged batch.
From these alone, before any production row, it counts its K comparisons: one per (absolute limit,
group it applies to), per (gap limit, group other than the reference), per judged training share.
:func:`judge_look` judges each at ``alpha / K`` (``window_alpha(alpha, window) / K`` in tumbling
windows) with the confidence sequences of :mod:`.sequential` and :mod:`.drift`: a model that keeps to
every limit raises any false alarm, on any comparison at any look, in at most alpha of deployments.

The counts are cumulative over the judged window: since promotion (``window`` None, the default, at
the whole alpha), or since the start of the window-th tumbling window when the monitor restarts its
counts (at :func:`window_alpha`: a late change shows sooner in a fresh window than diluted in
everything since promotion; docs/monitoring.md measures both). Groups the policy does not declare
are reported in ``undeclared`` (and flagged by the drift check), never judged and never dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from auditportal.fairness.statistics.drift import DriftJudgement, ShareFinding, drift_groups, judge_drift
from auditportal.fairness.statistics.sequential import (
    ALPHA_SPLIT,
    DEFAULT_PLANNED_TRIALS,
    JSON,
    METHOD,
    SOURCE,
    Bound,
    GapFinding,
    GapSide,
    MixturePrior,
    MonitorPolicyError,
    RateFinding,
    Status,
    check_metric,
    judge_gap,
    judge_rate,
    window_alpha,
    worst_status,
)
from auditportal.fairness.statistics.stats import DEFAULT_ALPHA


@dataclass(frozen=True)
class WindowCounts:
    """One group's counts in the judged window: the confusion cells of the rows whose label is known,
    and the rows still without a label (and how many of them the model selected), which count towards
    the selection rate and the group's rows but not towards the error rates."""

    tp: int = 0
    fn: int = 0
    fp: int = 0
    tn: int = 0
    unlabelled: int = 0
    unlabelled_selected: int = 0

    def __post_init__(self) -> None:
        for name in ("tp", "fn", "fp", "tn", "unlabelled", "unlabelled_selected"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, not {getattr(self, name)}")
        if self.unlabelled_selected > self.unlabelled:
            raise ValueError("unlabelled_selected must not exceed unlabelled")

    @property
    def rows(self) -> int:
        return self.tp + self.fn + self.fp + self.tn + self.unlabelled

    def rate(self, metric: str) -> tuple[int, int]:
        """``(successes, trials)`` of a metric of :data:`stats.RATES`."""
        positives, negatives = self.tp + self.fn, self.fp + self.tn
        parts = {
            "tpr": (self.tp, positives),
            "fnr": (self.fn, positives),
            "fpr": (self.fp, negatives),
            "ppv": (self.tp, self.tp + self.fp),
            "selection_rate": (self.tp + self.fp + self.unlabelled_selected, self.rows),
        }
        return parts[check_metric(metric)]


@dataclass(frozen=True)
class RateLimit:
    """``metric`` of each group in ``groups`` (None: every declared group) at most (or at least) ``limit``."""

    metric: str
    limit: float
    bound: Bound = Bound.AT_MOST
    groups: tuple[str, ...] | None = None


@dataclass(frozen=True)
class GapLimit:
    """``metric`` of each declared group minus the reference's, within ``limit`` on ``side``."""

    metric: str
    limit: float
    side: GapSide = GapSide.EITHER


@dataclass(frozen=True)
class DriftLimit:
    """Each training group's production share within ``limit`` of its training share."""

    limit: float
    training: Mapping[str, int]
    training_unknown: int = 0
    training_error: bool = True


@dataclass(frozen=True)
class MonitorPolicy:
    groups: tuple[str, ...]
    reference: str | None = None
    rate_limits: tuple[RateLimit, ...] = ()
    gap_limits: tuple[GapLimit, ...] = ()
    drift: DriftLimit | None = None
    alpha: float = DEFAULT_ALPHA
    min_rows: int = 0
    planned_trials: int = DEFAULT_PLANNED_TRIALS

    def __post_init__(self) -> None:
        if len(set(self.groups)) != len(self.groups):
            raise MonitorPolicyError("a monitor's groups must be distinct", field="groups")
        if not 0 < self.alpha < 1:
            raise MonitorPolicyError(f"alpha must be between 0 and 1 (exclusive), not {self.alpha}", field="alpha")
        if self.min_rows < 0:
            raise MonitorPolicyError(f"min_rows must not be negative, not {self.min_rows}", field="min_rows")
        if self.planned_trials < 1:
            raise MonitorPolicyError("planned_trials must be at least 1", field="planned_trials")
        for index, rate_limit in enumerate(self.rate_limits):
            check_metric(rate_limit.metric, f"rate_limits[{index}].metric")
            if not 0 < rate_limit.limit < 1:
                raise MonitorPolicyError(
                    f"a rate limit must lie strictly between 0 and 1, not {rate_limit.limit}",
                    field=f"rate_limits[{index}].limit",
                )
            Bound(rate_limit.bound)
            for group in rate_limit.groups or ():
                if group not in self.groups:
                    raise MonitorPolicyError(
                        f"group {group!r} is not one of the monitor's groups", field=f"rate_limits[{index}].groups"
                    )
        if self.gap_limits and self.reference not in self.groups:
            raise MonitorPolicyError("gap limits need a reference group among the monitor's groups", field="reference")
        for index, gap_limit in enumerate(self.gap_limits):
            check_metric(gap_limit.metric, f"gap_limits[{index}].metric")
            if not 0 <= gap_limit.limit < 1:
                raise MonitorPolicyError(
                    f"a gap limit must lie in [0, 1), not {gap_limit.limit}", field=f"gap_limits[{index}].limit"
                )
            GapSide(gap_limit.side)
        if self.drift is not None:
            if not 0 < self.drift.limit < 1:
                raise MonitorPolicyError(
                    f"a drift limit must lie strictly between 0 and 1, not {self.drift.limit}", field="drift.limit"
                )
            if any(rows < 0 for rows in self.drift.training.values()) or self.drift.training_unknown < 0:
                raise MonitorPolicyError("training rows must not be negative", field="drift.training")
            if drift_groups(self.drift.training, self.drift.training_unknown) == 0:
                raise MonitorPolicyError("a drift limit needs the training data's group counts", field="drift.training")
        if self.comparisons == 0:
            raise MonitorPolicyError("the monitor judges nothing: give a limit", field="rate_limits")

    def limited_groups(self, rate_limit: RateLimit) -> tuple[str, ...]:
        return self.groups if rate_limit.groups is None else rate_limit.groups

    @property
    def comparisons(self) -> int:
        """K: the comparisons the policy declares, each judged at alpha / K."""
        rates = sum(len(self.limited_groups(rate_limit)) for rate_limit in self.rate_limits)
        gaps = len(self.gap_limits) * max(len(self.groups) - 1, 0)
        drift = 0 if self.drift is None else drift_groups(self.drift.training, self.drift.training_unknown)
        return rates + gaps + drift


@dataclass(frozen=True)
class LookJudgement:
    """Every comparison of a monitor at one look, with the alpha each was judged at."""

    alpha: float
    window: int | None  # None: counted since promotion
    window_alpha: float
    comparisons: int
    comparison_alpha: float
    min_rows: int
    rates: tuple[RateFinding, ...]
    gaps: tuple[GapFinding, ...]
    drift: DriftJudgement | None
    undeclared: tuple[str, ...] = field(default=())

    @property
    def findings(self) -> tuple[RateFinding | GapFinding | ShareFinding, ...]:
        return (*self.rates, *self.gaps, *(() if self.drift is None else self.drift.findings))

    @property
    def statuses(self) -> tuple[Status, ...]:
        return tuple(finding.status for finding in self.findings)

    @property
    def status(self) -> Status | None:
        return worst_status(self.statuses)

    @property
    def breached(self) -> bool:
        return Status.BREACH in self.statuses

    @property
    def near(self) -> bool:
        return any(finding.near for finding in self.findings)

    def as_json(self) -> JSON:
        return {
            "method": METHOD,
            "source": SOURCE,
            "alpha_split": ALPHA_SPLIT,
            "alpha": self.alpha,
            "window": self.window,
            "window_alpha": self.window_alpha,
            "comparisons": self.comparisons,
            "comparison_alpha": self.comparison_alpha,
            "min_rows": self.min_rows,
            "status": None if self.status is None else self.status.value,
            "breached": self.breached,
            "near": self.near,
            "rates": [finding.as_json() for finding in self.rates],
            "gaps": [finding.as_json() for finding in self.gaps],
            "drift": None if self.drift is None else self.drift.as_json(),
            "undeclared": list(self.undeclared),
        }


EMPTY: Final = WindowCounts()


def judge_look(
    policy: MonitorPolicy,
    counts: Mapping[str, WindowCounts],
    *,
    unknown_rows: int = 0,
    window: int | None = None,
) -> LookJudgement:
    """Judge ``counts`` (per group, cumulative over the window; groups without rows may be left out)
    under ``policy``. ``unknown_rows``: production rows whose group is unknown (drift only).
    ``window``: None when the counts run since promotion; k for the k-th tumbling window (1, 2, ...)."""
    spent = policy.alpha if window is None else window_alpha(policy.alpha, window)
    k = policy.comparisons
    alpha = spent / k
    rates = []
    for rate_limit in policy.rate_limits:
        prior = MixturePrior.tuned(rate_limit.limit, alpha=alpha, planned_trials=policy.planned_trials)
        for group in policy.limited_groups(rate_limit):
            window_counts = counts.get(group, EMPTY)
            successes, trials = window_counts.rate(rate_limit.metric)
            rates.append(
                judge_rate(
                    successes,
                    trials,
                    limit=rate_limit.limit,
                    bound=rate_limit.bound,
                    alpha=alpha,
                    rows=window_counts.rows,
                    min_rows=policy.min_rows,
                    prior=prior,
                    metric=rate_limit.metric,
                    group=group,
                )
            )
    gaps = []
    for gap_limit in policy.gap_limits:
        assert policy.reference is not None  # checked by the policy
        reference = counts.get(policy.reference, EMPTY)
        for group in policy.groups:
            if group == policy.reference:
                continue
            window_counts = counts.get(group, EMPTY)
            gaps.append(
                judge_gap(
                    window_counts.rate(gap_limit.metric),
                    reference.rate(gap_limit.metric),
                    limit=gap_limit.limit,
                    side=gap_limit.side,
                    alpha=alpha,
                    rows=(window_counts.rows, reference.rows),
                    min_rows=policy.min_rows,
                    metric=gap_limit.metric,
                    group_name=group,
                    reference_name=policy.reference,
                )
            )
    drift = None
    if policy.drift is not None:
        judged = drift_groups(policy.drift.training, policy.drift.training_unknown)
        drift = judge_drift(
            {group: window_counts.rows for group, window_counts in counts.items()},
            policy.drift.training,
            limit=policy.drift.limit,
            alpha=alpha * judged,
            production_unknown=unknown_rows,
            training_unknown=policy.drift.training_unknown,
            training_error=policy.drift.training_error,
            min_rows=policy.min_rows,
            planned_rows=policy.planned_trials,
        )
    undeclared = tuple(group for group, rows in counts.items() if group not in policy.groups and rows.rows)
    return LookJudgement(
        alpha=policy.alpha,
        window=window,
        window_alpha=spent,
        comparisons=k,
        comparison_alpha=alpha,
        min_rows=policy.min_rows,
        rates=tuple(rates),
        gaps=tuple(gaps),
        drift=drift,
        undeclared=undeclared,
    )
