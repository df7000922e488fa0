"""The distribution functions the fairness statistics need (the normal quantile and tail, Fisher's
exact test, the beta quantile of Clopper-Pearson bounds), in numpy and the standard library.

scipy.stats and statsmodels compute the same values but take about a second to import, which every
command-line audit would pay for a few dozen numbers. tests/audits/test_distributions.py holds these
functions to scipy's and statsmodels' results.
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]

_STANDARD_NORMAL = NormalDist()
_EPS = float(np.finfo(np.float64).eps)
# scipy.stats.fisher_exact counts a table as no more probable than the observed one up to this
# relative difference (and so do we, plus the rounding bound of our own sums).
_FISHER_RELATIVE_TIE = 1e-14


def normal_quantile(p: float | npt.ArrayLike) -> Floats:
    """The standard normal quantile of each ``p`` (scipy.special.ndtri): -inf at 0, inf at 1, NaN
    outside [0, 1]. The values are usually a few distinct levels, so each is computed once."""
    values = np.asarray(p, dtype=np.float64)
    if values.size and (values == values.flat[0]).all():
        # One level, as for most calls (a scalar alpha broadcast over the groups): np.unique's sort would
        # cost more than the quantile itself.
        return np.full(values.shape, _quantile(float(values.flat[0])))
    distinct, inverse = np.unique(values.ravel(), return_inverse=True)
    quantiles = np.array([_quantile(float(value)) for value in distinct], dtype=np.float64)
    result: Floats = quantiles[inverse].reshape(values.shape)
    return result


@functools.lru_cache(maxsize=1 << 12)
def _quantile(p: float) -> float:
    if 0 < p < 1:
        return _STANDARD_NORMAL.inv_cdf(p)
    if p == 0:
        return -math.inf
    if p == 1:
        return math.inf
    return math.nan


_erfc = np.frompyfunc(math.erfc, 1, 1)


def normal_two_sided_p(z: npt.ArrayLike) -> Floats:
    """``2 P(Z > |z|)`` for a standard normal Z: a two-sided z-test's p-value."""
    tail = np.abs(np.asarray(z, dtype=np.float64)) * math.sqrt(0.5)
    result: Floats = np.asarray(_erfc(tail), dtype=np.float64)
    return result


def fisher_exact_p(a: int, b: int, c: int, d: int) -> float:
    """The two-sided p-value of Fisher's exact test of the table ``[[a, b], [c, d]]`` as
    scipy.stats.fisher_exact defines it: the probability, given the margins, of all tables (values
    ``x`` of the top-left cell) no more probable than the observed one.

    The hypergeometric probabilities of ``x`` are built relative to the observed table from the
    ratios of neighbouring ones, ``P(x + 1) / P(x)``, summed as logarithms outward from ``a``: exact
    integers go into every ratio, so no large factorials cancel. Tables whose probability equals
    the observed one's within the rounding of those sums count as ties. Only ``x`` within
    Bernstein's bound of the mean are visited (beyond it a probability is below ``e**-800``, zero
    in a float next to the rest), so a table of millions of rows costs a few thousand terms.
    """
    if min(a, b, c, d) < 0:
        raise ValueError(f"a contingency table holds counts, not {[[a, b], [c, d]]}")
    row1, row2, column1 = a + b, c + d, a + c
    total = row1 + row2
    column2 = total - column1
    if 0 in (row1, row2, column1, column2):
        return 1.0  # a single table has these margins
    mean = row1 * column1 / total
    # x is a sum of draws without replacement, so Bernstein's inequality with the binomial variance
    # (of either way round of drawing) bounds its tails: P(|x - mean| >= reach) <= e**-800.
    variance = row1 * column1 * min(row2, column2) / total**2
    reach = (1600 / 3 + math.sqrt((1600 / 3) ** 2 + 6400 * variance)) / 2
    low = max(0, column1 - row2, math.ceil(mean - reach))
    high = min(row1, column1, math.floor(mean + reach))
    if not low <= a <= high:
        return 0.0  # the observed table is less probable than e**-800 (below the smallest float)
    x = np.arange(low, high, dtype=np.float64)
    # log P(x + 1) / P(x) for x = low .. high - 1; the products are exact up to 2**53.
    step = np.log(((row1 - x) * (column1 - x)) / ((x + 1) * (row2 - column1 + x + 1)))
    at = a - low
    # log P(x) / P(a) for x = low .. high, summed outward from a, and a bound on its rounding.
    relative = np.concatenate((-np.cumsum(step[:at][::-1])[::-1], [0.0], np.cumsum(step[at:])))
    magnitude = np.concatenate((np.cumsum(np.abs(step[:at][::-1]))[::-1], [0.0], np.cumsum(np.abs(step[at:]))))
    distance = np.abs(np.arange(low, high + 1) - a)
    rounding = _EPS * (4 * distance + 2 * magnitude * np.maximum(distance, 1))
    no_more_probable = relative <= math.log1p(_FISHER_RELATIVE_TIE) + rounding
    weights = np.exp(relative - relative.max())
    p = float(weights[no_more_probable].sum() / weights.sum())
    return min(p, 1.0)


