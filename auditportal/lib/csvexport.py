"""CSV downloads, streamed, written by the one CSV writer (``fairness/text/csvsafe.py``: every text
cell quoted, formulas neutralised)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.http import StreamingHttpResponse

from auditportal.fairness.text.csvsafe import csv_lines


def csv_response(filename: str, header: Sequence[object], rows: Iterable[Sequence[object]]) -> StreamingHttpResponse:
    """A download of ``header`` and ``rows``, streamed as it is written."""
    response = StreamingHttpResponse(csv_lines(header, rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response
