"""Always-valid judgement of a rate watched over repeated looks (production monitoring).

A deployed model is looked at after every batch of predictions. Judging each look afresh with a
fixed-level interval (the audit's Wilson or Clopper-Pearson interval at ``1 - alpha``) raises false
alarms far more often than alpha over a deployment's life: every look is another chance to err
(docs/monitoring.md measures it). Here each rate gets a *confidence sequence* instead: a sequence of
intervals that holds the true rate at every look at once, with probability ``1 - alpha``, however many
looks are taken and whenever the monitor stops.

Method: the beta-binomial mixture martingale (Robbins 1970, "Statistical methods related to the law of
the iterated logarithm"; Howard, Ramdas, McAuliffe & Sekhon 2021, "Time-uniform, nonparametric,
nonasymptotic confidence sequences", Ann. Statist. 49(2), sections 3.3 and 3.5). After ``n`` trials
with ``S`` successes (cumulative, in any batches), for a candidate rate ``p``::

    M_n(p) = B(a + S, b + n - S) / B(a, b) / (p**S (1 - p)**(n - S))

the Beta(a, b) mixture of likelihood ratios against ``p``. Where ``p`` is the true rate, ``M_n(p)`` is a
non-negative martingale starting at 1, so by Ville's inequality it ever reaches ``1/alpha`` with
probability at most alpha. The confidence sequence is ``{p : M_n(p) < 1/alpha}``: an interval (``log M``
is convex in ``p``) that always holds the observed rate ``S/n`` (there ``M_n <= 1``: a mixture of
likelihoods never exceeds the largest). Its ends are found by bisection on each side of ``S/n`` with
``math.lgamma``; the reported ends are the bisection's outer points, so the reported interval holds the
exact one. ``n = 0`` gives [0, 1]; ``S = 0`` has lower end 0 and ``S = n`` upper end 1, in closed form.

The prior (:class:`MixturePrior`). Any Beta(a, b) fixed before the data gives a valid sequence; it sets
where the sequence is tightest. A monitor judges a rate against a limit, so the prior is centred on the
limit (``a / (a + b)`` = the limit) with ``a + b`` = ``m`` pseudo-trials tuned so the boundary is
tightest after ``planned_trials`` trials: ``m = planned / (2 log(1/alpha) + log(1 + 2 log(1/alpha)))``:
Howard et al.'s optimal precision of a two-sided normal mixture for intrinsic time ``v``,
``rho = v / (2 log(1/alpha) + log(1 + 2 log(1/alpha)))`` (section 3.5; ``best_rho`` in their confseq
package), with ``v = planned p(1 - p)`` and ``m = rho / (p(1 - p))`` at the centre ``p``. A breach is
decided by ``M(limit)``, a mixture centred on the rate it tests, as confseq's Bernoulli interval centres
one on each candidate rate. Measured at alpha 0.05/6 and an observed rate of 8%, the
lower end after 1,000 trials is 0.0521 with the tuned prior and 0.0494 with Jeffreys' Beta(1/2, 1/2);
a prior centred far from the truth costs more (centred at 50%, m = 80: 0.0216). Where no limit gives a
centre known before the data (the two groups of a gap), Jeffreys' prior :data:`JEFFREYS` is used:
centring it on an observed rate would make the prior depend on the data and void Ville's inequality.

Judging (:func:`judge_rate`, :func:`judge_gap`). An absolute limit ("FNR at most 5%",
:attr:`Bound.AT_MOST`; "selection rate at least 30%", :attr:`Bound.AT_LEAST`): a breach is confirmed
when the sequence lies entirely beyond the limit, "within" when entirely on the allowed side, otherwise
"watching", with the margin the sequence's near end still has to go and the observed rate that would
confirm a breach at this many trials (the sequential boundary a page draws). A gap limit (group minus
reference): each group's sequence at ``alpha/2``, so both hold at once with ``1 - alpha`` (a union
bound), and the difference's sequence ``[L1 - U2, U1 - L2]``; a breach when it lies entirely beyond the
gap limit. A compliant model whose rate changes over time but never crosses its limit is covered too:
the lower end grows with ``S`` (tests check it on a grid), and such a model's failures can be coupled
below those of a model exactly at the limit, whose breach probability is at most alpha.

Alpha split: a monitor judges several metrics x groups (and group shares, :mod:`.drift`); each
comparison gets ``alpha / K`` (Bonferroni over the K comparisons its policy declares, counted before any
data: a group too small today keeps its share of alpha), and the confidence sequence takes care of the
repeated looks, so a model that keeps to every limit raises any false alarm in at most alpha of
deployments over the whole horizon (:mod:`.monitor` does the split). A monitor that restarts its counts
(tumbling windows instead of counting since promotion) spends ``alpha * 6 / (pi**2 k**2)`` on its k-th
window (:func:`window_alpha`; these sum to alpha). A sliding window of the last N batches is *not*
covered: its looks share rows, and no martingale runs through them.

Smallest batch: a group with fewer than ``min_rows`` rows in the judged window, or no trials in the
metric's denominator, is :attr:`Status.TOO_FEW`: never judged, so never a false alarm. Skipping looks
costs no validity (the sequence holds at every look, judged or not).

Pure standard library and numpy (the simulations use :func:`confidence_sequence_bounds` on arrays).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from typing import Any, Final, cast

import numpy as np
import numpy.typing as npt

from auditportal.fairness.errors import UserError
from auditportal.fairness.statistics.stats import RATES, Verdict

Floats = npt.NDArray[np.float64]
JSON = dict[str, Any]

METHOD: Final = "beta-binomial mixture confidence sequence (Robbins 1970; Howard et al. 2021)"
SOURCE: Final = (
    "Howard, Ramdas, McAuliffe & Sekhon (2021), Time-uniform, nonparametric, nonasymptotic confidence "
    "sequences, Annals of Statistics 49(2):1055-1080, sections 3.3 and 3.5; Robbins (1970), Statistical "
    "methods related to the law of the iterated logarithm, Ann. Math. Statist. 41(5); Ville's inequality"
)
ALPHA_SPLIT: Final = (
    "Bonferroni over the K comparisons the monitor's policy declares (each at alpha/K); the confidence "
    "sequence holds every comparison at all looks at once; a gap's two groups each at alpha/(2K)"
)
DEFAULT_PLANNED_TRIALS: Final = 1_000
# Bisection steps: each halves the bracket, which starts at most [0, 1]; 64 leave it below 1e-19.
_STEPS: Final = 64
# Stored numbers keep this many significant digits: the bisection is exact to far more, and a
# document reads the same on every machine. Interval ends are rounded outward.
JSON_DIGITS: Final = 10
# A planning figure (trials needed) gives up above this many trials, as the audit's sample sizes do.
NEEDED_CAP: Final = 10_000_000


class MonitorPolicyError(UserError):
    """A monitor's policy value that cannot be judged with (``field`` names it)."""


