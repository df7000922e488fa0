"""Sample-size-aware fairness statistics from per-group confusion counts.

Pure numpy and the standard library (no Django), so the prediction audit, the CLI, the API and the
per-trial verdicts share one implementation. The few distribution functions come from
:mod:`auditportal.fairness.statistics.distributions`, not scipy or statsmodels: those take about a second to
import, which every command-line audit would pay. Tests hold the results to statsmodels and scipy.

Every function takes counts shaped ``(..., G, 4)``: any leading batch axes (simulations, trials,
bootstrap draws) followed by one row per group with the cells ``(tp, fn, fp, tn)``. Results keep the
shape ``(..., G)``. Undefined values (a rate whose denominator is 0, a difference involving one) are
NaN, never an error; the JSON layer turns them into ``null``.

Methods, per metric and attribute (a "family" of k comparisons of every group against the reference):

* one proportion's interval (:func:`proportion_interval`): Wilson's score interval, or in a small cell
  (fewer than z**4 successes or failures, :func:`small_cell`) Clopper-Pearson's exact interval;
* rates: point estimate and that interval at ``1 - alpha``;
* difference (group minus reference): the MOVER interval from the two rates' intervals (Newcombe's
  hybrid score interval, method 10, where both are Wilson's) at the Bonferroni level ``1 - alpha / k``,
  k = comparisons with a defined difference;
* p-value: two-sided score test (pooled, Farrington-Manning at difference 0), or Fisher's exact
  test when any cell of the 2x2 table is below 5; Holm-adjusted within the family;
* ratio (group rate / reference rate): at the family's level ``1 - alpha / k``, at each end the wider
  of Katz's log bound ``exp(log(r) +- z sqrt(1/x_g - 1/n_g + 1/x_ref - 1/n_ref))`` and the MOVER-R
  bound from the two rates' intervals (Donner & Zou 2012). Katz alone puts its lower bound too high
  in small groups (log-skew: 5.7% false FAILs above 1.25 at n = 30 where 5% is allowed); MOVER alone
  its upper bound too low in the smallest. For Katz, when a cell of the pair's 2x2 table is 0 (no
  successes or no failures in either group), 0.5 is added to each of its four cells
  (Haldane-Anscombe: x + 0.5 of n + 1). The interval always holds the observed ratio (a group rate
  of 0 has a lower bound of 0). Undefined when the reference rate is 0. Four-fifths verdict on it:
  FAIL when the interval lies entirely below 0.8 or entirely above 1.25, PASS when it lies within
  [0.8, 1.25], otherwise INCONCLUSIVE;
* noise floor, per group: the familiar ``z sqrt(p(1-p)/n_g)``, z at the unadjusted ``1 - alpha/2``
  (1.96 at alpha 0.05), with the "plus four" rate ``p = (x + 2) / (n_g + 4)`` (Agresti-Coull's centre),
  so that a rate of 0 or 1 still has a floor. Beside it the two-sample floor at the family's z:
  ``z_{1-alpha/2k} sqrt(p(1-p)(1/n_g + 1/n_ref))``, p the pooled plus-four rate: the smallest observed
  gap the family's interval could tell from 0 (its half-width when both rates are equal);
* verdict against the tolerance delta: FAIL when the interval lies entirely beyond +-delta, PASS when
  it lies entirely within [-delta, delta], otherwise INCONCLUSIVE;
* sample size (``positives_needed``): for an INCONCLUSIVE comparison, how far the data would have to
  grow, the group and the reference together at their observed size ratio, for the interval at the
  comparison's own level (``level``) to decide with probability ``power`` at a planning gap: the
  observed gap, but at least ``PLANNING_MARGIN * delta`` away from delta on its side (towards FAIL one
  bound must clear delta; towards PASS both must); where the data at hand already decides that, the
  observed gap itself, up to ``NEEDED_MAX_GROWTH`` times the data. Normal approximation at the planned
  rates; above ``NEEDED_CAP`` per group, or beyond that growth, the answer is "not decidable at this
  gap" (NaN plus a reason). See :func:`scale_needed` and :func:`_needed`;
* equalized odds: the larger in absolute value of the TPR and FPR differences (its sign kept). Its
  interval is derived conservatively from the two component Newcombe intervals, each at
  ``1 - alpha / 2k`` (Bonferroni over both components too): the gap ``max(|dTPR|, |dFPR|)`` lies in
  ``[max of the components' smallest |value|, max of their largest |value|]``, shown with the sign of
  the observed difference (read it as an interval on the magnitude; the components' own intervals
  are kept in ``Comparison.components``). FAIL therefore means one component is decidedly beyond delta,
  PASS that both are decidedly within. Its p-value is ``min(1, 2 min(p_TPR, p_FPR))`` (then Holm); it is
  undefined when either component is;
* the headline over F families (:func:`headline_verdict`): FAIL when a comparison FAILs at
  ``1 - alpha / (F k)``, PASS when every comparison PASSes at its family's level, held at alpha overall.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar, cast

import numpy as np
import numpy.typing as npt

from auditportal.fairness.statistics.distributions import (
    beta_quantile,
    fisher_exact_p,
    normal_quantile,
    normal_two_sided_p,
)

Counts = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]

CELLS: Final = ("tp", "fn", "fp", "tn")
RATES: Final = ("tpr", "fpr", "fnr", "ppv", "selection_rate")
COMPARED: Final = ("tpr", "fpr", "equalized_odds", "selection_rate", "ppv")
# What each rate divides by; a needed sample size is counted in these units.
DENOMINATOR: Final = {
    "tpr": "positives",
    "fnr": "positives",
    "fpr": "negatives",
    "ppv": "predicted positives",
    "selection_rate": "rows",
}
PASS: Final = 0
INCONCLUSIVE: Final = 1
FAIL: Final = 2
NO_VERDICT: Final = -1  # a ratio verdict where the ratio is undefined


class Verdict(enum.StrEnum):
    """A comparison's verdict, from best to worst. The one vocabulary of verdicts: prediction audits
    and trial verdicts store these values, and their models take ``choices()``."""

    PASS = "PASS"  # noqa: S105 - a verdict, not a password
    INCONCLUSIVE = "INCONCLUSIVE"
    FAIL = "FAIL"

    @property
    def label(self) -> str:
        return self.value.title()

    @classmethod
    def choices(cls) -> list[tuple[str, str]]:
        return [(verdict.value, verdict.label) for verdict in cls]


VERDICTS: Final = tuple(verdict.value for verdict in Verdict)
FISHER_BELOW: Final = 5
# A proportion with fewer successes or fewer failures than EXACT_FACTOR * z**4 is a small cell, z the
# normal quantile of its interval's level (14.8 at 95%, 62 at 99.5%, 83 at 99.75%): its interval is
# exact (Clopper-Pearson) instead of Wilson's (see small_cell and proportion_interval).
EXACT_FACTOR: Final = 1.0
FOUR_FIFTHS: Final = 0.8
DEFAULT_ALPHA: Final = 0.05
DEFAULT_TOLERANCE: Final = 0.05
DEFAULT_POWER: Final = 0.8
# The planning gap of a sample size keeps at least this fraction of delta between itself and delta:
# at 0.5 and delta 0.05, a gap observed at 0.051 is planned at 0.075 and one at 0.049 at 0.025.
PLANNING_MARGIN: Final = 0.5
# Above this many (in the metric's denominator, per group) a sample size is no plan: not decidable.
NEEDED_CAP: Final = 10_000_000
# Why positives_needed is NaN for an INCONCLUSIVE, defined comparison (0: it is not, or it is decided).
NEEDED_OVER_CAP: Final = 1  # more than NEEDED_CAP would be needed
NEEDED_TOO_CLOSE: Final = 2  # the data at hand decides the planning gap, and at the observed gap (next to
# delta) more than NEEDED_MAX_GROWTH times the data would be needed
NEEDED_MAX_GROWTH: Final = 100
NEEDED_NO_PASS: Final = 3  # delta is 0: no interval lies within it
NEEDED_NO_POSITIVES: Final = 4  # the group has no label positives to count (n_needed is given)

_NAN = float("nan")
_T = TypeVar("_T", bound=np.generic)
_DECIDABLE = 1e-9


# --------------------------------------------------------------------------- counting


def confusion_cells(y_true: npt.NDArray[np.integer], y_pred: npt.NDArray[np.integer]) -> npt.NDArray[np.int8]:
    """Each row's cell index: 0 tp, 1 fn, 2 fp, 3 tn (``y_true`` and ``y_pred`` are 0/1)."""
    # int8 arithmetic keeps the temporaries small.
    cell = np.subtract(3, np.left_shift(y_true.astype(np.int8, copy=False), 1), dtype=np.int8)
    cell -= y_pred.astype(np.int8, copy=False)
    return cell


