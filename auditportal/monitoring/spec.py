"""What a deployment's monitor watches and how it judges: the ``spec`` of one monitor policy version
(docs/monitoring.md, "Monitor policy"), validated, compared and merged without Django.

The JSON form (``MonitorSpec.as_json``, stored in ``MonitorPolicy.spec``)::

    {"schema": 1,
     "limits": {"fnr": {"upper": 0.05, "lower": null, "gap": 0.05},
                "fpr": {"upper": null, "lower": null, "gap": 0.05},
                "selection_rate": {"upper": null, "lower": null, "gap": 0.1}},
     "reference": "largest", "share_shift": 0.1, "min_group_rows": 100, "min_batch_rows": 100,
     "alpha": 0.05, "horizon": 1000}

Every limit applies to every group of every sensitive attribute in production: ``upper`` and ``lower``
bound the group's rate, ``gap`` the absolute difference between the group's rate and the reference
group's. null is no limit. A limit is breached when the interval the judgement computes lies entirely
beyond it (the judging is the statistics', fairness/statistics; this module only says what is asked).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from auditportal.fairness.errors import UserError

SPEC_SCHEMA: Final = 1
# The rates a monitor watches per group, as the statistics name them. fnr is the false-rejection rate
# when the positive label is the favourable outcome (a qualified applicant refused).
METRICS: Final = ("fnr", "fpr", "selection_rate")
METRIC_LABELS: Final = {"fnr": "False-negative rate", "fpr": "False-positive rate", "selection_rate": "Selection rate"}
BOUNDS: Final = ("upper", "lower", "gap")
# The reference group of each attribute that gaps are measured against: the group with the most rows
# judged (as the fairness policy's rule).
REFERENCE_RULES: Final = ("largest",)
MAX_ROWS: Final = 2**31 - 1
MAX_HORIZON: Final = 1_000_000
_TOP: Final = ("limits", "reference", "share_shift", "min_group_rows", "min_batch_rows", "alpha", "horizon")


class SpecError(UserError):
    """A monitor policy that cannot be; ``field`` names the value (``limits.fnr.upper``, ``alpha``)."""


@dataclass(frozen=True)
class MetricLimits:
    """One metric's limits for every group; None: no such limit."""

    upper: float | None = None
    lower: float | None = None
    gap: float | None = None

    @property
    def watched(self) -> bool:
        return any(getattr(self, bound) is not None for bound in BOUNDS)

    def as_json(self) -> dict[str, float | None]:
        return {bound: getattr(self, bound) for bound in BOUNDS}


