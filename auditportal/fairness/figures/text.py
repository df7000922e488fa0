"""Text inside a figure: names from users' files, written so that plotly.js shows them as they are."""

from __future__ import annotations

import html


def plain(text: str) -> str:
    """``text`` with ``&``, ``<`` and ``>`` written as entities: plotly.js reads a few HTML tags
    (``<b>``, ``<br>``, ``<a href>``) in titles, tick labels and hover text, and a group's name comes
    from an uploaded file."""
    return html.escape(text, quote=False)


def shorten(text: str, limit: int) -> str:
    """At most ``limit`` characters, ending with "…" when cut (axis labels; the hover has the rest)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
