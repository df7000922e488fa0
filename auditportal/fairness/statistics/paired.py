"""Two models' predictions on the same rows, compared per group: champion (A) against challenger (B).

Pure numpy and the standard library (no Django, no scipy or statsmodels: the tests hold the results
to statsmodels). docs/comparisons.md explains the method for readers.

Input, per group: the eight joint counts of (label, A's prediction, B's prediction), shaped
``(G, 8)`` with cell index ``4 * label + 2 * a + b``. Every metric is a proportion of rows in the
metric's denominator that are "successes"; because both models predict on the same rows, each
metric gives a *paired* 2x2 table per group::

                  B success   B failure
    A success        n11         n10
    A failure        n01         n00

* TPR: label-positive rows, success = predicted positive; FNR: the same rows, success = predicted
  negative; FPR: label-negative rows, success = predicted positive; selection rate: every row,
  success = predicted positive; accuracy: every row, success = prediction equals the label.
* Each model's rate and its interval: :func:`stats.proportion_interval` (Wilson, Clopper-Pearson in a
  small cell), at ``1 - alpha``.
* The paired difference ``d = p_B - p_A = (n01 - n10) / n`` and its interval: Newcombe's method 10 for
  paired proportions (Newcombe RG, "Improved confidence intervals for the difference between binomial
  proportions based on paired data", Statistics in Medicine 17:2635-2650, 1998): the two marginal
  rates' Wilson intervals combined with the phi correlation of the paired table (set to 0 where it is
  undefined). An unpaired interval would be wrong here: the two rates are computed on the same rows.
* The p-value of "no difference": McNemar's test on the discordant pairs. Exact (two-sided binomial,
  ``min(1, 2 P[Bin(n10 + n01, 1/2) <= min(n10, n01)])``) when there are fewer than
  ``EXACT_DISCORDANT_BELOW`` discordant pairs, otherwise the chi-square statistic with Edwards'
  continuity correction ``(|n10 - n01| - 1)^2 / (n10 + n01)`` (statsmodels' ``mcnemar`` defaults).
* Familywise, as the audits (:mod:`stats`, :mod:`judge`): a family is one metric over one attribute's
  k groups with a defined difference; its intervals are at ``1 - alpha / k`` (Bonferroni), its p-values
  Holm-adjusted. A group's verdict over the F judged metrics is held at alpha as the audit's headline
  is (:func:`stats.headline_verdict`): WORSE (or BETTER) needs an interval beyond the tolerance at
  ``1 - alpha / (F k)`` (:func:`stats.headline_alpha`), EQUIVALENT needs every metric within the
  tolerance at its family's level (an intersection-union test).
* Verdict per group and metric against the policy's tolerance delta (the interval ``[L, U]`` of
  ``B - A``): EQUIVALENT when it lies within ``[-delta, delta]``; BETTER when it lies entirely beyond
  delta in the metric's good direction (higher TPR and accuracy, lower FPR and FNR), WORSE in the other;
  the selection rate has no good direction: DIFFERENT when beyond; INCONCLUSIVE otherwise.
* Rows needed for an INCONCLUSIVE comparison: Connor's paired sample size (Connor RJ, "Sample size
  for testing differences in proportions for the paired-sample design", Biometrics 43:207-211, 1987),
  which uses the discordant share ``psi = (n10 + n01) / n``: the difference's variance per row is
  ``psi - d^2``. As the audits plan, the interval must clear delta (not 0) at the planning difference
  (:func:`stats.planning_difference`) with probability ``power``; :func:`stats.scale_needed` solves it
  (one-sided towards BETTER/WORSE, two one-sided tests towards EQUIVALENT). With delta 0 and the gap
  beyond it this is Connor's formula with the alternative's variance in both terms,
  ``n = (z_{1-a/2} + z_{1-b})^2 (psi - d^2) / d^2``. The answer is in the metric's denominator
  (positives for TPR/FNR, negatives for FPR, rows otherwise), at the observed discordant share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from auditportal.fairness.errors import UserError
from auditportal.fairness.statistics import stats
from auditportal.fairness.statistics.distributions import normal_two_sided_p

JSON = dict[str, Any]
Counts = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]

METRICS: Final = ("tpr", "fpr", "fnr", "selection_rate", "accuracy")
METRIC_NAMES: Final = {
    "tpr": "true positive rate",
    "fpr": "false positive rate",
    "fnr": "false negative rate",
    "selection_rate": "selection rate",
    "accuracy": "accuracy",
}
# +1: higher is better for the challenger; -1: lower is; 0: neither (a change, not an improvement).
DIRECTION: Final = {"tpr": 1, "fpr": -1, "fnr": -1, "selection_rate": 0, "accuracy": 1}
DENOMINATOR: Final = {
    "tpr": "positives",
    "fnr": "positives",
    "fpr": "negatives",
    "selection_rate": "rows",
    "accuracy": "rows",
}
BETTER: Final = "BETTER"
WORSE: Final = "WORSE"
DIFFERENT: Final = "DIFFERENT"
EQUIVALENT: Final = "EQUIVALENT"
INCONCLUSIVE: Final = "INCONCLUSIVE"
# From best to worst: a comparison's verdict is its groups' worst.
VERDICT_ORDER: Final = (BETTER, EQUIVALENT, DIFFERENT, INCONCLUSIVE, WORSE)
# (value, label) pairs, for choice fields and the API schema's PairedVerdictEnum.
VERDICT_CHOICES: Final = [(verdict, verdict.title()) for verdict in VERDICT_ORDER]
EXACT_DISCORDANT_BELOW: Final = 25
SCHEMA_VERSION: Final = 1
METHODS: Final = {
    "difference_interval": "Newcombe (1998) method 10 for paired proportions",
    "p_value": f"McNemar: exact binomial below {EXACT_DISCORDANT_BELOW} discordant pairs, else chi-square "
    "with continuity correction; Holm within each metric's family",
    "familywise": "Bonferroni over each metric's groups (1 - alpha/k); group verdicts over the metrics at "
    "1 - alpha/(F k) as the audit headline",
    "rows_needed": "Connor (1987) paired sample size from the discordant share, clearing the tolerance",
}


class PairedInputError(UserError):
    """What the comparison's caller got wrong; ``field`` names the parameter."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field)