def confusion_counts_from_cells(
    codes: npt.NDArray[np.integer], cells: npt.NDArray[np.int8], groups: int
) -> tuple[Counts, Counts]:
    """Per-group ``(tp, fn, fp, tn)`` in one ``bincount``, and the same cells of the unknown rows.

    ``codes`` holds each row's group index, -1 for unknown.
    """
    # key = (code + 1) * 4 + cell, built in intp (what bincount counts in) in two passes.
    key = np.multiply(codes, 4, dtype=np.intp)
    key += cells + np.int8(4)
    counts = np.bincount(key, minlength=(groups + 1) * 4).astype(np.int64, copy=False).reshape(groups + 1, 4)
    return counts[1:], counts[0]


def confusion_counts(
    codes: npt.NDArray[np.integer], y_true: npt.NDArray[np.integer], y_pred: npt.NDArray[np.integer], groups: int
) -> tuple[Counts, Counts]:
    return confusion_counts_from_cells(codes, confusion_cells(y_true, y_pred), groups)


# --------------------------------------------------------------------------- rates


@dataclass(frozen=True)
class Rate:
    successes: Counts
    trials: Counts
    value: Floats  # NaN where trials == 0
    low: Floats
    high: Floats

    @property
    def undefined(self) -> Bools:
        return cast(Bools, self.trials == 0)


def rate_parts(counts: Counts) -> dict[str, tuple[Counts, Counts]]:
    """Numerator and denominator of every rate, shaped ``(..., G)``."""
    counts = np.asarray(counts, dtype=np.int64)
    tp, fn, fp, tn = (counts[..., i] for i in range(4))
    positives = tp + fn
    return {
        "tpr": (tp, positives),
        "fpr": (fp, fp + tn),
        "fnr": (fn, positives),
        "ppv": (tp, tp + fp),
        "selection_rate": (tp + fp, positives + fp + tn),
    }


def proportion(successes: Counts, trials: Counts) -> Floats:
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.true_divide(successes, trials, dtype=np.float64)
    return cast(Floats, np.where(trials > 0, value, _NAN))


def wilson_interval(successes: Counts, trials: Counts, alpha: float | Floats) -> tuple[Floats, Floats]:
    """Wilson score interval at level ``1 - alpha`` (alpha may vary along broadcast axes).

    The arithmetic is statsmodels' ``proportion_confint(method="wilson")``, step for step.
    """
    defined = trials > 0
    n = np.where(defined, trials, 1).astype(np.float64)
    q = successes / n
    crit = _z(np.asarray(alpha) / 2)
    crit2 = crit**2
    denom = 1 + crit2 / n
    center = (q + crit2 / (2 * n)) / denom
    dist = crit * np.sqrt(q * (1.0 - q) / n + crit2 / (4.0 * n**2)) / denom
    return (
        cast(Floats, np.where(defined, np.clip(center - dist, 0, 1), _NAN)),
        cast(Floats, np.where(defined, np.clip(center + dist, 0, 1), _NAN)),
    )


def clopper_pearson_interval(successes: Counts, trials: Counts, alpha: float | Floats) -> tuple[Floats, Floats]:
    """The exact (Clopper-Pearson) interval at level ``1 - alpha``: statsmodels'
    ``proportion_confint(method="beta")``, the beta quantiles ``B(alpha/2; x, n - x + 1)`` and
    ``B(1 - alpha/2; x + 1, n - x)``, 0 at x = 0 and 1 at x = n. Each distinct (x, n, alpha) is
    computed once: a simulation's thousands of small cells hold a few hundred distinct ones."""
    x, n, level = np.broadcast_arrays(
        np.asarray(successes, dtype=np.int64), np.asarray(trials, dtype=np.int64), np.asarray(alpha, np.float64)
    )
    low, high = np.full(x.shape, _NAN), np.full(x.shape, _NAN)
    defined = n > 0
    count = int(np.count_nonzero(defined))
    if count == 0:
        return cast(Floats, low), cast(Floats, high)
    xs, ns, levels = x[defined], n[defined], level[defined]
    if count <= _EXACT_ONE_BY_ONE:
        # A document's few groups: sorting out the distinct ones would cost more than the cache's lookups.
        bounds = np.array(
            [_exact_bounds(a, b, c) for a, b, c in zip(xs.tolist(), ns.tolist(), levels.tolist(), strict=True)]
        )
        low[defined], high[defined] = bounds[:, 0], bounds[:, 1]
        return cast(Floats, low), cast(Floats, high)
    triples, inverse = _distinct_triples(xs, ns, levels)
    bounds = np.array([_exact_bounds(a, b, c) for a, b, c in triples])
    low[defined], high[defined] = bounds[inverse, 0], bounds[inverse, 1]
    return cast(Floats, low), cast(Floats, high)


# Up to this many proportions, clopper_pearson_interval looks each one up in _exact_bounds' cache.
_EXACT_ONE_BY_ONE: Final = 64
# A key range up to this many times the entries (and _KEY_TABLE_MIN in any case) is counted in a table
# rather than sorted.
_KEY_TABLE_FACTOR: Final = 4
_KEY_TABLE_MIN: Final = 1 << 16


