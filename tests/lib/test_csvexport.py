"""CSV downloads are streamed by the one writer (tests/fairness/test_csvsafe.py has its rules)."""

from __future__ import annotations

from auditportal.lib.csvexport import csv_response


def test_the_response_is_a_download_written_by_the_one_writer() -> None:
    response = csv_response("timeline.csv", ["a", "b"], [[1, "=x;y"]])
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="timeline.csv"'
    assert response["X-Content-Type-Options"] == "nosniff"
    assert b"".join(response.streaming_content) == b'"a","b"\r\n1,"\'=x;y"\r\n'  # type: ignore[arg-type]