@dataclass(frozen=True)
class PairedTable:
    """Paired 2x2 tables, one per group: successes of A and B among the same ``n`` rows."""

    both: Counts  # n11
    only_a: Counts  # n10
    only_b: Counts  # n01
    neither: Counts  # n00

    @property
    def n(self) -> Counts:
        return self.both + self.only_a + self.only_b + self.neither


def joint_cells(label: npt.ArrayLike, a: npt.ArrayLike, b: npt.ArrayLike, groups: npt.ArrayLike, size: int) -> Counts:
    """The ``(size, 8)`` joint counts from row arrays (0/1 label and predictions, group codes 0..size-1;
    a code outside that range, an unknown group, is not counted)."""
    codes = np.asarray(groups, dtype=np.int64)
    cell = 4 * np.asarray(label, np.int64) + 2 * np.asarray(a, np.int64) + np.asarray(b, np.int64)
    known = (codes >= 0) & (codes < size)
    flat = np.bincount(codes[known] * 8 + cell[known], minlength=size * 8)
    return flat.reshape(size, 8).astype(np.int64)


def paired_table(cells: Counts, metric: str) -> PairedTable:
    """The paired table of ``metric`` per group from the ``(G, 8)`` joint cells."""
    c = np.asarray(cells, dtype=np.int64)

    def at(label: int, a: int, b: int) -> Counts:
        return c[..., 4 * label + 2 * a + b]

    if metric in ("tpr", "fnr", "fpr"):
        label = 0 if metric == "fpr" else 1
        yes = 0 if metric == "fnr" else 1
        no = 1 - yes
        return PairedTable(at(label, yes, yes), at(label, yes, no), at(label, no, yes), at(label, no, no))
    if metric == "selection_rate":
        return PairedTable(
            at(0, 1, 1) + at(1, 1, 1), at(0, 1, 0) + at(1, 1, 0), at(0, 0, 1) + at(1, 0, 1), at(0, 0, 0) + at(1, 0, 0)
        )
    if metric == "accuracy":
        # Correct: a prediction equal to the label (1 when the label is 1, 0 when it is 0).
        return PairedTable(
            at(1, 1, 1) + at(0, 0, 0), at(1, 1, 0) + at(0, 0, 1), at(1, 0, 1) + at(0, 1, 0), at(1, 0, 0) + at(0, 1, 1)
        )
    raise PairedInputError("metrics", f"compare one or more of {', '.join(METRICS)}, not {metric!r}")


