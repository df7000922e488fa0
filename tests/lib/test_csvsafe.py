from __future__ import annotations

import csv
import io

import pytest

from auditportal.lib.csvsafe import csv_safe_cell


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ('=HYPERLINK("http://evil.example","click")', '\'=HYPERLINK("http://evil.example","click")'),
        ("+1+2", "'+1+2"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1:A2)", "'@SUM(A1:A2)"),
        ("\t=1+1", "'\t=1+1"),
        ("\r=1+1", "'\r=1+1"),
        ("\n=1+1", "'\n=1+1"),
        ("   =1+1", "'   =1+1"),  # leading spaces do not hide a formula
    ],
)
def test_text_that_a_spreadsheet_would_run_is_written_with_a_leading_apostrophe(value: str, written: str) -> None:
    assert csv_safe_cell(value) == written


@pytest.mark.parametrize("value", ["female", "a&b", "18-29", "50%", "", "'=already quoted", "x=1"])
def test_other_text_is_written_as_it_is(value: str) -> None:
    assert csv_safe_cell(value) == value


def test_numbers_stay_numbers_even_when_negative() -> None:
    assert csv_safe_cell(-0.25) == -0.25
    assert csv_safe_cell(-3) == -3
    assert csv_safe_cell(0.1) == 0.1


def test_none_is_empty_and_booleans_are_words() -> None:
    assert csv_safe_cell(None) == ""
    assert csv_safe_cell(True) == "true"
    assert csv_safe_cell(False) == "false"


def test_a_written_row_reads_back_with_the_prefix_and_the_numbers() -> None:
    buffer = io.StringIO()
    csv.writer(buffer).writerow([csv_safe_cell(cell) for cell in ("=cmd|' /C calc'!A0", -0.5, None, "b")])
    assert next(csv.reader(io.StringIO(buffer.getvalue()))) == ["'=cmd|' /C calc'!A0", "-0.5", "", "b"]
