from __future__ import annotations

import math
import re
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from auditportal.fairness.text import numbers

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)


def test_counts_have_thousands_separators() -> None:
    assert numbers.count(0) == "0"
    assert numbers.count(999) == "999"
    assert numbers.count(12345) == "12,345"
    assert numbers.count(-1234567) == "-1,234,567"
    assert numbers.count(1200.0) == "1,200"
    assert numbers.count(None) == "—"


def test_a_count_that_is_not_whole_is_refused() -> None:
    with pytest.raises(ValueError, match=r"whole number, not 14\.8"):
        numbers.count(14.8)
    with pytest.raises(TypeError):
        numbers.count(True)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0312, "0.0312"),
        (0.2134, "0.213"),
        (0.5, "0.500"),
        (1.0, "1.00"),
        (0.09996, "0.100"),  # rounding carries into the next digit: still three significant digits
        (0.99996, "1.00"),
        (12.345, "12.3"),
        (1234.4, "1,234"),  # more whole digits than three: kept, not zeroed
        (-0.2134, "-0.213"),
        (0.0, "0"),
        (-0.0, "0"),
        (None, "—"),
    ],
)
def test_rates_have_three_significant_digits(value: float | None, text: str) -> None:
    assert numbers.rate(value) == text


def test_gaps_are_signed() -> None:
    assert numbers.gap(0.0312) == "+0.0312"
    assert numbers.gap(-0.2134) == "-0.213"
    assert numbers.gap(0.0) == "0"
    assert numbers.gap(None) == "—"


def test_percentages() -> None:
    assert numbers.percent(0.123) == "12.3%"
    assert numbers.percent(0.05) == "5.00%"
    assert numbers.percent(None) == "—"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "< 0.0001"),
        (0.00009999, "< 0.0001"),
        (0.0001, "0.00010"),
        (0.0312, "0.031"),
        (0.5, "0.50"),
        (0.996, "1.0"),
        (1.0, "1.0"),
        (None, "—"),
    ],
)
def test_p_values(value: float | None, text: str) -> None:
    assert numbers.pvalue(value) == text


def test_a_p_value_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="p-value"):
        numbers.pvalue(1.5)


def test_intervals() -> None:
    assert numbers.interval(-0.401, -0.02) == "[-0.401, -0.0200]"
    assert numbers.interval(0.701, 0.889, signed=False) == "[0.701, 0.889]"
    assert numbers.interval(None, 0.3) == "—"


def test_whole_below_rounds_a_threshold_on_a_count_up() -> None:
    assert numbers.whole_below(14.75) == 15
    assert numbers.whole_below(15.0) == 15
    assert numbers.whole_below(0.2) == 1


@given(st.floats(min_value=0.0, max_value=1e6, allow_nan=False))
def test_whole_below_counts_alike(threshold: float) -> None:
    # For every whole count: below the threshold exactly when below the whole number shown.
    whole = numbers.whole_below(threshold)
    for candidate in (whole - 1, whole, whole + 1):
        assert (candidate < threshold) == (candidate < whole)


def test_nan_and_infinity_are_refused() -> None:
    with pytest.raises(ValueError, match="not a number people can read"):
        numbers.rate(math.nan)
    with pytest.raises(ValueError, match="not a number people can read"):
        numbers.gap(math.inf)


@given(finite.filter(lambda value: value != 0))
def test_significant_digits_keep_the_value_to_within_half_a_unit(value: float) -> None:
    text = numbers.rate(value)
    shown = Decimal(text.replace(",", ""))
    exact = Decimal(value)
    digits = re.sub(r"[^0-9]", "", text).lstrip("0")
    # At least three significant digits shown (more only for whole digits of a large number)...
    assert len(digits) >= 3
    # ...and the shown number is the value rounded at its last digit.
    decimals = len(text.split(".")[1]) if "." in text else 0
    assert abs(shown - exact) <= Decimal(5) * Decimal(10) ** (-decimals - 1)


@given(finite)
def test_gap_is_rate_with_a_sign(value: float) -> None:
    text = numbers.gap(value)
    if value > 0:
        assert text == "+" + numbers.rate(value)
    else:
        assert text == numbers.rate(value)


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_count_reads_back(value: int) -> None:
    text = numbers.count(value)
    assert int(text.replace(",", "")) == value
    assert all(len(part) == 3 for part in text.lstrip("-").split(",")[1:])


def test_plural() -> None:
    assert numbers.plural(1, "comparison") == "1 comparison"
    assert numbers.plural(1200, "comparison") == "1,200 comparisons"
    assert numbers.plural(2, "family", "families") == "2 families"