class Bound(enum.StrEnum):
    """Which side of an absolute limit is allowed."""

    AT_MOST = "at_most"  # the rate must not exceed the limit (an error rate: FNR, FPR)
    AT_LEAST = "at_least"  # the rate must not fall below it (a selection rate, a TPR)


class GapSide(enum.StrEnum):
    """Which gaps (group minus reference) breach: beyond ``+limit``, below ``-limit``, or either."""

    EITHER = "either"
    ABOVE = "above"
    BELOW = "below"


class Status(enum.StrEnum):
    """One comparison's finding at one look, and the portal's verdict it corresponds to."""

    BREACH = "breach"  # the sequence lies entirely beyond the limit: confirmed
    WATCHING = "watching"  # the sequence holds the limit: not decided yet
    WITHIN = "within"  # the sequence lies entirely on the allowed side
    TOO_FEW = "too_few"  # fewer rows than the smallest judged batch, or no trials: not judged
    UNSEEN = "unseen"  # a group the training data never had (drift): flagged, never judged

    @property
    def verdict(self) -> Verdict | None:
        return {
            Status.BREACH: Verdict.FAIL,
            Status.WATCHING: Verdict.INCONCLUSIVE,
            Status.WITHIN: Verdict.PASS,
        }.get(self)


# Worst first: a look's status is its worst comparison's.
STATUS_ORDER: Final = (Status.BREACH, Status.UNSEEN, Status.WATCHING, Status.TOO_FEW, Status.WITHIN)