@dataclass(frozen=True)
class MonitorSpec:
    """One monitor policy version's values (the defaults are a new deployment's version 1)."""

    fnr: MetricLimits = MetricLimits(upper=0.05, gap=0.05)
    fpr: MetricLimits = MetricLimits(gap=0.05)
    selection_rate: MetricLimits = MetricLimits(gap=0.10)
    reference: str = "largest"
    # The largest allowed absolute change of a group's share of the rows, production against the
    # training data of the serving model; None: group shares are shown, not judged.
    share_shift: float | None = 0.10
    # A group with fewer rows in what is judged is not judged (it is shown, and counted on).
    min_group_rows: int = 100
    # A batch with fewer rows is kept and counted in the window, but not judged on its own.
    min_batch_rows: int = 100
    # The false-alarm rate over the horizon: a model that keeps to its limits raises an alarm in at most
    # alpha of deployments over ``horizon`` looks (one look per judged batch).
    alpha: float = 0.05
    horizon: int = 1000

    def limits(self, metric: str) -> MetricLimits:
        if metric not in METRICS:
            raise KeyError(metric)
        limits: MetricLimits = getattr(self, metric)
        return limits

    @property
    def watched(self) -> list[str]:
        """The metrics with at least one limit, in METRICS' order."""
        return [metric for metric in METRICS if self.limits(metric).watched]

    def as_json(self) -> dict[str, Any]:
        return {
            "schema": SPEC_SCHEMA,
            "limits": {metric: self.limits(metric).as_json() for metric in METRICS},
            "reference": self.reference,
            "share_shift": self.share_shift,
            "min_group_rows": self.min_group_rows,
            "min_batch_rows": self.min_batch_rows,
            "alpha": self.alpha,
            "horizon": self.horizon,
        }

    @classmethod
    def from_json(cls, data: object) -> MonitorSpec:
        """The spec ``data`` describes, every value checked; a SpecError names the first one wrong."""
        data = _mapping(data, "spec")
        unknown = sorted(set(data) - set(_TOP) - {"schema"})
        if unknown:
            raise SpecError(
                f"A monitor policy has no value {unknown[0][:60]!r}; its values are {', '.join(_TOP)}.",
                field=str(unknown[0])[:60],
            )
        if data.get("schema", SPEC_SCHEMA) != SPEC_SCHEMA:
            raise SpecError(f"The spec's schema is {SPEC_SCHEMA}, not {data['schema']!r}.", field="schema")
        defaults = cls()
        limits = _mapping(data.get("limits", {}), "limits")
        unknown = sorted(set(limits) - set(METRICS))
        if unknown:
            raise SpecError(
                f"A monitor watches {', '.join(METRICS)}, not {str(unknown[0])[:60]!r}.",
                field=f"limits.{str(unknown[0])[:60]}",
            )
        metrics = {
            metric: _metric_limits(limits[metric], metric) if metric in limits else defaults.limits(metric)
            for metric in METRICS
        }
        spec = cls(
            **metrics,
            reference=_reference(data.get("reference", defaults.reference)),
            share_shift=_rate(data.get("share_shift", defaults.share_shift), "share_shift", zero=False, none=True),
            min_group_rows=_rows(data.get("min_group_rows", defaults.min_group_rows), "min_group_rows"),
            min_batch_rows=_rows(data.get("min_batch_rows", defaults.min_batch_rows), "min_batch_rows"),
            alpha=_alpha(data.get("alpha", defaults.alpha)),
            horizon=_horizon(data.get("horizon", defaults.horizon)),
        )
        if not spec.watched and spec.share_shift is None:
            raise SpecError(
                "A monitor policy watches something: give at least one limit (a metric's upper, lower or gap, "
                "or the share shift).",
                field="limits",
            )
        return spec

    def changed(self, changes: object) -> MonitorSpec:
        """This spec with ``changes`` (a partial spec: the values given replace these; inside ``limits``,
        a metric's bounds given replace that metric's, the others are kept; null clears a limit)."""
        changes = _mapping(changes, "spec")
        merged = self.as_json()
        for key, value in changes.items():
            if key == "limits" and isinstance(value, Mapping):
                for metric, bounds in value.items():
                    if isinstance(bounds, Mapping) and isinstance(merged["limits"].get(metric), dict):
                        merged["limits"][metric] = {**merged["limits"][metric], **bounds}
                    else:
                        merged["limits"][metric] = bounds
            else:
                merged[key] = value
        return MonitorSpec.from_json(merged)


# What each loosening means, by the kind of value: the one list of what needs a second administrator
# (docs/monitoring.md, "Monitor policy"). Tightening, or keeping a value, applies at once.
LOOSENINGS: Final = {
    "upper": "a higher or no upper limit (higher rates pass)",
    "lower": "a lower or no lower limit (lower rates pass)",
    "gap": "a wider or no gap limit (larger gaps to the reference pass)",
    "reference": "another reference rule (not comparable, so treated as loosening)",
    "share_shift": "a wider or no share-shift limit (more drift passes)",
    "min_group_rows": "a larger minimum of rows per group (fewer groups judged)",
    "min_batch_rows": "a larger minimum of rows per batch (fewer batches judged)",
    "alpha": "a lower alpha (a breach needs stronger evidence)",
    "horizon": "another horizon (the false-alarm budget spread differently, so treated as loosening)",
}