def mcnemar_p(only_a: npt.ArrayLike, only_b: npt.ArrayLike, *, exact: bool | None = None) -> Floats:
    """McNemar's two-sided p-value from the discordant counts; NaN without discordant pairs.

    ``exact``: None chooses per cell (exact below ``EXACT_DISCORDANT_BELOW`` discordant pairs);
    True the binomial test, False the chi-square with continuity correction (as statsmodels).
    """
    b = np.asarray(only_a, dtype=np.int64)
    c = np.asarray(only_b, dtype=np.int64)
    b, c = np.broadcast_arrays(b, c)
    discordant = b + c
    use_exact = discordant < EXACT_DISCORDANT_BELOW if exact is None else np.full(b.shape, exact)
    with np.errstate(divide="ignore", invalid="ignore"):
        statistic = (np.abs(b - c) - 1.0) ** 2 / discordant
    asymptotic = normal_two_sided_p(np.sqrt(statistic))
    exact_p = np.vectorize(_binomial_two_sided, otypes=[np.float64])(np.minimum(b, c), discordant)
    p = np.where(use_exact, exact_p, asymptotic)
    return np.where(discordant > 0, p, np.nan).astype(np.float64)


def _binomial_two_sided(smaller: int, n: int) -> float:
    """``min(1, 2 P[Bin(n, 1/2) <= smaller])`` in log space (exact for any n)."""
    if n <= 0:
        return math.nan
    log_half = n * math.log(0.5)
    terms = [math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + log_half for k in range(smaller + 1)]
    top = max(terms)
    tail = math.exp(top) * sum(math.exp(term - top) for term in terms)
    return min(1.0, 2.0 * tail)


def newcombe_interval(table: PairedTable, alpha: float | Floats) -> tuple[Floats, Floats]:
    """Newcombe's method 10 interval for ``p_B - p_A`` at ``1 - alpha`` (NaN where n is 0)."""
    n = table.n
    with np.errstate(divide="ignore", invalid="ignore"):
        p_a = (table.both + table.only_a) / n
        p_b = (table.both + table.only_b) / n
        low_a, high_a = stats.wilson_interval(table.both + table.only_a, n, alpha)
        low_b, high_b = stats.wilson_interval(table.both + table.only_b, n, alpha)
        e = (table.both + table.only_a).astype(np.float64)  # A's successes
        f = (table.only_b + table.neither).astype(np.float64)  # A's failures
        g = (table.both + table.only_b).astype(np.float64)  # B's successes
        h = (table.only_a + table.neither).astype(np.float64)  # B's failures
        denominator = np.sqrt(e * f * g * h)
        phi = np.where(
            denominator > 0,
            (table.both.astype(np.float64) * table.neither - table.only_a.astype(np.float64) * table.only_b)
            / denominator,
            0.0,
        )
        # theta = p_B - p_A; B plays Newcombe's first proportion.
        theta = p_b - p_a
        below = np.sqrt(
            np.maximum((p_b - low_b) ** 2 - 2 * phi * (p_b - low_b) * (high_a - p_a) + (high_a - p_a) ** 2, 0.0)
        )
        above = np.sqrt(
            np.maximum((high_b - p_b) ** 2 - 2 * phi * (high_b - p_b) * (p_a - low_a) + (p_a - low_a) ** 2, 0.0)
        )
    low = np.where(n > 0, np.maximum(theta - below, -1.0), np.nan)
    high = np.where(n > 0, np.minimum(theta + above, 1.0), np.nan)
    return low.astype(np.float64), high.astype(np.float64)