def worst_status(statuses: list[Status] | tuple[Status, ...]) -> Status | None:
    return min(statuses, key=STATUS_ORDER.index) if statuses else None


# --------------------------------------------------------------------------- the prior


@dataclass(frozen=True)
class MixturePrior:
    """The Beta(a, b) mixing distribution of the martingale (see the module's docstring)."""

    a: float
    b: float

    def __post_init__(self) -> None:
        if not (self.a > 0 and self.b > 0 and math.isfinite(self.a) and math.isfinite(self.b)):
            raise ValueError(f"a Beta prior needs a > 0 and b > 0, not ({self.a}, {self.b})")

    @property
    def name(self) -> str:
        return "jeffreys" if (self.a, self.b) == (0.5, 0.5) else "tuned"

    @classmethod
    def tuned(cls, centre: float, *, alpha: float, planned_trials: int = DEFAULT_PLANNED_TRIALS) -> MixturePrior:
        """Centred on ``centre`` (a limit, a training share: fixed before the data), tightest after
        about ``planned_trials`` trials at level ``1 - alpha``."""
        _check_alpha(alpha)
        if not 0 < centre < 1:
            raise ValueError(f"a prior's centre must lie strictly between 0 and 1, not {centre}")
        if planned_trials < 1:
            raise ValueError(f"planned_trials must be at least 1, not {planned_trials}")
        two_log = 2 * math.log(1 / alpha)
        pseudo = planned_trials / (two_log + math.log1p(two_log))
        return cls(centre * pseudo, (1 - centre) * pseudo)

    def as_json(self) -> JSON:
        return {"a": self.a, "b": self.b, "name": self.name}


JEFFREYS: Final = MixturePrior(0.5, 0.5)


# --------------------------------------------------------------------------- the confidence sequence


def confidence_sequence_bounds(
    successes: npt.ArrayLike,
    trials: npt.ArrayLike,
    *,
    alpha: float | npt.ArrayLike,
    a: float | npt.ArrayLike = 0.5,
    b: float | npt.ArrayLike = 0.5,
) -> tuple[Floats, Floats]:
    """The confidence sequence's ends at cumulative ``successes`` of ``trials``, elementwise (all
    arguments broadcast): the set ``{p : M(p) < 1/alpha}`` of the Beta(a, b) mixture, widened to
    the bisection's outer points. [0, 1] where ``trials`` is 0."""
    s, n, level, a_, b_ = np.broadcast_arrays(
        np.asarray(successes, dtype=np.float64),
        np.asarray(trials, dtype=np.float64),
        np.asarray(alpha, dtype=np.float64),
        np.asarray(a, dtype=np.float64),
        np.asarray(b, dtype=np.float64),
    )
    if np.any((n < 0) | (s < 0) | (s > n)):
        raise ValueError("successes must lie between 0 and trials, and trials must not be negative")
    if np.any((level <= 0) | (level >= 1)):
        raise ValueError("alpha must be between 0 and 1 (exclusive)")
    failures = n - s
    # log B(a + S, b + n - S) - log B(a, b): the mixture's log likelihood, the same for every p.
    log_mixture = _lgamma(a_ + s) + _lgamma(b_ + failures) - _lgamma(a_ + b_ + n)
    log_mixture -= _lgamma(a_) + _lgamma(b_) - _lgamma(a_ + b_)
    threshold = np.log(1 / level)
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = np.where(n > 0, s / np.where(n > 0, n, 1), 0.5)

    def outside(p: Floats) -> npt.NDArray[np.bool_]:
        with np.errstate(divide="ignore", invalid="ignore"):
            log_m = log_mixture - np.where(s > 0, s * np.log(p), 0.0)
            log_m -= np.where(failures > 0, failures * np.log1p(-p), 0.0)
        return log_m >= threshold

    # Lower end: between 0 (outside: M grows without bound as p -> 0 when S > 0) and the observed rate.
    out, inside = np.zeros_like(observed), observed.copy()
    for _ in range(_STEPS):
        middle = (out + inside) / 2
        away = outside(middle)
        out, inside = np.where(away, middle, out), np.where(away, inside, middle)
    low = np.where((n > 0) & (s > 0), out, 0.0)
    out, inside = np.ones_like(observed), observed.copy()
    for _ in range(_STEPS):
        middle = (out + inside) / 2
        away = outside(middle)
        out, inside = np.where(away, middle, out), np.where(away, inside, middle)
    high = np.where((n > 0) & (failures > 0), out, 1.0)
    return cast(Floats, low), cast(Floats, high)


