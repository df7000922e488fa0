"""Counts on the approval pages, written for people by the one number formatter
(fairness/text/numbers.py): ``{{ n|thousands }}`` is 1,234, and ``{{ n|counted:"FAIL comparison" }}`` is
"1 FAIL comparison" or "1,234 FAIL comparisons"."""

from __future__ import annotations

from typing import Any

from django import template

from auditportal.fairness.text import numbers

register = template.Library()


@register.filter
def thousands(value: Any) -> str:
    """An integer with thousands separated by commas; anything else as it is."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        return "" if value is None else str(value)
    return numbers.count(number)


@register.filter
def counted(value: Any, noun: str) -> str:
    """``value`` (a number, or a sized collection) and ``noun``, plural unless the count is one."""
    count = len(value) if hasattr(value, "__len__") else int(value or 0)
    return numbers.plural(count, noun)