def loosening_text(name: str) -> str:
    """What the loosening ``name`` (as ``spec_loosenings`` names it) means, in words."""
    return LOOSENINGS[name.rsplit(".", 1)[-1]]


def spec_loosenings(old: MonitorSpec, new: MonitorSpec) -> list[str]:
    """The values of ``new`` that loosen the monitor compared with ``old``: ``limits.<metric>.<bound>``
    and the top-level names, in the order of ``as_json``."""
    found = []
    for metric in METRICS:
        before, after = old.limits(metric), new.limits(metric)
        for bound in BOUNDS:
            was, now = getattr(before, bound), getattr(after, bound)
            higher_passes = bound != "lower"
            if was is not None and (now is None or (now > was if higher_passes else now < was)):
                found.append(f"limits.{metric}.{bound}")
    if new.reference != old.reference:
        found.append("reference")
    if old.share_shift is not None and (new.share_shift is None or new.share_shift > old.share_shift):
        found.append("share_shift")
    for name in ("min_group_rows", "min_batch_rows"):
        if getattr(new, name) > getattr(old, name):
            found.append(name)
    if new.alpha < old.alpha:
        found.append("alpha")
    if new.horizon != old.horizon:
        found.append("horizon")
    return found


def _mapping(value: object, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise SpecError(f"The {field.replace('_', ' ')} is a JSON object, not {_kind(value)}.", field=field)
    return value


def _metric_limits(value: object, metric: str) -> MetricLimits:
    bounds = _mapping(value, f"limits.{metric}")
    unknown = sorted(set(bounds) - set(BOUNDS))
    if unknown:
        raise SpecError(
            f"A metric's limits are {', '.join(BOUNDS)}, not {str(unknown[0])[:60]!r}.",
            field=f"limits.{metric}.{str(unknown[0])[:60]}",
        )
    upper = _rate(bounds.get("upper"), f"limits.{metric}.upper", zero=True, none=True)
    lower = _rate(bounds.get("lower"), f"limits.{metric}.lower", zero=True, none=True)
    gap = _rate(bounds.get("gap"), f"limits.{metric}.gap", zero=False, none=True)
    if upper is not None and lower is not None and not lower < upper:
        raise SpecError(
            f"The lower limit of {metric} ({lower:g}) must be below its upper limit ({upper:g}).",
            field=f"limits.{metric}.lower",
        )
    return MetricLimits(upper=upper, lower=lower, gap=gap)


def _rate(value: object, field: str, *, zero: bool, none: bool) -> float | None:
    if value is None and none:
        return None
    if not isinstance(value, int | float) or not _number(value) or value > 1 or value < 0 or (value == 0 and not zero):
        low = "at least 0" if zero else "above 0"
        raise SpecError(f"The {_words(field)} is a rate, {low} and at most 1, or null, not {value!r}.", field=field)
    return float(value)


def _alpha(value: object) -> float:
    if not isinstance(value, int | float) or not _number(value) or not 0 < value <= 0.5:
        raise SpecError(f"Alpha is above 0 and at most 0.5, not {value!r}.", field="alpha")
    return float(value)


def _rows(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ROWS:
        raise SpecError(f"The {_words(field)} is a whole number from 1 to {MAX_ROWS}, not {value!r}.", field=field)
    return value


def _horizon(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_HORIZON:
        raise SpecError(
            f"The horizon is a whole number of looks from 1 to {MAX_HORIZON}, not {value!r}.", field="horizon"
        )
    return value


def _reference(value: object) -> str:
    if value not in REFERENCE_RULES:
        raise SpecError(
            f"The reference rule is one of {', '.join(REFERENCE_RULES)}, not {str(value)[:60]!r}.", field="reference"
        )
    return str(value)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _words(field: str) -> str:
    parts = field.split(".")
    if parts[0] == "limits" and len(parts) == 3:
        return f"{parts[2]} limit of {parts[1]}"
    return field.replace("_", " ")


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "a list"
    return "text" if isinstance(value, str) else type(value).__name__