_lgamma_array = np.vectorize(math.lgamma, otypes=[np.float64])


def _lgamma(values: Floats) -> Floats:
    if values.size == 0:
        return values.copy()
    distinct, inverse = np.unique(values, return_inverse=True)
    return cast(Floats, _lgamma_array(distinct)[inverse].reshape(values.shape))


@dataclass(frozen=True)
class SequenceInterval:
    """The confidence sequence of one rate at one look."""

    successes: int
    trials: int
    low: float
    high: float
    alpha: float
    prior: MixturePrior

    @property
    def estimate(self) -> float | None:
        return self.successes / self.trials if self.trials else None

    def contains(self, rate: float) -> bool:
        return self.low <= rate <= self.high

    def as_json(self) -> JSON:
        return {
            "successes": self.successes,
            "trials": self.trials,
            "estimate": rounded(self.estimate),
            "low": rounded(self.low, ROUND_FLOOR),
            "high": rounded(self.high, ROUND_CEILING),
            "alpha": self.alpha,
            "prior": self.prior.as_json(),
        }


def confidence_sequence(
    successes: int, trials: int, *, alpha: float, prior: MixturePrior = JEFFREYS
) -> SequenceInterval:
    """The confidence sequence at level ``1 - alpha`` after ``successes`` of ``trials`` (cumulative)."""
    _check_counts(successes, trials)
    _check_alpha(alpha)
    low, high = _bounds(int(successes), int(trials), alpha, prior)
    return SequenceInterval(int(successes), int(trials), low, high, alpha, prior)


def _bounds(successes: int, trials: int, alpha: float, prior: MixturePrior) -> tuple[float, float]:
    """:func:`confidence_sequence_bounds` for one look, in plain floats (a look judges dozens of
    comparisons and searches boundaries: numpy's per-call cost would dominate)."""
    if trials == 0:
        return 0.0, 1.0
    failures = trials - successes
    a, b = prior.a, prior.b
    log_mixture = math.lgamma(a + successes) + math.lgamma(b + failures) - math.lgamma(a + b + trials)
    log_mixture -= math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    threshold = math.log(1 / alpha)
    observed = successes / trials

    def outside(p: float) -> bool:
        if (successes and p <= 0.0) or (failures and p >= 1.0):
            return True  # the martingale is infinite there (an end closer to 0 or 1 than floats go)
        log_m = log_mixture
        if successes:
            log_m -= successes * math.log(p)
        if failures:
            log_m -= failures * math.log1p(-p)
        return log_m >= threshold

    def edge(out: float, inside: float) -> float:
        """Bisection between a rate outside the sequence and one inside it: the outside end, kept."""
        for _ in range(_STEPS):
            middle = (out + inside) / 2
            if outside(middle):
                out = middle
            else:
                inside = middle
        return out

    low = edge(0.0, observed) if successes else 0.0
    high = edge(1.0, observed) if failures else 1.0
    return low, high