def _distinct_triples(x: Counts, n: Counts, level: Floats) -> tuple[list[tuple[int, int, float]], npt.NDArray[np.intp]]:
    """The distinct ``(x, n, level)`` of three equally long vectors, and for each entry the index of
    its triple. A simulation's thousands of small cells hold a few hundred distinct ones: each is
    computed once. One integer key per entry, read back into its triple: a table of the keys where
    their range is small, else one sort (np.unique of rows, or of each column, sorts far slower)."""
    if (level == level[0]).all():
        levels, level_rank = level[:1], np.zeros(len(level), np.int64)
    else:
        levels, level_rank = np.unique(level, return_inverse=True)
    x_low, n_low = int(x.min()), int(n.min())
    x_span, n_span, level_span = int(x.max()) - x_low + 1, int(n.max()) - n_low + 1, len(levels)
    x_values: Counts | None = None
    n_values: Counts | None = None
    if x_span * n_span * level_span >= 1 << 62:
        # Too wide for one int64 key (never, for counts of rows): each column's rank instead.
        x_values, x_rank = np.unique(x, return_inverse=True)
        n_values, n_rank = np.unique(n, return_inverse=True)
        x_low, n_low, x_span, n_span = 0, 0, len(x_values), len(n_values)
        key = (x_rank.astype(np.int64) * n_span + n_rank) * level_span + level_rank
    else:
        key = ((x - x_low) * n_span + (n - n_low)) * level_span + level_rank
    size = x_span * n_span * level_span
    if size <= max(_KEY_TABLE_FACTOR * len(key), _KEY_TABLE_MIN):
        present = np.zeros(size, bool)
        present[key] = True
        distinct = np.flatnonzero(present)
        position = np.zeros(size, np.intp)
        position[distinct] = np.arange(len(distinct))
        inverse = position[key]
    else:
        distinct, inverse = np.unique(key, return_inverse=True)
    x_index, rest = np.divmod(distinct, n_span * level_span)
    n_index, level_index = np.divmod(rest, level_span)
    x_of = x_index + x_low if x_values is None else x_values[x_index]
    n_of = n_index + n_low if n_values is None else n_values[n_index]
    triples = list(zip(x_of.tolist(), n_of.tolist(), levels[level_index].tolist(), strict=True))
    return triples, inverse.ravel()


@functools.lru_cache(maxsize=1 << 16)
def _exact_bounds(x: int, n: int, alpha: float) -> tuple[float, float]:
    low = 0.0 if x == 0 else beta_quantile(alpha / 2, x, n - x + 1)
    high = 1.0 if x == n else beta_quantile(alpha / 2, x + 1, n - x, upper=True)
    return low, high


def small_cell(successes: Counts, trials: Counts, alpha: float | Floats) -> Bools:
    """Some trials, but fewer successes or fewer failures than ``EXACT_FACTOR * z**4``, z the normal
    quantile at ``1 - alpha/2``: where Wilson's interval at level ``1 - alpha`` is too tight.

    Wilson's interval is the normal approximation solved for p; its one-sided errors come from the
    skew of the binomial, which shrinks as the count grows but weighs more the further out in the
    tail the level is. A fixed count holds at one level only: 10 suffices at 95%, but in a family of
    20 (99.75%) a difference interval with Wilson's bounds from 30 successes on still errs on one
    side up to 0.97 times all that is allowed (alpha/k), and at 99.975% from 80 on 1.11 times.
    Measured exactly (the binomial probabilities of every outcome) over groups of 50 to 5,000 rows
    and references of 5,000 and 20,000 at rates 0.002 to 0.1, a threshold of z**4 keeps that
    share between 0.66 and 0.84 from 95% to 99.995% (docs/audit-json.md, "Intervals")."""
    threshold = small_cell_threshold(alpha)
    failures = trials - successes
    small: Bools = (trials > 0) & ((successes < threshold) | (failures < threshold))
    return small


def small_cell_threshold(alpha: float | Floats) -> Floats:
    """The count below which a proportion's interval at level ``1 - alpha`` is exact: EXACT_FACTOR z**4."""
    threshold: Floats = EXACT_FACTOR * _z(np.asarray(alpha, dtype=np.float64) / 2) ** 4
    return threshold


def proportion_interval(successes: Counts, trials: Counts, alpha: float | Floats) -> tuple[Floats, Floats]:
    """The interval of one proportion at level ``1 - alpha``, everywhere the statistics need one (the
    rates' intervals, and the bounds the difference and ratio intervals are built from): Wilson's
    score interval, except in a small cell (:func:`small_cell`), where it is Clopper-Pearson's.

    Wilson's bounds are too tight where a group has few successes or failures: 1 success in 2
    positives gives a 95% lower bound of 0.095, so a true rate of 0.05 is excluded 9.75% of the time
    on that side alone where 2.5% is allowed; at Bonferroni levels in a family of 10 or 20 it is
    worse. Clopper-Pearson's never exclude the truth more often than alpha/2 on either side, at the
    price of width; above the threshold Wilson's are accurate and narrower (docs/audit-json.md,
    "Intervals", gives the measured error rates).
    """
    low, high = wilson_interval(successes, trials, alpha)
    small = small_cell(np.asarray(successes), np.asarray(trials), alpha)
    x, n, level = np.broadcast_arrays(np.asarray(successes), np.asarray(trials), np.asarray(alpha), subok=False)
    if small.any():
        low, high = np.array(low, copy=True), np.array(high, copy=True)
        low[small], high[small] = clopper_pearson_interval(x[small], n[small], level[small])
    return low, high


def group_rates(counts: Counts, *, alpha: float = DEFAULT_ALPHA) -> dict[str, Rate]:
    rates = {}
    for name, (successes, trials) in rate_parts(counts).items():
        low, high = proportion_interval(successes, trials, alpha)
        rates[name] = Rate(successes, trials, proportion(successes, trials), low, high)
    return rates


@dataclass(frozen=True)
class Spread:
    """The summary of one rate across the known groups with a defined value."""

    max_minus_min: Floats
    min_over_max: Floats  # NaN when the maximum is 0
    argmax: npt.NDArray[np.intp]  # -1 when no group has a defined value
    argmin: npt.NDArray[np.intp]