# --------------------------------------------------------------------------- the beta distribution

# The continued fraction of the incomplete beta function stops when a factor is this close to 1.
_BETA_FRACTION_TOLERANCE = 1e-16
_BETA_FRACTION_TERMS = 100_000
_TINY = 1e-300
# Newton's method stops at steps of a few units in the last place: the residual's own rounding.
_QUANTILE_TOLERANCE = 8 * _EPS
# A shape up to this integer has a finite sum for one tail of the incomplete beta function.
_FINITE_SUM_BELOW = 64
# Stirling's series for log-gamma, B_2k / (2k (2k - 1)), k = 1..7: below 1e-17 relative from x = 10.
_STIRLING_FROM = 10.0
_STIRLING_COEFFICIENTS = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156)


def beta_quantile(p: float, a: float, b: float, *, upper: bool = False) -> float:
    """The ``p`` quantile of the beta distribution with shapes ``a, b > 0`` (scipy.stats.beta.ppf):
    the x with ``I_x(a, b) = p``, I the regularised incomplete beta function; 0 at p = 0, 1 at p = 1.
    With ``upper``, the x with ``1 - I_x(a, b) = p`` (scipy.stats.beta.isf): an upper quantile whose
    tail probability is given exactly, not rounded next to 1.

    Newton's method on whichever tail is below 1/2 (so that the residual is never the difference of
    two numbers next to 1), kept inside a bracket that every evaluation narrows: a step that would
    leave it bisects instead, geometrically while the bracket spans orders of magnitude, so it
    converges from any start.
    """
    if not (a > 0 and b > 0) or math.isnan(p):
        return math.nan
    if p <= 0 or p >= 1:
        if p not in (0.0, 1.0):
            return math.nan
        return float(p == 0) if upper else float(p)
    lower_p, upper_p = (1.0 - p, p) if upper else (p, 1.0 - p)
    # Closed forms: I_x(a, 1) = x**a and I_x(1, b) = 1 - (1 - x)**b.
    if b == 1 and lower_p <= 0.5:
        return math.exp(math.log(lower_p) / a)
    if a == 1 and upper_p <= 0.5:
        return -math.expm1(math.log(upper_p) / b)
    on_lower = lower_p <= upper_p
    low, high = 0.0, 1.0
    x = _beta_quantile_guess(lower_p, upper_p, a, b)
    log_beta = _log_beta(a, b)
    for _ in range(300):
        below, above = _incomplete_beta(x, a, b, log_beta)
        residual = below - lower_p if on_lower else upper_p - above
        if residual < 0:
            low = x
        else:
            high = x
        log_density = (a - 1) * math.log(x) + (b - 1) * math.log1p(-x) - log_beta
        step = x - residual / math.exp(log_density) if -700 < log_density < 700 else math.nan
        if abs(step - x) <= _QUANTILE_TOLERANCE * x:
            return step  # converged: what is left is the rounding of the residual
        if low < step < high:
            following = step
        elif low > 0 and high / low > 4:
            following = math.sqrt(low * high)
        elif low == 0:
            following = high / 16
        else:
            following = low + (high - low) / 2
        if following <= 0:
            return 0.0  # below the smallest float
        if high - low <= _QUANTILE_TOLERANCE * high:
            return following
        x = following
    return x


def _log_beta(a: float, b: float) -> float:
    """log B(a, b), without the cancellation of lgamma(b) - lgamma(a + b) for a large b (of two
    numbers near b log b: B(3, 10**6) would lose about 9 digits, B(0.1, 10**4) about 5): the ratio
    is the product it stands for where the smaller shape is a small integer, as in every
    Clopper-Pearson bound, and otherwise the difference of Stirling's series, term by term."""
    small, large = min(a, b), max(a, b)
    if small == int(small) and small <= _FINITE_SUM_BELOW:
        return math.lgamma(small) - sum(math.log(large + i) for i in range(int(small)))
    if large >= _STIRLING_FROM:
        return math.lgamma(small) + _log_gamma_ratio(large, small)
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def _log_gamma_ratio(x: float, a: float) -> float:
    """lgamma(x) - lgamma(x + a) for x of at least _STIRLING_FROM, from Stirling's series."""
    return -(x - 0.5) * math.log1p(a / x) - a * math.log(x + a) + a + _stirling(x) - _stirling(x + a)