def window_alpha(alpha: float, window: int) -> float:
    """The alpha of a monitor's ``window``-th tumbling window (1, 2, ...) when its counts restart each
    window: ``alpha * 6 / (pi**2 window**2)``, which sums to alpha over all windows. A monitor that
    counts since promotion, never restarting, has one window for ever and spends the whole alpha."""
    _check_alpha(alpha)
    if window < 1:
        raise ValueError(f"window must be at least 1, not {window}")
    return alpha * 6 / (math.pi**2 * window**2)


def split_alpha(alpha: float, comparisons: int) -> float:
    """Each of the ``comparisons`` a monitor declares is judged at ``alpha / comparisons`` (Bonferroni)."""
    _check_alpha(alpha)
    if comparisons < 1:
        raise ValueError(f"a monitor judges at least one comparison, not {comparisons}")
    return alpha / comparisons


# --------------------------------------------------------------------------- an absolute limit


@dataclass(frozen=True)
class RateFinding:
    """One group's rate against an absolute limit at one look.

    ``margin``: how far the sequence's near end still is from confirming a breach (``limit - low`` for
    an upper limit, ``high - limit`` for a lower one; 0 or less once breached). ``boundary``: the
    observed rate that would confirm a breach at this many trials (the smallest for an upper limit,
    the largest for a lower one; None if none would). ``near``: watching while the observed rate is
    already beyond the limit, a page's warning. ``trials_needed``: while watching, about how many
    trials in all (the metric's denominator) the sequence would need to decide if the observed rate
    held, towards ``needed_towards`` (None above :data:`NEEDED_CAP`, or at the limit itself).
    """

    metric: str
    group: str
    bound: Bound
    limit: float
    status: Status
    rows: int
    interval: SequenceInterval
    margin: float
    near: bool
    boundary: float | None
    trials_needed: int | None
    needed_towards: Status | None

    @property
    def estimate(self) -> float | None:
        return self.interval.estimate

    def as_json(self) -> JSON:
        return {
            "metric": self.metric,
            "group": self.group,
            "bound": self.bound.value,
            "limit": self.limit,
            "status": self.status.value,
            "verdict": _verdict_json(self.status),
            "rows": self.rows,
            **self.interval.as_json(),
            "margin": rounded(self.margin),
            "near": self.near,
            "boundary": rounded(self.boundary),
            "trials_needed": self.trials_needed,
            "needed_towards": None if self.needed_towards is None else self.needed_towards.value,
        }


def judge_rate(
    successes: int,
    trials: int,
    *,
    limit: float,
    bound: Bound = Bound.AT_MOST,
    alpha: float,
    rows: int | None = None,
    min_rows: int = 0,
    prior: MixturePrior | None = None,
    metric: str = "",
    group: str = "",
) -> RateFinding:
    """One group's rate (``successes`` of ``trials``, cumulative over the judged window) against an
    absolute ``limit`` at level ``1 - alpha`` (already this comparison's share of the monitor's alpha).

    ``rows``: the group's rows in the window (``trials`` when not given); fewer than ``min_rows``, or
    no trials, is TOO_FEW. ``prior``: tuned on the limit with :data:`DEFAULT_PLANNED_TRIALS` unless given.
    """
    _check_counts(successes, trials)
    _check_alpha(alpha)
    _check_limit(limit, "limit")
    bound = Bound(bound)
    rows = trials if rows is None else rows
    if prior is None:
        prior = MixturePrior.tuned(limit, alpha=alpha)
    interval = confidence_sequence(successes, trials, alpha=alpha, prior=prior)
    upper = bound is Bound.AT_MOST
    margin = limit - interval.low if upper else interval.high - limit
    estimate = interval.estimate
    beyond = estimate is not None and (estimate > limit if upper else estimate < limit)
    if rows < min_rows or trials == 0:
        status = Status.TOO_FEW
    elif (interval.low > limit) if upper else (interval.high < limit):
        status = Status.BREACH
    elif (interval.high < limit) if upper else (interval.low > limit):
        status = Status.WITHIN
    else:
        status = Status.WATCHING
    needed, towards = None, None
    if status is Status.WATCHING and estimate is not None and estimate != limit:
        towards = Status.BREACH if beyond else Status.WITHIN
        needed = _trials_needed(estimate, trials, limit=limit, upper=upper, towards=towards, alpha=alpha, prior=prior)
    return RateFinding(
        metric=metric,
        group=group,
        bound=bound,
        limit=limit,
        status=status,
        rows=int(rows),
        interval=interval,
        margin=margin,
        near=status is Status.WATCHING and beyond,
        boundary=breach_boundary(trials, limit=limit, bound=bound, alpha=alpha, prior=prior),
        trials_needed=needed,
        needed_towards=towards,
    )