def spread(values: Floats) -> Spread:
    defined = ~np.isnan(values)
    any_defined = defined.any(axis=-1)
    high = np.where(defined, values, -np.inf)
    low = np.where(defined, values, np.inf)
    top, bottom = high.max(axis=-1), low.min(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(any_defined & (top > 0), bottom / np.where(top > 0, top, 1.0), _NAN)
    return Spread(
        max_minus_min=cast(Floats, np.where(any_defined, top - bottom, _NAN)),
        min_over_max=cast(Floats, ratio),
        argmax=np.where(any_defined, high.argmax(axis=-1), -1),
        argmin=np.where(any_defined, low.argmin(axis=-1), -1),
    )


def spreads(rates: Mapping[str, Rate]) -> dict[str, Spread]:
    """Max minus min per rate, and for equalized odds the larger of the TPR and FPR spreads."""
    result = {name: spread(rate.value) for name, rate in rates.items()}
    tpr, fpr = result["tpr"], result["fpr"]
    eo = np.fmax(tpr.max_minus_min, fpr.max_minus_min)
    use_fpr = np.nan_to_num(fpr.max_minus_min, nan=-1.0) > np.nan_to_num(tpr.max_minus_min, nan=-1.0)
    result["equalized_odds"] = Spread(
        max_minus_min=cast(Floats, eo),
        min_over_max=cast(Floats, np.full_like(eo, _NAN)),
        argmax=np.where(use_fpr, fpr.argmax, tpr.argmax),
        argmin=np.where(use_fpr, fpr.argmin, tpr.argmin),
    )
    return result


# --------------------------------------------------------------------------- comparisons


@dataclass(frozen=True)
class Interval:
    """A difference with its interval at ``level``."""

    difference: Floats
    low: Floats
    high: Floats
    level: Floats


@dataclass(frozen=True)
class Comparison:
    """Every group against the reference for one metric, shaped ``(..., G)``.

    The reference's own entry and undefined comparisons have ``defined`` False and NaN values.
    """

    defined: Bools
    difference: Floats
    ratio: Floats
    ci_low: Floats
    ci_high: Floats
    level: Floats  # the interval's confidence level, 1 - alpha / k
    family_size: npt.NDArray[np.int64]  # k, per batch
    p_value: Floats
    p_adjusted: Floats
    exact: Bools  # Fisher's exact test was used
    noise_floor: Floats  # two-sample
    noise_floor_group: Floats  # one-sample, the group's own rate
    verdict: npt.NDArray[np.int8]
    n_needed: Floats  # the group's, in DENOMINATOR units; NaN unless INCONCLUSIVE and decidable
    positives_needed: Floats  # the group's label positives at that size
    component: npt.NDArray[np.int8]  # equalized odds only: 0 = TPR, 1 = FPR gave the difference
    planning_difference: Floats  # the gap positives_needed plans for; NaN unless INCONCLUSIVE
    needed_towards: npt.NDArray[np.int8]  # PASS or FAIL: the verdict it plans for (INCONCLUSIVE: none)
    needed_reason: npt.NDArray[np.int8]  # NEEDED_* when positives_needed is NaN for a reason, else 0
    ratio_low: Floats  # the interval for ``ratio`` at ``level`` (Katz's or MOVER's bound, the wider)
    ratio_high: Floats
    ratio_verdict: npt.NDArray[np.int8]  # four-fifths verdict on the ratio interval; NO_VERDICT if undefined
    # Equalized odds only: each component's difference and interval at its own level 1 - alpha / 2k.
    components: Mapping[str, Interval] = field(default_factory=dict)


def compare(
    counts: Counts,
    *,
    reference: int,
    tolerance: float = DEFAULT_TOLERANCE,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
    p_values: bool = True,
    sample_sizes: bool | None = None,
) -> dict[str, Comparison]:
    """Compare every group with ``reference`` (an index on the group axis) for each of COMPARED.

    ``p_values=False`` skips the tests (NaN instead), which simulations that need only intervals
    and verdicts use: Fisher's test is not vectorised. ``sample_sizes=False`` skips the sample sizes
    (NaN, no reason): solving them calls the normal distribution function per entry. Unless given,
    it follows ``p_values``, so such simulations skip both.
    """
    if sample_sizes is None:
        sample_sizes = p_values
    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim < 2 or counts.shape[-1] != 4:
        raise ValueError(f"counts must be shaped (..., groups, 4), not {counts.shape}")
    groups = counts.shape[-2]
    if not 0 <= reference < groups:
        raise ValueError(f"reference {reference} is not a group index (0..{groups - 1})")
    _check_level("alpha", alpha)
    _check_level("power", power)
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), not {tolerance}")

    parts = rate_parts(counts)
    positives = parts["tpr"][1]
    not_reference = np.arange(groups) != reference
    result: dict[str, Comparison] = {}
    for name in ("tpr", "fpr", "selection_rate", "ppv"):
        successes, trials = parts[name]
        defined = (trials > 0) & (trials[..., reference : reference + 1] > 0) & not_reference
        k = _family_size(defined)
        level_alpha = alpha / np.maximum(k, 1)
        bounds = _bounds(successes, trials, reference, level_alpha)
        gap = _gap(bounds, defined)
        p_value, exact = (
            _p_values(successes, trials, reference, defined) if p_values else (_nans(defined), _falses(defined))
        )
        verdict = _verdict(gap.low, gap.high, tolerance, defined)
        ratio = _ratio(successes, trials, reference, defined)
        ratio_low, ratio_high = _ratio_interval(successes, trials, reference, level_alpha, ratio, bounds)
        level = np.broadcast_to(1 - level_alpha, defined.shape).astype(np.float64)
        needed = _needed(
            [_Plan(gap, successes, trials)],
            positives=positives,
            reference=reference,
            alpha=1 - level,
            tolerance=tolerance,
            power=power,
            asked=(verdict == INCONCLUSIVE) & defined & sample_sizes,
        )
        result[name] = Comparison(
            defined=defined,
            difference=gap.difference,
            ratio=ratio,
            ci_low=gap.low,
            ci_high=gap.high,
            level=level,
            family_size=k[..., 0],
            p_value=p_value,
            p_adjusted=holm(p_value),
            exact=exact,
            noise_floor=_noise_floor(successes, trials, reference, level_alpha, defined),
            noise_floor_group=_noise_floor_group(successes, trials, alpha, defined),
            verdict=verdict,
            n_needed=needed.n_needed,
            positives_needed=needed.positives_needed,
            component=np.zeros(defined.shape, np.int8),
            planning_difference=needed.planning_difference,
            needed_towards=needed.towards,
            needed_reason=needed.reason,
            ratio_low=ratio_low,
            ratio_high=ratio_high,
            ratio_verdict=four_fifths_verdict(ratio_low, ratio_high, ratio),
        )
    result["equalized_odds"] = _equalized_odds(
        parts, result["tpr"], result["fpr"], reference, tolerance, alpha, power if sample_sizes else None
    )
    return {name: result[name] for name in COMPARED}


def holm(p: Floats) -> Floats:
    """Holm step-down adjustment along the last axis; NaN entries are not part of the family."""
    p = np.asarray(p, dtype=np.float64)
    m = np.count_nonzero(~np.isnan(p), axis=-1)[..., None]
    order = np.argsort(p, axis=-1, kind="stable")  # NaN sorts last
    ranked = np.take_along_axis(p, order, axis=-1)
    factor = m - np.arange(p.shape[-1])
    adjusted = np.minimum(1.0, np.fmax.accumulate(factor * ranked, axis=-1))
    out = np.empty_like(p)
    np.put_along_axis(out, order, adjusted, axis=-1)
    return cast(Floats, np.where(np.isnan(p), _NAN, out))


def planning_difference(difference: Floats, tolerance: float) -> Floats:
    """The gap a sample size plans for: the observed one, moved to at least ``PLANNING_MARGIN * delta``
    from delta on its own side (beyond delta: towards FAIL; within, delta included: towards PASS)."""
    size = np.abs(difference)
    margin = PLANNING_MARGIN * tolerance
    planned = np.where(size > tolerance, np.maximum(size, tolerance + margin), np.minimum(size, tolerance - margin))
    return cast(Floats, np.copysign(planned, difference))


