"""CSV exports are safe against formula injection and keep numbers as numbers."""

from __future__ import annotations

import csv
import io

import pytest

from auditportal.lib.csvexport import csv_lines, csv_response, safe_cell


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        ('=HYPERLINK("http://x","y")', '\'=HYPERLINK("http://x","y")'),
        ("+1+2", "'+1+2"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tcmd", "'\tcmd"),
        ("\rcmd", "'\rcmd"),
        ("female", "female"),
        ("a=b", "a=b"),  # only the first character matters
        ("", ""),
    ],
)
def test_text_that_begins_like_a_formula_is_neutralised(cell: str, written: str) -> None:
    assert safe_cell(cell) == written


def test_numbers_stay_numbers_in_full_precision() -> None:
    assert safe_cell(-0.25) == "-0.25"
    assert safe_cell(0.0007631388066955715) == "0.0007631388066955715"
    assert safe_cell(42) == "42"
    assert safe_cell(None) == ""
    assert safe_cell(float("nan")) == ""


def test_the_lines_parse_back_with_the_prefix_kept_and_quotes_escaped() -> None:
    text = "".join(csv_lines(["trial_id", "recall/g/=1+1"], [[1, 0.5], [2, None], ['-x,"y"', -1.5]]))
    rows = list(csv.reader(io.StringIO(text)))
    assert rows == [["trial_id", "recall/g/=1+1"], ["1", "0.5"], ["2", ""], ['\'-x,"y"', "-1.5"]]
    assert text.endswith("\r\n")


def test_the_response_is_a_download() -> None:
    response = csv_response("timeline.csv", ["a"], [[1]])
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="timeline.csv"'
    assert b"".join(response.streaming_content) == b"a\r\n1\r\n"  # type: ignore[arg-type]