def breach_boundary(
    trials: int, *, limit: float, bound: Bound = Bound.AT_MOST, alpha: float, prior: MixturePrior
) -> float | None:
    """The observed rate at which ``trials`` trials would confirm a breach of ``limit``: the smallest
    (an upper limit) or largest (a lower limit) ``S / trials`` whose sequence lies beyond it; None when
    no count of successes would (too few trials, or none)."""
    if trials <= 0:
        return None
    upper = Bound(bound) is Bound.AT_MOST

    def breaches(count: int) -> bool:
        low, high = _bounds(count, trials, alpha, prior)
        return low > limit if upper else high < limit

    # The ends move with S (checked by the tests), so the breaching counts are one run at one end.
    extreme = trials if upper else 0
    if not breaches(extreme):
        return None
    inner, outer = (-1, trials) if upper else (trials + 1, 0)  # inner never breaches; outer does
    while abs(outer - inner) > 1:
        middle = (inner + outer) // 2
        if breaches(middle):
            outer = middle
        else:
            inner = middle
    return outer / trials


def _trials_needed(
    rate: float, trials: int, *, limit: float, upper: bool, towards: Status, alpha: float, prior: MixturePrior
) -> int | None:
    """The smallest total of trials at which the sequence at ``rate`` would decide towards ``towards``."""

    def decides(total: int) -> bool:
        low, high = _bounds(round(rate * total), total, alpha, prior)
        above, below = low > limit, high < limit
        if towards is Status.BREACH:
            return above if upper else below
        return below if upper else above

    inner, outer = trials, max(2 * trials, 1)
    while not decides(outer):
        if outer >= NEEDED_CAP:
            return None
        inner, outer = outer, min(2 * outer, NEEDED_CAP)
    while outer - inner > 1:
        middle = (inner + outer) // 2
        if decides(middle):
            outer = middle
        else:
            inner = middle
    return outer


# --------------------------------------------------------------------------- a gap against the reference


@dataclass(frozen=True)
class GapFinding:
    """One group's rate minus the reference group's against a gap limit at one look.

    ``group_interval`` and ``reference_interval`` are each at ``alpha / 2``; the difference's sequence
    is ``[low, high]``. ``margin``: how far its near end still is from the breaching side's limit (0 or
    less once breached); ``near``: watching while the observed gap is already beyond the limit."""

    metric: str
    group: str
    reference: str
    side: GapSide
    limit: float
    status: Status
    rows: int
    reference_rows: int
    group_interval: SequenceInterval
    reference_interval: SequenceInterval
    low: float
    high: float
    alpha: float
    margin: float
    near: bool

    @property
    def difference(self) -> float | None:
        group, reference = self.group_interval.estimate, self.reference_interval.estimate
        return None if group is None or reference is None else group - reference

    def as_json(self) -> JSON:
        return {
            "metric": self.metric,
            "group": self.group,
            "reference": self.reference,
            "side": self.side.value,
            "limit": self.limit,
            "status": self.status.value,
            "verdict": _verdict_json(self.status),
            "rows": self.rows,
            "reference_rows": self.reference_rows,
            "difference": rounded(self.difference),
            "low": rounded(self.low, ROUND_FLOOR),
            "high": rounded(self.high, ROUND_CEILING),
            "alpha": self.alpha,
            "margin": rounded(self.margin),
            "near": self.near,
            "group_interval": self.group_interval.as_json(),
            "reference_interval": self.reference_interval.as_json(),
        }