def verdict_of(low: Floats, high: Floats, *, tolerance: float, direction: int) -> list[str | None]:
    """Per entry: EQUIVALENT, BETTER, WORSE, DIFFERENT or INCONCLUSIVE (None where undefined)."""
    out: list[str | None] = []
    for lo, hi in zip(np.atleast_1d(low).tolist(), np.atleast_1d(high).tolist(), strict=True):
        if math.isnan(lo) or math.isnan(hi):
            out.append(None)
        elif lo >= -tolerance and hi <= tolerance:
            out.append(EQUIVALENT)
        elif lo > tolerance or hi < -tolerance:
            side = 1 if lo > tolerance else -1
            out.append(DIFFERENT if direction == 0 else (BETTER if side == direction else WORSE))
        else:
            out.append(INCONCLUSIVE)
    return out


def rows_needed(
    table: PairedTable, *, tolerance: float, alpha: float | Floats, power: float
) -> tuple[Floats, Floats, Floats]:
    """Connor's (1987) paired sample size for the interval at ``1 - alpha`` to decide against the
    tolerance with probability ``power``: ``(rows needed, planning difference, discordant share)``
    per group, in the metric's denominator; NaN where no size decides (the planned gap at delta, or
    no rows)."""
    n = table.n.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = (table.only_b - table.only_a) / n
        psi = (table.only_a + table.only_b) / n
        planned = stats.planning_difference(observed, tolerance)
        # At least one discordant pair's worth, and never below the planned gap (psi >= |d| always).
        planned_psi = np.maximum(np.maximum(psi, np.abs(planned)), 1.0 / n)
        variance = np.maximum(planned_psi - planned**2, 1.0 / n**2)
        standard_error = np.sqrt(variance / n)
    scale = stats.scale_needed(
        planned=planned,
        standard_error=standard_error,
        tolerance=tolerance,
        alpha=alpha,
        power=power,
        where=n > 0,
    )
    needed = np.ceil(scale * n)
    return needed.astype(np.float64), planned.astype(np.float64), psi.astype(np.float64)


def compare_groups(
    cells: Counts,
    groups: Sequence[str],
    *,
    tolerance: float,
    alpha: float,
    power: float = stats.DEFAULT_POWER,
    metrics: Sequence[str] = METRICS,
    unknown: int = 0,
) -> JSON:
    """One attribute's comparison: per metric and group each model's rate, the paired difference and
    its interval, McNemar's p-value (Holm-adjusted), the verdict and the rows needed; per group the
    verdict over the metrics. Plain JSON values (NaN as None)."""
    _check_levels(tolerance=tolerance, alpha=alpha, power=power, metrics=metrics)
    cells = np.asarray(cells, dtype=np.int64).reshape(len(groups), 8)
    families = len(metrics)
    result_metrics: JSON = {}
    strict_verdicts: dict[str, list[str | None]] = {}
    family_verdicts: dict[str, list[str | None]] = {}
    for metric in metrics:
        table = paired_table(cells, metric)
        n = table.n
        defined = n > 0
        k = max(int(np.count_nonzero(defined)), 1)
        family_alpha = alpha / k
        low, high = newcombe_interval(table, family_alpha)
        strict_low, strict_high = newcombe_interval(table, stats.headline_alpha(alpha, families) / k)
        with np.errstate(divide="ignore", invalid="ignore"):
            rate_a = (table.both + table.only_a) / n
            rate_b = (table.both + table.only_b) / n
        a_low, a_high = stats.proportion_interval(table.both + table.only_a, n, alpha)
        b_low, b_high = stats.proportion_interval(table.both + table.only_b, n, alpha)
        p = mcnemar_p(table.only_a, table.only_b)
        p_exact = (table.only_a + table.only_b) < EXACT_DISCORDANT_BELOW
        adjusted = stats.holm(np.where(defined, p, np.nan))
        verdicts = verdict_of(low, high, tolerance=tolerance, direction=DIRECTION[metric])
        family_verdicts[metric] = verdicts
        strict_verdicts[metric] = verdict_of(strict_low, strict_high, tolerance=tolerance, direction=DIRECTION[metric])
        needed, planned, psi = rows_needed(table, tolerance=tolerance, alpha=family_alpha, power=power)
        rows: JSON = {}
        for index, group in enumerate(groups):
            verdict = verdicts[index]
            rows[group] = {
                "n": int(n[index]),
                "champion": _rate(rate_a[index], a_low[index], a_high[index]),
                "challenger": _rate(rate_b[index], b_low[index], b_high[index]),
                "table": {
                    "both": int(table.both[index]),
                    "only_champion": int(table.only_a[index]),
                    "only_challenger": int(table.only_b[index]),
                    "neither": int(table.neither[index]),
                },
                "discordant_share": _number(psi[index]),
                "difference": _number(rate_b[index] - rate_a[index]),
                "low": _number(low[index]),
                "high": _number(high[index]),
                "level": 1 - family_alpha,
                "p_value": _number(p[index]),
                "p_exact": bool(p_exact[index]),
                "p_adjusted": _number(adjusted[index]),
                "verdict": verdict,
                "rows_needed": _count(needed[index]) if verdict == INCONCLUSIVE else None,
                "planning_difference": _number(planned[index]) if verdict == INCONCLUSIVE else None,
            }
        result_metrics[metric] = {
            "name": METRIC_NAMES[metric],
            "direction": DIRECTION[metric],
            "denominator": DENOMINATOR[metric],
            "groups": rows,
        }
    group_verdicts = {
        group: _group_verdict(
            [family_verdicts[m][index] for m in metrics], [strict_verdicts[m][index] for m in metrics]
        )
        for index, group in enumerate(groups)
    }
    return {
        "groups": list(groups),
        "unknown": int(unknown),
        "metrics": result_metrics,
        "verdicts": group_verdicts,
        "verdict": worst([v for v in group_verdicts.values() if v is not None]),
    }


