"""The one CSV writer of every export: the downloads (lib/csvexport.py, the audit's comparisons, the
experiment's timeline) and the group tables embedded in the signed PDF (documents/report_context.py).

A cell's text comes from users (a group's name from an uploaded file, a metric named after one), and
whoever opens the file in a spreadsheet would run a cell that begins with ``=``, ``+``, ``-`` or
``@`` as a formula (``=HYPERLINK(...)``, DDE); a leading tab, carriage return, line feed, spaces or
quotes can hide such a start. OWASP's "CSV Injection" page advises quoting every cell and a leading
``'``; that is done here, and one step more, because a spreadsheet whose locale separates cells with
``;`` (or a tab) reads a comma-separated file at *its* separator: the quotes no longer line up, and
``a;=1+1`` inside a quoted cell becomes a cell ``=1+1`` that runs. So:

- every text cell is quoted, numbers are not (``csv.QUOTE_NONNUMERIC``);
- a ``'`` goes before the text, and after every separator in it (``,`` ``;`` tab, line ends), where
  what follows (past whitespace and quotes) begins like a formula, or begins with ``'`` itself: a
  spreadsheet shows a cell that begins with ``'`` as text, whichever separator it splits at;
- because a ``'`` already there is doubled, the text reads back without doubt (:func:`original_text`:
  one ``'`` off at the start and after each separator, where there is one);
- numbers stay numbers, in full precision (``-0.25`` is a difference, not a formula); a non-finite
  number and ``None`` are empty; booleans are ``true``/``false``.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Iterator, Sequence

Cell = str | int | float | None

# The characters a spreadsheet reads as the start of a formula, and those that can hide one.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")
# Where a spreadsheet may start a new cell (or row) inside a text, whatever the file's own separator.
SEPARATORS = frozenset(",;\t\r\n")
PREFIX = "'"
LINE_END = "\r\n"  # RFC 4180


def csv_safe_cell(value: object) -> str | int | float:
    """The cell to hand to the writer: numbers as they are (non-finite: empty), ``None`` empty,
    booleans as words, text with a ``'`` wherever a formula could start (``neutralised``)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else ""
    return neutralised(str(value))


def neutralised(text: str) -> str:
    """``text`` with a ``'`` at its start and after each separator in it where a formula could start."""
    written = [PREFIX] if _could_start_formula(text) else []
    for at, character in enumerate(text):
        written.append(character)
        if character in SEPARATORS and _could_start_formula(text[at + 1 :]):
            written.append(PREFIX)
    return "".join(written)


def original_text(cell: str) -> str:
    """The text a written text cell was made from: ``neutralised`` undone."""
    text = cell.removeprefix(PREFIX)
    original: list[str] = []
    skip = False
    for character in text:
        if skip and character == PREFIX:
            skip = False
            continue
        original.append(character)
        skip = character in SEPARATORS
    return "".join(original)


def _could_start_formula(rest: str) -> bool:
    if rest.startswith((*FORMULA_STARTS, PREFIX)):
        return True
    at = 0
    while at < len(rest) and (rest[at].isspace() or rest[at] == '"'):
        at += 1
    return rest.startswith(FORMULA_STARTS, at)


def csv_lines(header: Sequence[object], rows: Iterable[Sequence[object]]) -> Iterator[str]:
    """The header and every row as CSV text, line by line, each cell made safe (``csv_safe_cell``)
    and every text cell quoted."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_NONNUMERIC, lineterminator=LINE_END)
    for row in _chain(header, rows):
        writer.writerow([csv_safe_cell(cell) for cell in row])
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate(0)


def csv_text(header: Sequence[object], rows: Iterable[Sequence[object]]) -> str:
    """The whole file at once (``csv_lines``)."""
    return "".join(csv_lines(header, rows))


def _chain(header: Sequence[object], rows: Iterable[Sequence[object]]) -> Iterator[Sequence[object]]:
    yield header
    yield from rows
