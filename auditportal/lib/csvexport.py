"""CSV downloads that a spreadsheet cannot be tricked into running (formula injection).

A spreadsheet reads a cell that begins with ``=``, ``+``, ``-`` or ``@`` (and, in some, a tab or a
carriage return) as a formula, so a group called ``=HYPERLINK(...)`` in an uploaded dataset would
run when a reviewer opens the export. Every text cell that begins so is written with a leading
``'`` (OWASP's advice), which spreadsheets show but do not evaluate. Numbers are written as numbers:
``-0.25`` cannot be a formula, and quoting it would turn it into text.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Iterator, Sequence

from django.http import StreamingHttpResponse

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

Cell = str | int | float | None


def safe_cell(value: Cell) -> str:
    """One cell as text: empty for None or a non-finite number, a number in full precision, text
    with a leading ``'`` when it begins like a formula."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def csv_lines(header: Sequence[Cell], rows: Iterable[Sequence[Cell]]) -> Iterator[str]:
    """The header and every row as CSV text, line by line (``\\r\\n``, as RFC 4180 has it)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    for row in _chain(header, rows):
        writer.writerow([safe_cell(cell) for cell in row])
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate(0)


def _chain(header: Sequence[Cell], rows: Iterable[Sequence[Cell]]) -> Iterator[Sequence[Cell]]:
    yield header
    yield from rows


def csv_response(filename: str, header: Sequence[Cell], rows: Iterable[Sequence[Cell]]) -> StreamingHttpResponse:
    """A download of ``header`` and ``rows``, streamed as it is written."""
    response = StreamingHttpResponse(csv_lines(header, rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response