def judge_gap(
    group: tuple[int, int],
    reference: tuple[int, int],
    *,
    limit: float,
    side: GapSide = GapSide.EITHER,
    alpha: float,
    rows: tuple[int, int] | None = None,
    min_rows: int = 0,
    prior: MixturePrior = JEFFREYS,
    metric: str = "",
    group_name: str = "",
    reference_name: str = "",
) -> GapFinding:
    """A group's rate minus the reference's, each given as ``(successes, trials)`` cumulative over the
    judged window, against ``limit`` at level ``1 - alpha`` (this comparison's share of the monitor's
    alpha; each group's sequence takes half). ``rows``: the two groups' rows (their trials when not
    given); either below ``min_rows``, or either without trials, is TOO_FEW."""
    _check_alpha(alpha)
    if not 0 <= limit < 1:
        raise MonitorPolicyError(f"a gap limit must lie in [0, 1), not {limit}", field="limit")
    side = GapSide(side)
    group_interval = confidence_sequence(*group, alpha=alpha / 2, prior=prior)
    reference_interval = confidence_sequence(*reference, alpha=alpha / 2, prior=prior)
    low = group_interval.low - reference_interval.high
    high = group_interval.high - reference_interval.low
    group_rows, reference_rows = rows if rows is not None else (group[1], reference[1])
    above_side, below_side = side in (GapSide.EITHER, GapSide.ABOVE), side in (GapSide.EITHER, GapSide.BELOW)
    margins = ([limit - low] if above_side else []) + ([high + limit] if below_side else [])
    margin = min(margins)
    observed = group_interval.estimate is not None and reference_interval.estimate is not None
    difference = (group_interval.estimate or 0.0) - (reference_interval.estimate or 0.0)
    beyond = observed and ((above_side and difference > limit) or (below_side and difference < -limit))
    if min(group_rows, reference_rows) < min_rows or not observed:
        status = Status.TOO_FEW
    elif margin < 0:
        status = Status.BREACH
    elif (not above_side or high < limit) and (not below_side or low > -limit):
        status = Status.WITHIN
    else:
        status = Status.WATCHING
    return GapFinding(
        metric=metric,
        group=group_name,
        reference=reference_name,
        side=side,
        limit=limit,
        status=status,
        rows=int(group_rows),
        reference_rows=int(reference_rows),
        group_interval=group_interval,
        reference_interval=reference_interval,
        low=low,
        high=high,
        alpha=alpha,
        margin=margin,
        near=status is Status.WATCHING and beyond,
    )


# --------------------------------------------------------------------------- helpers


def rounded(value: float | None, rounding: str = ROUND_HALF_EVEN, digits: int = JSON_DIGITS) -> float | None:
    """``value`` to ``digits`` significant digits for a stored document (None stays None); interval
    ends pass ``ROUND_FLOOR`` or ``ROUND_CEILING`` so the stored interval still holds the computed one."""
    if value is None or not math.isfinite(value):
        return None
    if value == 0:
        return 0.0
    exact = Decimal(float(value))
    quantum = Decimal(1).scaleb(exact.adjusted() - digits + 1)
    return float(exact.quantize(quantum, rounding=rounding))


def _verdict_json(status: Status) -> str | None:
    verdict = status.verdict
    return None if verdict is None else verdict.value


def _check_counts(successes: int, trials: int) -> None:
    if not 0 <= successes <= trials:
        raise ValueError(f"successes ({successes}) must lie between 0 and trials ({trials})")


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise MonitorPolicyError(f"alpha must be between 0 and 1 (exclusive), not {alpha}", field="alpha")


def _check_limit(limit: float, field: str) -> None:
    if not 0 < limit < 1:
        raise MonitorPolicyError(f"a rate limit must lie strictly between 0 and 1, not {limit}", field=field)


def check_metric(metric: str, field: str = "metric") -> str:
    if metric not in RATES:
        raise MonitorPolicyError(f"unknown metric {metric!r}; choose one of {', '.join(RATES)}", field=field)
    return metric
