"""Numbers as people read them: one formatter per kind of number, for every page, figure, report and
command that shows one (the template filters of ``lib/templatetags/numbers.py`` wrap them).

- a count: whole, with thousands separators, ``12,345``;
- a rate, a gap, a ratio: three significant digits, ``0.0312``, ``0.213``, ``-0.213``, ``1.25``; a gap
  signed, ``+0.0312``; a percentage likewise, ``12.3%``;
- a p-value: ``< 0.0001`` below 0.0001, otherwise two significant digits, ``0.031``;
- a threshold on a count that is not a whole number (z⁴ = 14.8 successes): the whole number a count
  must stay below, rounded up, ``15``;
- nothing (``None``): ``—``.

Numbers stored in documents, CSV and JSON keep their full precision: these are for reading only.
"""

from __future__ import annotations

import math
from typing import Final

MISSING: Final = "—"
DIGITS: Final = 3
P_DIGITS: Final = 2
P_FLOOR: Final = 0.0001


def count(value: float | None) -> str:
    """A count with thousands separators: ``12,345``; a float that is a whole number is taken as one,
    any other number is refused (a count of 14.8 people is a slip: see :func:`whole_below`)."""
    if value is None:
        return MISSING
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"a count is a whole number, not {type(value).__name__}")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"a count is a whole number, not {value!r}")
        value = int(value)
    return f"{value:,}"


def significant(value: float | None, digits: int = DIGITS, *, signed: bool = False) -> str:
    """``value`` to ``digits`` significant digits in plain decimal notation, trailing zeros kept so
    that a column reads alike (``0.500``, ``0.0312``, ``12.3``, ``1,235`` for a number with more whole
    digits than ``digits``); 0 is ``0``; ``signed`` puts ``+`` before a positive number."""
    if value is None:
        return MISSING
    if digits < 1:
        raise ValueError(f"digits must be at least 1, not {digits}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{number!r} is not a number people can read")
    if number == 0:
        return "0"
    # The exponent after rounding (9.996 to 3 digits is 10.0, exponent 1), from the correctly rounded
    # scientific form; fixed notation at the same decimal place rounds the same binary value alike.
    exponent = int(f"{number:.{digits - 1}e}".split("e")[1])
    decimals = max(0, digits - 1 - exponent)
    text = f"{number:,.{decimals}f}"
    return f"+{text}" if signed and number > 0 else text


def rate(value: float | None) -> str:
    """A rate or any fraction in [0, 1]: ``0.213``, ``0.0312``."""
    return significant(value)


def gap(value: float | None) -> str:
    """A difference between two rates, signed: ``+0.0312``, ``-0.213``, ``0``."""
    return significant(value, signed=True)


def ratio(value: float | None) -> str:
    """A ratio of two rates: ``0.812``, ``1.25``."""
    return significant(value)


def percent(value: float | None, digits: int = DIGITS) -> str:
    """A fraction as a percentage: 0.123 is ``12.3%``, 0.05 is ``5.00%``."""
    if value is None:
        return MISSING
    return f"{significant(value * 100, digits)}%"


def pvalue(value: float | None) -> str:
    """A p-value: ``< 0.0001`` below 0.0001, otherwise two significant digits (``0.031``, ``0.50``, ``1.0``)."""
    if value is None:
        return MISSING
    if not 0 <= value <= 1:
        raise ValueError(f"a p-value lies in [0, 1], not {value!r}")
    if value < P_FLOOR:
        return f"< {P_FLOOR:.4f}"
    return significant(value, P_DIGITS)


def interval(low: float | None, high: float | None, *, signed: bool = True, digits: int = DIGITS) -> str:
    """An interval in brackets, ``[-0.401, -0.0200]`` (signed, for gaps) or ``[0.701, 0.889]``; ``—``
    when either bound is missing."""
    if low is None or high is None:
        return MISSING
    return f"[{significant(low, digits, signed=signed)}, {significant(high, digits, signed=signed)}]"


def whole_below(threshold: float) -> int:
    """The whole number a count must stay below to stay below ``threshold``: a count is under 14.8
    exactly when it is under 15 (a threshold that is a whole number stays as it is)."""
    if not math.isfinite(threshold):
        raise ValueError(f"{threshold!r} is not a threshold")
    return math.ceil(threshold)


def plural(number: int, noun: str, plural_noun: str | None = None) -> str:
    """``1 comparison``, ``12,345 comparisons``: a count with its noun."""
    word = noun if number == 1 else (plural_noun or f"{noun}s")
    return f"{count(number)} {word}"
