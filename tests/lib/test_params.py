from __future__ import annotations

import pytest

from auditportal.lib.params import MAX_ID, as_id


@pytest.mark.parametrize(("raw", "expected"), [("0", 0), ("42", 42), ("007", 7), (str(MAX_ID), MAX_ID)])
def test_ascii_digits_that_fit_a_64_bit_column_are_an_id(raw: str, expected: int) -> None:
    assert as_id(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [None, "", " 1", "-1", "1.0", "²", "١٢", "9" * 5000, str(MAX_ID + 1), "1\x00", 42],
    ids=["none", "empty", "space", "negative", "decimal", "superscript", "arabic-indic", "5000-digits",
         "above-bigint", "nul", "not-text"],
)  # fmt: skip
def test_anything_else_is_not_an_id(raw: object) -> None:
    assert as_id(raw) is None