def compare(
    tables: Mapping[str, tuple[Sequence[str], Counts, int]],
    *,
    tolerance: float,
    alpha: float,
    power: float = stats.DEFAULT_POWER,
    metrics: Sequence[str] = METRICS,
) -> JSON:
    """Every attribute's comparison (``tables``: name -> (groups, (G, 8) cells, unknown rows)) and the
    comparison's verdict: the worst of its groups'."""
    attributes = {
        name: compare_groups(cells, groups, tolerance=tolerance, alpha=alpha, power=power, metrics=metrics, unknown=u)
        for name, (groups, cells, u) in tables.items()
    }
    return {
        "schema_version": SCHEMA_VERSION,
        "tolerance": tolerance,
        "alpha": alpha,
        "power": power,
        "metrics": list(metrics),
        "methods": dict(METHODS),
        "verdict": worst([a["verdict"] for a in attributes.values() if a["verdict"] is not None]),
        "attributes": attributes,
    }


def worst(verdicts: Sequence[str]) -> str | None:
    return max(verdicts, key=VERDICT_ORDER.index) if verdicts else None


def _group_verdict(family: Sequence[str | None], strict: Sequence[str | None]) -> str | None:
    """A group's verdict over the metrics, held at alpha (the audit headline's rule): WORSE or BETTER
    or DIFFERENT from the strict intervals, EQUIVALENT when every metric is at its family's level."""
    if all(v is None for v in family):
        return None
    if WORSE in strict:
        return WORSE
    settled = [f == EQUIVALENT or s in (BETTER, DIFFERENT) for f, s in zip(family, strict, strict=True)]
    if not all(settled):
        return INCONCLUSIVE
    if BETTER in strict:
        return BETTER
    return DIFFERENT if DIFFERENT in strict else EQUIVALENT


def _check_levels(*, tolerance: float, alpha: float, power: float, metrics: Sequence[str]) -> None:
    if not 0 <= tolerance < 1:
        raise PairedInputError("tolerance", f"the tolerance must be at least 0 and below 1, not {tolerance}")
    if not 0 < alpha < 1:
        raise PairedInputError("alpha", f"alpha must be between 0 and 1, not {alpha}")
    if not 0 < power < 1:
        raise PairedInputError("power", f"the power must be between 0 and 1, not {power}")
    unknown = [m for m in metrics if m not in METRICS]
    if unknown or not metrics:
        raise PairedInputError("metrics", f"compare one or more of {', '.join(METRICS)}, not {', '.join(unknown)}")


def _rate(value: float, low: float, high: float) -> JSON:
    return {"rate": _number(value), "low": _number(low), "high": _number(high)}


def _number(value: Any) -> float | None:
    number = float(value)
    return None if math.isnan(number) else number


def _count(value: Any) -> int | None:
    number = float(value)
    return None if math.isnan(number) or math.isinf(number) else int(number)