def _stirling(x: float) -> float:
    """lgamma(x) - ((x - 1/2) log x - x + log(2 pi)/2): the series sum B_2k / (2k (2k - 1) x**(2k - 1))."""
    inverse, square = 1.0 / x, 1.0 / (x * x)
    total, power = 0.0, inverse
    for coefficient in _STIRLING_COEFFICIENTS:
        total += coefficient * power
        power *= square
    return total


def _incomplete_beta(x: float, a: float, b: float, log_beta: float) -> tuple[float, float]:
    """The regularised incomplete beta function I_x(a, b) and its complement 1 - I_x(a, b), the smaller
    of the two computed directly, to full relative precision.

    Where a shape is a small integer (every Clopper-Pearson bound has one), one tail is a finite sum
    of positive terms, 1 - I_x(a, b) = (1 - x)**b sum_{j<a} (b)_j x**j / j! (and the mirror image for
    b): the continued fraction would subtract numbers next to 1 there (1 - (a + b) x / (a + 1) at
    x near a / (a + b)), losing some ten digits when the other shape is in the millions. Otherwise,
    and for the other tail where it is the smaller, the continued fraction (modified Lentz) on the
    side of the mean where it converges fast (Numerical Recipes, 6.4).
    """
    if x <= 0:
        return 0.0, 1.0
    if x >= 1:
        return 1.0, 0.0
    mean_side = (a + 1) / (a + b + 2)
    if _small_integer(a):
        above = _finite_tail(x, a, b)
        if above <= 0.75 or x >= mean_side:
            return 1.0 - above, above
        below = math.exp(a * math.log(x) + b * math.log1p(-x) - log_beta) * _beta_fraction(x, a, b) / a
        return below, 1.0 - below
    if _small_integer(b):
        below = _finite_tail(1.0 - x, b, a)  # 1 - x is exact for x of 1/2 and above
        if below <= 0.75 or x <= mean_side:
            return below, 1.0 - below
        above = math.exp(a * math.log(x) + b * math.log1p(-x) - log_beta) * _beta_fraction(1.0 - x, b, a) / b
        return 1.0 - above, above
    front = math.exp(a * math.log(x) + b * math.log1p(-x) - log_beta)
    if x < mean_side:
        below = front * _beta_fraction(x, a, b) / a
        return below, 1.0 - below
    above = front * _beta_fraction(1.0 - x, b, a) / b
    return 1.0 - above, above


def _small_integer(shape: float) -> bool:
    return shape == int(shape) and shape <= _FINITE_SUM_BELOW


def _finite_tail(x: float, a: float, b: float) -> float:
    """1 - I_x(a, b) for an integer a: (1 - x)**b sum_{j<a} (b)_j x**j / j!, every term positive."""
    term, total = 1.0, 1.0
    for j in range(1, int(a)):
        term *= (b + j - 1) * x / j
        total += term
    return math.exp(b * math.log1p(-x)) * total


def _beta_fraction(x: float, a: float, b: float) -> float:
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    result = d
    for m in range(1, _BETA_FRACTION_TERMS):
        # The even step, then the odd one.
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            factor = c * d
            result *= factor
        if abs(factor - 1.0) <= _BETA_FRACTION_TOLERANCE:
            return result
    return result


def _beta_quantile_guess(p: float, upper_p: float, a: float, b: float) -> float:
    """A starting point (Numerical Recipes, 6.4, invbetai): a normal approximation for shapes of at
    least 1, the two tails' power laws otherwise."""
    if a >= 1 and b >= 1:
        t = math.sqrt(-2 * math.log(min(p, upper_p)))
        z = (2.30753 + t * 0.27061) / (1 + t * (0.99229 + t * 0.04481)) - t
        z = -z if p < 0.5 else z
        lam = (z * z - 3) / 6
        h = 2 / (1 / (2 * a - 1) + 1 / (2 * b - 1))
        w = z * math.sqrt(lam + h) / h - (1 / (2 * b - 1) - 1 / (2 * a - 1)) * (lam + 5 / 6 - 2 / (3 * h))
        guess = a / (a + b * math.exp(min(2 * w, 700.0)))
    else:
        lower_tail = math.exp(a * math.log(a / (a + b))) / a
        upper_tail = math.exp(b * math.log(b / (a + b))) / b
        total = lower_tail + upper_tail
        on_lower = p < lower_tail / total
        guess = (a * total * p) ** (1 / a) if on_lower else 1 - (b * total * upper_p) ** (1 / b)
    return min(max(guess, _TINY), 1 - _EPS)
