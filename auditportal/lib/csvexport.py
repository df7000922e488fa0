"""CSV downloads, streamed, with every cell made safe by ``lib/csvsafe.csv_safe_cell`` (the one rule
against formula injection)."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Iterator, Sequence

from django.http import StreamingHttpResponse

from auditportal.lib.csvsafe import csv_safe_cell

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
    return str(csv_safe_cell(value))


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
