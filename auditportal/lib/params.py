"""Ids typed into query strings and hidden form fields.

``str.isdigit`` is not the test for an id: it accepts superscripts ("²") and other digits that
``int`` refuses, and 5,000 digits that ``int`` refuses too (Python's limit on digits); either was a
server error. An id is ASCII digits that fit the 64-bit integer columns.
"""

from __future__ import annotations

MAX_ID = 2**63 - 1


def as_id(raw: object) -> int | None:
    """``raw`` as an id, or None when it is not one (absent, empty, not ASCII digits, too large)."""
    if not isinstance(raw, str) or not raw.isascii() or not raw.isdigit() or len(raw) > len(str(MAX_ID)):
        return None
    value = int(raw)
    return value if value <= MAX_ID else None
