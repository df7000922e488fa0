"""The three distribution functions the fairness statistics need, in numpy and the standard library.

scipy.stats and statsmodels compute the same values but take about a second to import, which every
command-line audit would pay for a few dozen numbers. tests/audits/test_distributions.py holds these
functions to scipy's and statsmodels' results.
"""

from __future__ import annotations

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
    distinct, inverse = np.unique(values.ravel(), return_inverse=True)
    quantiles = np.array([_quantile(float(value)) for value in distinct], dtype=np.float64)
    result: Floats = quantiles[inverse].reshape(values.shape)
    return result


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