def decision_power(
    scale: Floats | float, *, planned: Floats, standard_error: Floats, tolerance: float, alpha: Floats | float
) -> Floats:
    """Normal-approximation probability that the two-sided level ``1 - alpha`` interval decides at
    ``scale`` times the data (both groups grown at their ratio), if the true gap is ``planned``.

    ``standard_error`` is the difference's at the data at hand. Beyond delta (towards FAIL) one bound
    must clear it: ``Phi((|d| - delta) / se - z)``, the one-sided power (the interval clearing the
    opposite -delta is left out: negligible, and the same as statsmodels' ``alternative="larger"``).
    Within delta (towards PASS) both bounds must: ``Phi((delta - |d|) / se - z) + Phi((delta + |d|) / se
    - z) - 1``, the power of two one-sided tests (TOST), which needs z at ``1 - beta/2`` at d = 0.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.sqrt(np.asarray(scale, dtype=np.float64))
    power, _slope = _power_and_slope(root, planned, standard_error, tolerance, _z(np.asarray(alpha) / 2))
    return cast(Floats, np.maximum(power, 0.0))


def scale_needed(
    *,
    planned: Floats,
    standard_error: Floats,
    tolerance: float,
    alpha: Floats | float,
    power: float,
    where: Bools | None = None,
) -> Floats:
    """The factor by which the data must grow (group and reference at their ratio) for
    :func:`decision_power` to reach ``power``; NaN where no factor does (a gap at delta), and
    outside ``where`` when given."""
    z_alpha, z_beta, z_half_beta = _z(np.asarray(alpha) / 2), _z(1 - power), _z((1 - power) / 2)
    planned, standard_error, z_alpha = np.broadcast_arrays(planned, standard_error, z_alpha)
    distance = np.abs(np.abs(planned) - tolerance)
    with np.errstate(divide="ignore", invalid="ignore"):
        # Towards FAIL the closed form; towards PASS it lies between the one-sided size (at z_beta)
        # and the size that gives each one-sided test 1 - beta/2 (at z_half_beta).
        low = (standard_error * (z_alpha + z_beta) / distance) ** 2
        high = (standard_error * (z_alpha + z_half_beta) / distance) ** 2
    towards_pass = np.abs(planned) <= tolerance

    def power_at(root: Floats, where: Bools) -> tuple[Floats, Floats]:
        return _power_and_slope(root, planned[where], standard_error[where], tolerance, z_alpha[where])

    asked = distance > _DECIDABLE
    if where is not None:
        asked = asked & where
    solved = _solve_scale(power_at, low, high, power, towards_pass & asked)
    return cast(Floats, np.where(asked, np.where(towards_pass, solved, low), _NAN))


def four_fifths_verdict(low: Floats, high: Floats, ratio: Floats) -> npt.NDArray[np.int8]:
    """FAIL when [low, high] lies entirely below 0.8 or above 1.25, PASS when within [0.8, 1.25],
    otherwise INCONCLUSIVE; NO_VERDICT where the ratio is undefined (NaN)."""
    fail = (high < FOUR_FIFTHS) | (low > 1 / FOUR_FIFTHS)
    within = (low >= FOUR_FIFTHS) & (high <= 1 / FOUR_FIFTHS)
    verdict = np.where(fail, FAIL, np.where(within, PASS, INCONCLUSIVE))
    return np.where(np.isnan(ratio), NO_VERDICT, verdict).astype(np.int8)


def headline_alpha(alpha: float, families: int) -> float:
    """The alpha at which each of the F judged families is judged again for the headline: alpha / F
    (Bonferroni over the families; within each, its own Bonferroni over its k comparisons, so each
    comparison's interval is at 1 - alpha / (F k))."""
    return alpha / max(families, 1)


def headline_verdict(
    family: Sequence[npt.NDArray[np.int8]], strict: Sequence[npt.NDArray[np.int8]]
) -> npt.NDArray[np.int8]:
    """The one verdict over F families, held at alpha overall, shaped like the leading axes.

    Each entry of ``family`` holds one family's comparison verdicts (``(..., k)``) at the family's
    own level (1 - alpha/k); each entry of ``strict`` the same comparisons' verdicts at the headline
    level, from intervals at 1 - alpha/(F k) (:func:`headline_alpha`).

    * FAIL when any comparison FAILs at the headline level. A false FAIL needs some family to fail
      falsely at alpha/F: at most F times alpha/F = alpha (Bonferroni over the families).
    * PASS when every comparison of every family PASSes at its family's level. A false PASS needs a
      comparison whose true gap lies beyond delta to PASS, at most alpha/k <= alpha for each such
      comparison, and the headline PASS needs all of them at once: an intersection-union test
      (Berger 1982), which needs no adjustment for the number of families.
    * INCONCLUSIVE otherwise (also when a comparison is undefined); NO_VERDICT with no comparison.

    The two cannot both hold: every interval holds the observed gap, so a comparison beyond delta at
    the headline level cannot be within delta at its family's.
    """
    family_all = np.concatenate([np.asarray(v, np.int8) for v in family], axis=-1) if family else None
    strict_all = np.concatenate([np.asarray(v, np.int8) for v in strict], axis=-1) if strict else None
    if family_all is None or strict_all is None or family_all.shape[-1] == 0:
        shape = () if family_all is None else family_all.shape[:-1]
        return np.full(shape, NO_VERDICT, np.int8)
    fail = (strict_all == FAIL).any(axis=-1)
    passed = (family_all == PASS).all(axis=-1)
    return np.where(fail, FAIL, np.where(passed, PASS, INCONCLUSIVE)).astype(np.int8)


# --------------------------------------------------------------------------- internals


@dataclass(frozen=True)
class _Gap:
    difference: Floats
    low: Floats
    high: Floats


@dataclass(frozen=True)
class _Bounds:
    """Each group's rate and its interval at one level (:func:`proportion_interval`), and the
    reference's, shaped ``(..., 1)``: what the difference's and the ratio's intervals are built from."""

    p: Floats
    low: Floats
    high: Floats
    p_ref: Floats
    ref_low: Floats
    ref_high: Floats


def _z(upper_tail: float | Floats) -> Floats:
    """The standard normal quantile with ``upper_tail`` probability above it."""
    return -normal_quantile(upper_tail)


def _normal_cdf(x: Floats) -> Floats:
    tail = normal_two_sided_p(x) / 2  # P(Z > |x|)
    return cast(Floats, np.where(x > 0, 1 - tail, tail))


def _normal_density(x: Floats) -> Floats:
    return np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _power_and_slope(
    root: Floats, planned: Floats, standard_error: Floats, tolerance: float, z: Floats
) -> tuple[Floats, Floats]:
    """:func:`decision_power` (not clipped at 0) at ``root**2`` times the data, and its derivative in
    ``root``."""
    size = np.abs(planned)
    towards_fail = size > tolerance
    with np.errstate(divide="ignore", invalid="ignore"):
        near = np.where(towards_fail, size - tolerance, tolerance - size) / standard_error
        far = (tolerance + size) / standard_error
    first, second = near * root - z, far * root - z
    power = _normal_cdf(first) + np.where(towards_fail, 1.0, _normal_cdf(second)) - 1
    slope = near * _normal_density(first) + np.where(towards_fail, 0.0, far * _normal_density(second))
    return power, slope


def _solve_scale(
    power_at: Callable[[Floats, Bools], tuple[Floats, Floats]],
    low: Floats,
    high: Floats,
    power: float,
    where: Bools,
) -> Floats:
    """Where ``where``: the scale in [low, high] at which the increasing power reaches ``power``.

    ``power_at(root, where)`` gives the power at ``root**2`` times the data and its derivative in
    ``root``, for the entries of ``where``; callers bracket the answer (power at ``low`` at most
    ``power``, at ``high`` at least). Newton's method in the root, falling back to bisection whenever
    a step leaves the bracket; only the entries asked about are computed, so simulations stay fast.
    """
    result = np.full(where.shape, _NAN)
    if not where.any():
        return cast(Floats, result)
    below, above = np.sqrt(low[where]), np.sqrt(high[where])
    root = below.copy()
    for _ in range(100):
        value, slope = power_at(root, where)
        short = value < power
        below = np.where(short, root, below)
        above = np.where(short, above, root)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = root - (value - power) / slope
        inside = np.isfinite(step) & (step > below) & (step < above)
        following = np.where(inside, step, (below + above) / 2)
        converged = np.abs(following - root) <= 1e-13 * following
        root = following
        if converged.all():
            break
    result[where] = root**2
    return cast(Floats, result)


def _check_level(name: str, value: float) -> None:
    if not 0 < value < 1:
        raise ValueError(f"{name} must be between 0 and 1 (exclusive), not {value}")


def _family_size(defined: Bools) -> npt.NDArray[np.int64]:
    return np.asarray(np.count_nonzero(defined, axis=-1), dtype=np.int64)[..., None]


def _nans(shape_of: Bools) -> Floats:
    return np.full(shape_of.shape, _NAN)


def _falses(shape_of: Bools) -> Bools:
    return np.zeros(shape_of.shape, bool)


def _at(values: npt.NDArray[_T], index: int) -> npt.NDArray[_T]:
    return values[..., index : index + 1]


def _bounds(successes: Counts, trials: Counts, reference: int, alpha: Floats) -> _Bounds:
    """The rates and their intervals at level 1 - alpha, computed once for the gap and the ratio."""
    ref_successes, ref_trials = _at(successes, reference), _at(trials, reference)
    low, high = proportion_interval(successes, trials, alpha)
    ref_low, ref_high = proportion_interval(ref_successes, ref_trials, alpha)
    return _Bounds(
        p=proportion(successes, trials),
        low=low,
        high=high,
        p_ref=proportion(ref_successes, ref_trials),
        ref_low=ref_low,
        ref_high=ref_high,
    )


def _gap(bounds: _Bounds, defined: Bools) -> _Gap:
    """The interval for p_group - p_reference at level 1 - alpha: MOVER (Newcombe's method 10) from
    the two proportions' intervals at the same level (:func:`proportion_interval`)."""
    p, p_ref = bounds.p, bounds.p_ref
    lower, upper = mover_difference(p, bounds.low, bounds.high, p_ref, bounds.ref_low, bounds.ref_high)
    difference = p - p_ref
    return _Gap(
        difference=cast(Floats, np.where(defined, difference, _NAN)),
        low=cast(Floats, np.where(defined, lower, _NAN)),
        high=cast(Floats, np.where(defined, upper, _NAN)),
    )


def mover_difference(
    p1: Floats, low1: Floats, high1: Floats, p2: Floats, low2: Floats, high2: Floats
) -> tuple[Floats, Floats]:
    """The MOVER interval for p1 - p2 from each proportion's estimate and interval (Newcombe 1998,
    method 10, when the intervals are Wilson's), kept within [-1, 1]."""
    difference = p1 - p2
    lower = difference - np.sqrt((p1 - low1) ** 2 + (high2 - p2) ** 2)
    upper = difference + np.sqrt((high1 - p1) ** 2 + (p2 - low2) ** 2)
    return cast(Floats, np.maximum(lower, -1.0)), cast(Floats, np.minimum(upper, 1.0))


def _verdict(low: Floats, high: Floats, tolerance: float, defined: Bools) -> npt.NDArray[np.int8]:
    fail = (low > tolerance) | (high < -tolerance)
    within = (low >= -tolerance) & (high <= tolerance)
    verdict = np.where(fail, FAIL, np.where(within, PASS, INCONCLUSIVE))
    return np.where(defined, verdict, INCONCLUSIVE).astype(np.int8)


def _ratio(successes: Counts, trials: Counts, reference: int, defined: Bools) -> Floats:
    p = proportion(successes, trials)
    p_ref = _at(p, reference)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = p / p_ref
    return cast(Floats, np.where(defined & (p_ref > 0), ratio, _NAN))


def _ratio_interval(
    successes: Counts, trials: Counts, reference: int, alpha: Floats, ratio: Floats, bounds: _Bounds
) -> tuple[Floats, Floats]:
    """The interval for p_group / p_reference at level 1 - alpha: at each end the wider of Katz's
    (log) bound and the MOVER-R bound built from the two Wilson intervals (Donner & Zou 2012).
    ``bounds``: the rates' intervals at the same level."""
    katz_low, katz_high = _katz_interval(successes, trials, reference, alpha)
    mover_low, mover_high = _mover_ratio_interval(bounds)
    defined = ~np.isnan(ratio)
    # fmin/fmax also hold the observed ratio, which Katz's interval after the zero-cell correction
    # may not (a group rate of 0 gets a lower bound of 0).
    low = np.fmin(np.fmin(katz_low, mover_low), ratio)
    high = np.fmax(np.fmax(katz_high, mover_high), ratio)
    return cast(Floats, np.where(defined, low, _NAN)), cast(Floats, np.where(defined, high, _NAN))


def _katz_interval(successes: Counts, trials: Counts, reference: int, alpha: Floats) -> tuple[Floats, Floats]:
    """Katz's log interval (statsmodels' ``confint_proportions_2indep(compare="ratio", method="log")``),
    with Haldane-Anscombe's 0.5 added to every cell of the pair's 2x2 table when one is 0."""
    x, n = successes.astype(np.float64), trials.astype(np.float64)
    x_ref, n_ref = _at(x, reference), _at(n, reference)
    # Without the correction a 0 count gives an infinite variance, and a rate of 1 (no failures)
    # a variance term of 0: an interval of one point.
    half = np.where((x == 0) | (x == n) | (x_ref == 0) | (x_ref == n_ref), 0.5, 0.0)
    x, n, x_ref, n_ref = x + half, n + 2 * half, x_ref + half, n_ref + 2 * half
    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = np.log(x / n) - np.log(x_ref / n_ref)
        spread = _z(np.asarray(alpha) / 2) * np.sqrt(1 / x - 1 / n + 1 / x_ref - 1 / n_ref)
        return cast(Floats, np.exp(log_ratio - spread)), cast(Floats, np.exp(log_ratio + spread))


def _mover_ratio_interval(bounds: _Bounds) -> tuple[Floats, Floats]:
    """MOVER-R (Donner & Zou 2012, eq. for a ratio) from the intervals of both rates
    (:func:`proportion_interval`: Wilson's, Clopper-Pearson's in a small cell)."""
    p, low, high = bounds.p, bounds.low, bounds.high
    p_ref, ref_low, ref_high = bounds.p_ref, bounds.ref_low, bounds.ref_high
    product = p * p_ref
    with np.errstate(divide="ignore", invalid="ignore"):
        lower_root = np.sqrt(np.maximum(product**2 - low * ref_high * (2 * p - low) * (2 * p_ref - ref_high), 0))
        upper_root = np.sqrt(np.maximum(product**2 - high * ref_low * (2 * p - high) * (2 * p_ref - ref_low), 0))
        # A reference so uncertain that its upper bound passes twice its rate leaves no lower bound.
        lower_denominator = ref_high * (2 * p_ref - ref_high)
        mover_low = np.where(lower_denominator > 0, (product - lower_root) / lower_denominator, 0.0)
        mover_high = (product + upper_root) / (ref_low * (2 * p_ref - ref_low))
    return np.maximum(mover_low, 0.0), mover_high


def _plus_four(successes: Counts, trials: Counts) -> Floats:
    """(x + 2) / (n + 4): never 0 or 1, so a floor built on it never collapses to 0."""
    return (successes + 2) / (trials + 4)


def _noise_floor(successes: Counts, trials: Counts, reference: int, alpha: Floats, defined: Bools) -> Floats:
    """Two-sample, at the family's z (``alpha`` is alpha / k): the family interval's half-width at no gap."""
    floor = pair_noise_floor(successes, trials, _at(successes, reference), _at(trials, reference), alpha)
    return cast(Floats, np.where(defined, floor, _NAN))


def pair_noise_floor(
    successes: Counts, trials: Counts, other_successes: Counts, other_trials: Counts, alpha: float | Floats
) -> Floats:
    """The two-sample noise floor of two groups' rates at level ``1 - alpha`` (alpha is alpha / k for
    a comparison in a family of k): ``z sqrt(p(1-p)(1/n + 1/n_other))``, p the pooled plus-four rate.
    :func:`compare`'s ``noise_floor`` of a group against the reference; NaN where a count is 0."""
    z = _z(np.asarray(alpha) / 2)
    pooled = _plus_four(successes + other_successes, trials + other_trials)
    with np.errstate(divide="ignore", invalid="ignore"):
        floor = z * np.sqrt(pooled * (1 - pooled) * (1 / trials + 1 / other_trials))
    return cast(Floats, np.where((trials > 0) & (other_trials > 0), floor, _NAN))


def _noise_floor_group(successes: Counts, trials: Counts, alpha: float, defined: Bools) -> Floats:
    """The familiar per-group form z sqrt(p(1-p)/n) at the unadjusted z, p the plus-four rate."""
    z = float(_z(alpha / 2))
    p = _plus_four(successes, trials)
    with np.errstate(divide="ignore", invalid="ignore"):
        floor = z * np.sqrt(p * (1 - p) / trials)
    return cast(Floats, np.where(defined, floor, _NAN))


def _p_values(successes: Counts, trials: Counts, reference: int, defined: Bools) -> tuple[Floats, Bools]:
    ref_successes = np.broadcast_to(_at(successes, reference), successes.shape)
    ref_trials = np.broadcast_to(_at(trials, reference), trials.shape)
    table = np.stack([successes, trials - successes, ref_successes, ref_trials - ref_successes], axis=-1)
    exact = defined & (table.min(axis=-1) < FISHER_BELOW)
    score = defined & ~exact
    p = np.full(defined.shape, _NAN)
    if score.any():
        p[score] = _score_test(successes[score], trials[score], ref_successes[score], ref_trials[score])
    for index in zip(*np.nonzero(exact), strict=True):
        a, b, c, d = (int(v) for v in table[index])
        p[index] = fisher_exact_p(a, b, c, d)
    return p, cast(Bools, exact)


def _score_test(count1: Counts, nobs1: Counts, count2: Counts, nobs2: Counts) -> Floats:
    """Two-sided p-value of the score test of p1 == p2: statsmodels' ``test_proportions_2indep(
    method="score", compare="diff", correction=False)``, whose restricted estimate at a difference
    of 0 is the pooled proportion."""
    pooled = (count1 + count2) / (nobs1 + nobs2)
    variance = pooled * (1 - pooled) / nobs1 + pooled * (1 - pooled) / nobs2
    z = (count1 / nobs1 - count2 / nobs2) / np.sqrt(variance)
    return normal_two_sided_p(z)


@dataclass(frozen=True)
class _Plan:
    """One difference a sample size plans for: the gap and the counts it came from."""

    gap: _Gap
    successes: Counts
    trials: Counts


@dataclass(frozen=True)
class _Needed:
    n_needed: Floats
    positives_needed: Floats
    planning_difference: Floats
    towards: npt.NDArray[np.int8]
    reason: npt.NDArray[np.int8]


def _standard_error(plan: _Plan, planned: Floats, reference: int) -> Floats:
    """The difference's standard error at the data at hand, at the rates the plan assumes: the
    reference's (Agresti-Caffo shrunk: one success and one failure added, so a 0% or 100% rate still
    has variance) and, for the group, the reference's plus the planning gap."""
    reference_rate = (_at(plan.successes, reference) + 1) / (_at(plan.trials, reference) + 2)
    group_rate = np.clip(reference_rate + planned, 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        variance = group_rate * (1 - group_rate) / plan.trials
        variance_reference = reference_rate * (1 - reference_rate) / _at(plan.trials, reference)
        return cast(Floats, np.sqrt(variance + variance_reference))


def _scale_for(
    plans: list[_Plan],
    planned_each: list[Floats],
    *,
    reference: int,
    alpha: Floats,
    tolerance: float,
    power: float,
    where: Bools,
) -> tuple[Floats, Floats]:
    """The growth factor that decides, if each plan's true gap were ``planned_each``, and the gap it
    plans for (for equalized odds the deciding component's).

    With one plan, a plain metric. With two (equalized odds: TPR and FPR), towards FAIL the component
    that decides first suffices; towards PASS both components must decide, and as they are counted on
    disjoint rows (positives, negatives) the chance of both is the product of their powers.
    """
    plans_asked = list(zip(plans, planned_each, strict=True))
    scales, errors = [], []
    for plan, planned in plans_asked:
        error = _standard_error(plan, planned, reference)
        errors.append(error)
        scales.append(
            scale_needed(
                planned=planned, standard_error=error, tolerance=tolerance, alpha=alpha, power=power, where=where
            )
        )
    if len(plans) == 1:
        difference = plans[0].gap.difference
        planned, scale = plans_asked[0][1], scales[0]
    else:
        sizes = [np.abs(np.nan_to_num(plan.gap.difference)) for plan in plans]
        use_second = sizes[1] > sizes[0]
        difference = np.where(use_second, plans[1].gap.difference, plans[0].gap.difference)
        beyond = [size > tolerance for size in sizes]
        fail_scales = [np.where(is_beyond, scale, np.inf) for is_beyond, scale in zip(beyond, scales, strict=True)]
        first = fail_scales[1] < fail_scales[0]
        fail_scale = np.fmin(fail_scales[0], fail_scales[1])
        fail_planned = np.where(first, plans_asked[1][1], plans_asked[0][1])

        alphas = np.broadcast_to(_z(np.asarray(alpha) / 2), difference.shape)

        def joint_power(root: Floats, where: Bools) -> tuple[Floats, Floats]:
            # The product of the components' powers, and its derivative by the product rule.
            (power_1, slope_1), (power_2, slope_2) = (
                _power_and_slope(root, planned_c[where], error[where], tolerance, alphas[where])
                for (_plan, planned_c), error in zip(plans_asked, errors, strict=True)
            )
            return power_1 * power_2, slope_1 * power_2 + power_1 * slope_2

        each_at_root = [
            scale_needed(
                planned=planned_c,
                standard_error=error,
                tolerance=tolerance,
                alpha=alpha,
                power=power**0.5,
                where=where,
            )
            for (_plan, planned_c), error in zip(plans_asked, errors, strict=True)
        ]
        low, high = np.fmax(scales[0], scales[1]), np.fmax(each_at_root[0], each_at_root[1])
        solvable = np.isfinite(low) & np.isfinite(high) & ~beyond[0] & ~beyond[1]
        pass_scale = _solve_scale(joint_power, low, high, power, solvable & where)
        pass_planned = np.copysign(
            np.fmax(np.abs(plans_asked[0][1]), np.abs(plans_asked[1][1])), np.nan_to_num(difference)
        )
        towards_fail_eo = beyond[0] | beyond[1]
        scale = np.where(towards_fail_eo, np.where(np.isfinite(fail_scale), fail_scale, _NAN), pass_scale)
        planned = np.where(towards_fail_eo, fail_planned, pass_planned)

    return scale, planned


def _needed(
    plans: list[_Plan],
    *,
    positives: Counts,
    reference: int,
    alpha: Floats,
    tolerance: float,
    power: float,
    asked: Bools,
) -> _Needed:
    """How far the data must grow to decide ``asked`` comparisons, and what it plans for.

    First at the planning gap (:func:`planning_difference`). Where the data at hand would already
    decide that gap, the true gap is likely closer to delta than the margin: then at the observed gap
    itself, up to ``NEEDED_MAX_GROWTH`` times the data at hand.
    """
    if not asked.any():
        # Nothing to plan (no INCONCLUSIVE comparison, or sample sizes not wanted): what the general
        # path below gives where nothing is asked, without solving for every entry first.
        return _Needed(
            n_needed=_nans(asked),
            positives_needed=_nans(asked),
            planning_difference=_nans(asked),
            towards=np.full(asked.shape, INCONCLUSIVE, np.int8),
            reason=np.zeros(asked.shape, np.int8),
        )

    def solve(planned_each: list[Floats], where: Bools) -> tuple[Floats, Floats]:
        return _scale_for(
            plans, planned_each, reference=reference, alpha=alpha, tolerance=tolerance, power=power, where=where
        )

    scale, planned = solve([planning_difference(plan.gap.difference, tolerance) for plan in plans], asked)
    close = asked & (scale <= 1)
    if close.any():
        close_scale, close_planned = solve([plan.gap.difference for plan in plans], close)
        scale = np.where(close, close_scale, scale)
        # A gap too close to delta keeps the planning gap its reason names.
        planned = np.where(close & (close_scale > 1) & (close_scale <= NEEDED_MAX_GROWTH), close_planned, planned)

    difference = plans[0].gap.difference
    if len(plans) == 2:
        use_second = np.abs(np.nan_to_num(plans[1].gap.difference)) > np.abs(np.nan_to_num(difference))
        difference = np.where(use_second, plans[1].gap.difference, difference)
    towards_fail = np.abs(np.nan_to_num(difference)) > tolerance
    # The cap is counted in each plan's denominator, per group; the larger one for equalized odds.
    with np.errstate(invalid="ignore"):
        units = [np.ceil(scale * plan.trials) for plan in plans]
        largest = np.fmax(units[0], units[1]) if len(units) == 2 else units[0]
        too_close = close & ~((scale > 1) & (scale <= NEEDED_MAX_GROWTH))
        reason = np.select(
            [~asked, too_close, np.isnan(scale), largest > NEEDED_CAP, positives == 0],
            [0, NEEDED_TOO_CLOSE, NEEDED_NO_PASS, NEEDED_OVER_CAP, NEEDED_NO_POSITIVES],
            0,
        ).astype(np.int8)
        positives_needed = np.ceil(scale * positives)
    answered = asked & (reason == 0)
    return _Needed(
        n_needed=cast(Floats, np.where(answered | (reason == NEEDED_NO_POSITIVES), units[0], _NAN)),
        positives_needed=cast(Floats, np.where(answered, positives_needed, _NAN)),
        planning_difference=cast(Floats, np.where(asked, planned, _NAN)),
        towards=np.where(asked, np.where(towards_fail, FAIL, PASS), INCONCLUSIVE).astype(np.int8),
        reason=reason,
    )


def _equalized_odds(
    parts: Mapping[str, tuple[Counts, Counts]],
    tpr: Comparison,
    fpr: Comparison,
    reference: int,
    tolerance: float,
    alpha: float,
    power: float | None,
) -> Comparison:
    """``power`` None: no sample sizes."""
    defined = tpr.defined & fpr.defined
    k = _family_size(defined)
    level_alpha = alpha / (2 * np.maximum(k, 1))
    positives = parts["tpr"][1]
    gaps, plans, floors = [], [], []
    for name in ("tpr", "fpr"):
        successes, trials = parts[name]
        gap = _gap(_bounds(successes, trials, reference, level_alpha), defined)
        gaps.append(gap)
        plans.append(_Plan(gap, successes, trials))
        floors.append(_noise_floor(successes, trials, reference, level_alpha, defined))
    use_fpr = np.abs(np.nan_to_num(gaps[1].difference)) > np.abs(np.nan_to_num(gaps[0].difference))
    difference = np.where(use_fpr, gaps[1].difference, gaps[0].difference)

    def smallest_size(gap: _Gap) -> Floats:
        return cast(Floats, np.where(gap.low > 0, gap.low, np.where(gap.high < 0, -gap.high, 0.0)))

    def largest_size(gap: _Gap) -> Floats:
        return cast(Floats, np.maximum(np.abs(gap.low), np.abs(gap.high)))

    size_low = np.maximum(smallest_size(gaps[0]), smallest_size(gaps[1]))
    size_high = np.maximum(largest_size(gaps[0]), largest_size(gaps[1]))
    negative = difference < 0
    # + 0.0 turns the -0.0 of a negated zero bound into 0.0.
    low = np.where(defined, np.where(negative, -size_high, size_low), _NAN) + 0.0
    high = np.where(defined, np.where(negative, -size_low, size_high), _NAN) + 0.0
    verdict = _verdict(low, high, tolerance, defined)

    level = np.broadcast_to(1 - 2 * level_alpha, defined.shape).astype(np.float64)
    # Each component's interval is at 1 - alpha/2k: half of what the comparison's level leaves.
    needed = _needed(
        plans,
        positives=positives,
        reference=reference,
        alpha=(1 - level) / 2,
        tolerance=tolerance,
        power=DEFAULT_POWER if power is None else power,
        asked=(verdict == INCONCLUSIVE) & defined & (power is not None),
    )

    component_level = np.broadcast_to(1 - level_alpha, defined.shape).astype(np.float64)
    p_value = np.minimum(1.0, 2 * np.fmin(tpr.p_value, fpr.p_value))
    p_value = np.where(defined, p_value, _NAN)
    return Comparison(
        defined=defined,
        difference=cast(Floats, np.where(defined, difference, _NAN)),
        ratio=_nans(defined),
        ci_low=low,
        ci_high=high,
        level=level,
        family_size=k[..., 0],
        p_value=cast(Floats, p_value),
        p_adjusted=holm(cast(Floats, p_value)),
        exact=defined & np.where(use_fpr, fpr.exact, tpr.exact),
        noise_floor=cast(Floats, np.where(use_fpr, floors[1], floors[0])),
        noise_floor_group=cast(
            Floats, np.where(defined, np.where(use_fpr, fpr.noise_floor_group, tpr.noise_floor_group), _NAN)
        ),
        verdict=verdict,
        n_needed=_nans(defined),
        positives_needed=needed.positives_needed,
        component=np.where(defined & use_fpr, 1, 0).astype(np.int8),
        planning_difference=needed.planning_difference,
        needed_towards=needed.towards,
        needed_reason=needed.reason,
        ratio_low=_nans(defined),
        ratio_high=_nans(defined),
        ratio_verdict=np.full(defined.shape, NO_VERDICT, np.int8),
        components={
            name: Interval(gap.difference, gap.low, gap.high, component_level)
            for name, gap in zip(("tpr", "fpr"), gaps, strict=True)
        },
    )
