"""When the deployment page warns that a limit is near (docs/monitoring.md, "The deployment page").

One rule, from the latest look's judgements (``LookJudgement.as_json()`` per attribute): a judged
comparison (not "too few") is **near** its limit when the observed value has used up at least
``1 - NEAR_FRACTION`` of the room the limit leaves, i.e. when its distance to the limit on the allowed
side is at most ``NEAR_FRACTION`` of the limit:

- a rate with an upper limit L: estimate >= (1 - NEAR_FRACTION) * L (FNR limit 5%: from 4%);
- a rate with a lower limit L: estimate <= (1 + NEAR_FRACTION) * L;
- a gap with limit L: |difference| >= (1 - NEAR_FRACTION) * L on a side the limit bounds;
- a group share with drift limit L: |shift| >= (1 - NEAR_FRACTION) * L.

A comparison already beyond its limit is near too (still "watching" until the interval confirms it);
a confirmed one is a breach. A group the training data never had is always an alert ("unseen").
Django-free: plain JSON in, plain data out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from auditportal.monitoring.spec import METRIC_LABELS

NEAR_FRACTION: Final = 0.2
# Rates are stored rounded (fairness/statistics/sequential.rounded): 0.04 must count as 80% of 0.05.
_SLACK: Final = 1e-9


@dataclass(frozen=True)
class Alert:
    """``level`` breach (confirmed), near (the rule above) or unseen (a group new to production)."""

    level: str
    attribute: str
    kind: str  # rate, gap, drift
    metric: str  # fnr, fpr, selection_rate; "share" for drift
    group: str
    value: float | None
    limit: float | None
    low: float | None
    high: float | None
    status: str
    reference: str = ""
    bound: str = ""

    @property
    def metric_label(self) -> str:
        return METRIC_LABELS.get(self.metric, self.metric)


def near(value: float | None, limit: float | None, *, bound: str = "at_most") -> bool:
    """The rule: ``value`` within NEAR_FRACTION of ``limit`` on its allowed side, or beyond it."""
    if value is None or limit is None:
        return False
    if bound == "at_least":
        return value <= limit * (1 + NEAR_FRACTION) + _SLACK
    return value >= limit * (1 - NEAR_FRACTION) - _SLACK


def _gap_near(difference: float | None, limit: float | None, side: str) -> bool:
    if difference is None:
        return False
    if side == "above":
        return near(difference, limit)
    if side == "below":
        return near(-difference, limit)
    return near(abs(difference), limit)


def look_alerts(judgements: Mapping[str, Mapping[str, Any]]) -> list[Alert]:
    """Every alert of one look, breaches first, then unseen groups, then near limits."""
    alerts = list(_alerts(judgements))
    order = {"breach": 0, "unseen": 1, "near": 2}
    return sorted(alerts, key=lambda alert: order[alert.level])


def _level(status: str, is_near: bool) -> str | None:
    if status == "breach":
        return "breach"
    if status == "too_few":
        return None
    return "near" if is_near else None


def _alerts(judgements: Mapping[str, Mapping[str, Any]]) -> Iterator[Alert]:
    for attribute, judgement in judgements.items():
        for finding in judgement.get("rates") or ():
            bound = str(finding.get("bound", "at_most"))
            level = _level(str(finding.get("status")), near(finding.get("estimate"), finding.get("limit"), bound=bound))
            if level is not None:
                yield Alert(
                    level=level,
                    attribute=attribute,
                    kind="rate",
                    metric=str(finding.get("metric")),
                    group=str(finding.get("group")),
                    value=finding.get("estimate"),
                    limit=finding.get("limit"),
                    low=finding.get("low"),
                    high=finding.get("high"),
                    status=str(finding.get("status")),
                    bound=bound,
                )
        for finding in judgement.get("gaps") or ():
            is_near = _gap_near(finding.get("difference"), finding.get("limit"), str(finding.get("side", "either")))
            level = _level(str(finding.get("status")), is_near)
            if level is not None:
                yield Alert(
                    level=level,
                    attribute=attribute,
                    kind="gap",
                    metric=str(finding.get("metric")),
                    group=str(finding.get("group")),
                    reference=str(finding.get("reference")),
                    value=finding.get("difference"),
                    limit=finding.get("limit"),
                    low=finding.get("low"),
                    high=finding.get("high"),
                    status=str(finding.get("status")),
                )
        drift = judgement.get("drift") or {}
        for finding in drift.get("findings") or ():
            status = str(finding.get("status"))
            shift = finding.get("shift")
            share_level = (
                "unseen"
                if status == "unseen"
                else _level(status, near(None if shift is None else abs(shift), drift.get("limit")))
            )
            if share_level is not None:
                yield Alert(
                    level=share_level,
                    attribute=attribute,
                    kind="drift",
                    metric="share",
                    group="unknown" if finding.get("unknown") else str(finding.get("group")),
                    value=finding.get("production_share") if status == "unseen" else shift,
                    limit=drift.get("limit"),
                    low=finding.get("low"),
                    high=finding.get("high"),
                    status=status,
                )
