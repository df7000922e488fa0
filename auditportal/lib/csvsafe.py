"""CSV cells that a spreadsheet will not run as formulas (CSV or "formula" injection).

Excel, LibreOffice and Google Sheets treat a cell that begins with ``=``, ``+``, ``-`` or ``@`` as a
formula, and a leading tab or carriage return can hide such a start; a group's name comes from an
uploaded file, so an export could carry ``=HYPERLINK(...)`` to whoever opens it. As OWASP advises,
such a text cell is written with a leading apostrophe, which spreadsheets show as text and do not
evaluate. Numbers are written as numbers: ``-0.25`` is a difference, not a formula.
"""

from __future__ import annotations

# The characters a spreadsheet reads as the start of a formula, and those that can hide one.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")


def csv_safe_cell(value: object) -> str | int | float:
    """The cell to hand to ``csv.writer``: ``None`` as empty, booleans as ``true``/``false``, numbers
    as they are, and text that could start a formula (also after leading spaces) prefixed with ``'``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return value
    text = str(value)
    if text.startswith(FORMULA_STARTS) or text.lstrip(" ").startswith(FORMULA_STARTS):
        return "'" + text
    return text
