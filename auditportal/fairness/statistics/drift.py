"""Group-share drift: the production group mix against the training data of the approved model.

Per group of the training data (and the rows whose group is unknown, when the training data had
some), the production share is watched with a confidence sequence (:mod:`.sequential`: the
beta-binomial mixture, its prior centred on the training share, which is known before production
starts) over repeated looks, at ``alpha / G`` for G judged groups (Bonferroni). The shift is production
share minus training share; a breach is confirmed when its interval lies entirely beyond
``± limit``, "within" when entirely inside, otherwise "watching".

The training share's own sampling error: with ``training_error`` (the default) the training share's
fixed-sample interval (:func:`stats.proportion_interval`, Wilson's or in a small cell Clopper-Pearson's;
the training data does not grow, so one interval is enough) takes half of the group's alpha and the
production sequence the other half, and the shift's interval is ``[Lp - Ut, Up - Lt]`` (a union
bound). Without it the training share is taken as exact, which is right for training sets far larger
than the production window, and the production sequence gets the group's whole alpha.

A group the training data never had (no rows there), or unknown groups when the training data had
none, is :attr:`Status.UNSEEN` as soon as production has one row of it: flagged as its own finding,
never dropped, never judged against a share of 0 (the model learned nothing about it; a person
decides). Such rows still count in every production share's denominator, so traffic moving to unseen
groups also shows as the seen groups' shares falling.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR
from typing import Final

import numpy as np

from auditportal.fairness.statistics import stats
from auditportal.fairness.statistics.sequential import (
    DEFAULT_PLANNED_TRIALS,
    JSON,
    METHOD,
    SOURCE,
    MixturePrior,
    MonitorPolicyError,
    SequenceInterval,
    Status,
    confidence_sequence,
    rounded,
    worst_status,
)

DRIFT_METHOD: Final = (
    "per-group share: " + METHOD + " on the production share, against the training share's "
    "Wilson/Clopper-Pearson interval; Bonferroni over the training groups"
)


@dataclass(frozen=True)
class ShareFinding:
    """One group's production share against its training share at one look. ``group`` is None for
    the rows whose group is unknown (``unknown`` True). ``shift`` is production minus training share,
    ``[low, high]`` its interval; ``margin``: how far its near end still is from ``± limit`` (0 or
    less once breached); ``near``: watching while the observed shift is already beyond the limit."""

    group: str | None
    unknown: bool
    status: Status
    production_rows: int
    production_total: int
    training_rows: int
    training_total: int
    production: SequenceInterval
    training_low: float
    training_high: float
    low: float | None
    high: float | None
    alpha: float
    margin: float | None
    near: bool

    @property
    def production_share(self) -> float | None:
        return self.production.estimate

    @property
    def training_share(self) -> float | None:
        return self.training_rows / self.training_total if self.training_total else None

    @property
    def shift(self) -> float | None:
        production, training = self.production_share, self.training_share
        return None if production is None or training is None else production - training

    def as_json(self) -> JSON:
        return {
            "group": self.group,
            "unknown": self.unknown,
            "status": self.status.value,
            "production_rows": self.production_rows,
            "production_total": self.production_total,
            "training_rows": self.training_rows,
            "training_total": self.training_total,
            "production_share": rounded(self.production_share),
            "training_share": rounded(self.training_share),
            "shift": rounded(self.shift),
            "low": rounded(self.low, ROUND_FLOOR),
            "high": rounded(self.high, ROUND_CEILING),
            "alpha": self.alpha,
            "margin": rounded(self.margin),
            "near": self.near,
            "production": self.production.as_json(),
            "training_low": rounded(self.training_low, ROUND_FLOOR),
            "training_high": rounded(self.training_high, ROUND_CEILING),
        }


@dataclass(frozen=True)
class DriftJudgement:
    """Every group's share finding at one look; ``groups_judged`` is the K of the Bonferroni split."""

    limit: float
    alpha: float
    groups_judged: int
    training_error: bool
    min_rows: int
    production_total: int
    training_total: int
    findings: tuple[ShareFinding, ...]

    @property
    def status(self) -> Status | None:
        return worst_status(tuple(finding.status for finding in self.findings))

    @property
    def breaches(self) -> tuple[ShareFinding, ...]:
        return tuple(finding for finding in self.findings if finding.status is Status.BREACH)

    @property
    def unseen(self) -> tuple[ShareFinding, ...]:
        return tuple(finding for finding in self.findings if finding.status is Status.UNSEEN)

    def as_json(self) -> JSON:
        return {
            "method": DRIFT_METHOD,
            "source": SOURCE,
            "limit": self.limit,
            "alpha": self.alpha,
            "groups_judged": self.groups_judged,
            "group_alpha": self.alpha / self.groups_judged if self.groups_judged else None,
            "training_error": self.training_error,
            "min_rows": self.min_rows,
            "production_total": self.production_total,
            "training_total": self.training_total,
            "status": None if self.status is None else self.status.value,
            "findings": [finding.as_json() for finding in self.findings],
        }


