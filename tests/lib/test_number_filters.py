from __future__ import annotations

from decimal import Decimal

import pytest
from django.template import engines


def render(source: str, **context: object) -> str:
    return engines["django"].from_string("{% load numbers %}" + source).render(context)


def test_filters_format_numbers_as_people_read_them() -> None:
    assert render("{{ n|count }}", n=12345) == "12,345"
    assert render("{{ x|rate }}", x=0.03124) == "0.0312"
    assert render("{{ d|gap }}", d=-0.2134) == "-0.213"
    assert render("{{ r|ratio }}", r=Decimal("1.2345")) == "1.23"
    assert render("{{ x|percent }}", x=0.123) == "12.3%"
    assert render("{{ p|pvalue }}", p=0.00001) == "&lt; 0.0001"


@pytest.mark.parametrize("name", ["count", "rate", "gap", "ratio", "percent", "pvalue"])
def test_nothing_reads_as_a_dash(name: str) -> None:
    assert render(f"{{{{ x|{name} }}}}", x=None) == "—"


def test_what_is_not_a_number_passes_through_escaped() -> None:
    assert render("{{ x|rate }}", x="<b>") == "&lt;b&gt;"
    assert render("{{ x|pvalue }}", x=3.0) == "3.0"  # not a p-value: shown as it is, not an error


def test_a_count_that_is_not_whole_is_shown_not_raised() -> None:
    assert render("{{ n|count }}", n=14.75) == "14.8"
