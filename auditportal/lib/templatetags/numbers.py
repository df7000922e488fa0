"""Template filters for numbers as people read them, wrapping ``fairness/text/numbers.py`` (the one
source of the formats): ``{% load numbers %}`` then ``{{ n|count }}``, ``{{ x|rate }}``,
``{{ d|gap }}``, ``{{ r|ratio }}``, ``{{ x|percent }}``, ``{{ p|pvalue }}``.

``None`` reads ``—``. A value that is not a number (a string a view already formatted, an empty
string) is shown as it is, so a filter never turns a page into an error; the output is never marked
safe, so autoescaping still applies to whatever passes through.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal

from django import template

from auditportal.fairness.text import numbers

register = template.Library()


def _number(value: object) -> float | int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float | Decimal):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def _filter(format_number: Callable[[float], str]) -> Callable[[object], object]:
    def apply(value: object) -> object:
        if value is None:
            return numbers.MISSING
        number = _number(value)
        if number is None:
            return value
        try:
            return format_number(number)
        except ValueError:
            return value

    return apply


def _count(value: float) -> str:
    if isinstance(value, float) and not value.is_integer():
        return numbers.significant(value)
    return numbers.count(int(value))


register.filter("count", _filter(_count), is_safe=False)
register.filter("rate", _filter(numbers.rate), is_safe=False)
register.filter("gap", _filter(numbers.gap), is_safe=False)
register.filter("ratio", _filter(numbers.ratio), is_safe=False)
register.filter("percent", _filter(numbers.percent), is_safe=False)
register.filter("pvalue", _filter(numbers.pvalue), is_safe=False)