def drift_groups(training: Mapping[str, int], training_unknown: int = 0) -> int:
    """How many shares a drift check judges: the training groups with rows, and the unknown rows when
    the training data had some. Fixed by the training data, so it is known before any production row."""
    return sum(1 for rows in training.values() if rows > 0) + (1 if training_unknown > 0 else 0)


def judge_drift(
    production: Mapping[str, int],
    training: Mapping[str, int],
    *,
    limit: float,
    alpha: float,
    production_unknown: int = 0,
    training_unknown: int = 0,
    training_error: bool = True,
    min_rows: int = 0,
    planned_rows: int = DEFAULT_PLANNED_TRIALS,
) -> DriftJudgement:
    """Production group counts (cumulative over the judged window) against the training counts of
    the approved model's dataset version, at level ``1 - alpha`` over all judged groups and looks.

    ``limit``: the largest allowed shift of a share, in share units (0.05 = five percentage points).
    Fewer than ``min_rows`` production rows in all: every judged group is TOO_FEW (unseen groups are
    still flagged). Findings come in training order, then unseen groups in production order, then
    the unknown rows.
    """
    if not 0 < limit < 1:
        raise MonitorPolicyError(f"a drift limit must lie strictly between 0 and 1, not {limit}", field="drift_limit")
    if not 0 < alpha < 1:
        raise MonitorPolicyError(f"alpha must be between 0 and 1 (exclusive), not {alpha}", field="alpha")
    for name, counts in (("production", production), ("training", training)):
        for group, rows in counts.items():
            if rows < 0:
                raise ValueError(f"{name} rows of group {group!r} must not be negative, not {rows}")
    if production_unknown < 0 or training_unknown < 0:
        raise ValueError("unknown rows must not be negative")
    production_total = sum(production.values()) + production_unknown
    training_total = sum(training.values()) + training_unknown
    judged = drift_groups(training, training_unknown)
    group_alpha = alpha / judged if judged else alpha
    few = production_total < min_rows or production_total == 0

    def finding(group: str | None, production_rows: int, training_rows: int) -> ShareFinding:
        unseen = training_rows == 0
        production_alpha = group_alpha / 2 if training_error and not unseen else group_alpha
        training_share = training_rows / training_total if training_total else 0.0
        prior = (
            MixturePrior.tuned(training_share, alpha=production_alpha, planned_trials=planned_rows)
            if 0 < training_share < 1
            else MixturePrior(0.5, 0.5)
        )
        interval = confidence_sequence(production_rows, production_total, alpha=production_alpha, prior=prior)
        if unseen:
            return ShareFinding(
                group=group,
                unknown=group is None,
                status=Status.UNSEEN,
                production_rows=production_rows,
                production_total=production_total,
                training_rows=0,
                training_total=training_total,
                production=interval,
                training_low=0.0,
                training_high=0.0,
                low=None,
                high=None,
                alpha=group_alpha,
                margin=None,
                near=False,
            )
        if training_error:
            training_low, training_high = (
                float(value[()])
                for value in stats.proportion_interval(
                    np.array(training_rows, np.int64), np.array(training_total, np.int64), group_alpha / 2
                )
            )
        else:
            training_low = training_high = training_share
        low = interval.low - training_high
        high = interval.high - training_low
        margin = min(limit - low, high + limit)
        shift = None if interval.estimate is None else interval.estimate - training_share
        if few:
            status = Status.TOO_FEW
        elif margin < 0:
            status = Status.BREACH
        elif -limit < low and high < limit:
            status = Status.WITHIN
        else:
            status = Status.WATCHING
        return ShareFinding(
            group=group,
            unknown=group is None,
            status=status,
            production_rows=production_rows,
            production_total=production_total,
            training_rows=training_rows,
            training_total=training_total,
            production=interval,
            training_low=training_low,
            training_high=training_high,
            low=low,
            high=high,
            alpha=group_alpha,
            margin=margin,
            near=status is Status.WATCHING and shift is not None and math.fabs(shift) > limit,
        )

    findings = [
        finding(group, int(production.get(group, 0)), int(rows)) for group, rows in training.items() if rows > 0
    ]
    findings += [
        finding(group, int(rows), 0) for group, rows in production.items() if rows > 0 and training.get(group, 0) == 0
    ]
    if training_unknown > 0 or production_unknown > 0:
        findings.append(finding(None, production_unknown, training_unknown))
    return DriftJudgement(
        limit=limit,
        alpha=alpha,
        groups_judged=judged,
        training_error=training_error,
        min_rows=min_rows,
        production_total=production_total,
        training_total=training_total,
        findings=tuple(findings),
    )
