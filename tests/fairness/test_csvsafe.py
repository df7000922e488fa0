"""The one CSV writer: no cell a spreadsheet would run, whichever separator its locale reads, and the
text and numbers read back as they were."""

from __future__ import annotations

import csv
import io
import json
import random

import numpy as np
import pytest

from auditportal.fairness.documents.report_context import EvidenceDocument, group_table_csv
from auditportal.fairness.statistics import judge
from auditportal.fairness.text.csvsafe import FORMULA_STARTS, csv_safe_cell, csv_text, neutralised, original_text

# Names that a spreadsheet would run, bare or once split at a separator (";" in many locales).
HOSTILE = [
    '=HYPERLINK("http://evil.example","click")',
    "+1+2",
    "-2+3",
    "@SUM(A1:A2)",
    "\t=1+1",
    "\r=1+1",
    "\n=1+1",
    "   =1+1",
    "a;=1+1",
    "a; =HYPERLINK(1)",
    "a,=1+1",
    "a\t=1+1",
    'a";=1+1',
    "=cmd|' /C calc'!A0",
    "'=already quoted",
    "'plain",
    "-1",
]
PLAIN = ["female", "a&b", "18-29", "50%", "", "x=1", "名前"]


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ('=HYPERLINK("http://evil.example","click")', '\'=HYPERLINK("http://evil.example","click")'),
        ("+1+2", "'+1+2"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1:A2)", "'@SUM(A1:A2)"),
        ("\t=1+1", "'\t'=1+1"),  # a tab is a separator too: the text after it gets its own '
        ("\r=1+1", "'\r'=1+1"),
        ("\n=1+1", "'\n'=1+1"),
        ("   =1+1", "'   =1+1"),  # leading spaces do not hide a formula
        ("\u00a0=1+1", "'\u00a0=1+1"),  # nor other whitespace
        ("'=already quoted", "''=already quoted"),  # so that one ' always comes off
        ("'plain", "''plain"),
        ("a;=1+1", "a;'=1+1"),  # a ;-locale spreadsheet starts a cell after the ;
        ("a, =1+1", "a,' =1+1"),
        ('a;"=1+1', "a;'\"=1+1"),
        ("a\n@x", "a\n'@x"),
        ("a;'x", "a;''x"),
    ],
)
def test_text_that_a_spreadsheet_would_run_gets_a_leading_apostrophe(value: str, written: str) -> None:
    assert csv_safe_cell(value) == written
    assert original_text(written) == value


@pytest.mark.parametrize("value", PLAIN)
def test_other_text_is_written_as_it_is(value: str) -> None:
    assert csv_safe_cell(value) == value
    assert original_text(value) == value


def test_numbers_stay_numbers_none_is_empty_and_booleans_are_words() -> None:
    assert csv_safe_cell(-0.25) == -0.25
    assert csv_safe_cell(-3) == -3
    assert csv_safe_cell(0.0007631388066955715) == 0.0007631388066955715
    assert csv_safe_cell(float("nan")) == ""
    assert csv_safe_cell(float("inf")) == ""
    assert csv_safe_cell(None) == ""
    assert csv_safe_cell(True) == "true"
    assert csv_safe_cell(False) == "false"


def test_every_text_reads_back_as_it_was() -> None:
    alphabet = list("ab'\" ;,\t\r\n=+-@0")
    generator = random.Random(26)
    for _ in range(5000):
        text = "".join(generator.choice(alphabet) for _ in range(generator.randint(0, 8)))
        assert original_text(neutralised(text)) == text, repr(text)


def _runs(cell: str) -> bool:
    """Whether a spreadsheet would run ``cell`` as a formula: it begins (after whitespace) like one
    and is not simply a number."""
    stripped = cell.lstrip()
    if not stripped.startswith(FORMULA_STARTS):
        return False
    try:
        float(stripped)
    except ValueError:
        return True
    return False


@pytest.mark.parametrize("separator", [",", ";", "\t"])
def test_no_cell_runs_whichever_separator_the_spreadsheet_reads(separator: str) -> None:
    text = csv_text(["group", "n", "rate"], [[name, 10, -0.25] for name in [*HOSTILE, *PLAIN]])
    cells = [cell for row in csv.reader(io.StringIO(text, newline=""), delimiter=separator) for cell in row]
    assert not [cell for cell in cells if _runs(cell)]


def test_the_file_reads_back_as_written() -> None:
    rows = [[name, index, -0.5 * index, None, index % 2 == 0] for index, name in enumerate([*HOSTILE, *PLAIN])]
    text = csv_text(["group", "n", "difference", "empty", "even"], rows)
    assert text.endswith("\r\n")
    read = list(csv.reader(io.StringIO(text, newline="")))
    assert read[0] == ["group", "n", "difference", "empty", "even"]
    for (name, index, difference, _, even), row in zip(rows, read[1:], strict=True):
        assert original_text(row[0]) == name
        assert (int(row[1]), float(row[2]), row[3], row[4]) == (index, difference, "", "true" if even else "false")


def test_text_is_quoted_and_numbers_are_not() -> None:
    assert csv_text(["a"], [["x;y", 1, -0.5, None]]) == '"a"\r\n"x;y",1,-0.5,""\r\n'


def test_the_group_table_embedded_in_the_report_is_written_by_the_one_writer() -> None:
    groups = ["a;=1+1", '=HYPERLINK("http://evil.example","x")', "-1", "'x", "plain"]
    section = judge.judge_attribute(
        np.array([[80, 20, 10, 90], [50, 50, 10, 90], [60, 40, 20, 80], [70, 30, 10, 90], [75, 25, 15, 85]]),
        groups,
        unknown=0,
        tolerance=0.05,
        alpha=0.05,
        columns=("@attr",),
        values=[[group] for group in groups],
        metrics=("tpr",),
    )
    document = {"attributes": {"@attr": section}}
    text = group_table_csv(EvidenceDocument(label="doc", sha256="0" * 64, canonical=json.dumps(document)))
    for separator in (",", ";"):
        cells = [cell for row in csv.reader(io.StringIO(text, newline=""), delimiter=separator) for cell in row]
        assert not [cell for cell in cells if _runs(cell)], separator
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert [original_text(row["group"]) for row in rows] == list(section["groups"])
    assert {original_text(row["attribute"]) for row in rows} == {"@attr"}
