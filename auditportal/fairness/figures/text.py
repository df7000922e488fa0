"""Text inside a figure: every user string (a name from an uploaded file, a hyperparameter from a
configuration) goes through :func:`plain` before it reaches a figure (docs/dashboard.md, "Names in
figures").
"""

from __future__ import annotations

import html


def plain(text: object) -> str:
    """``text`` written so that plotly.js shows it as it is, and reads nothing in it.

    plotly.js reads a few HTML tags in every text it draws (titles, tick labels, legend names, hover
    text, annotations): ``<a href>`` is a link, ``<span style>`` takes any CSS, ``url(...)`` included,
    which the browser drawing the figure fetches. It fills ``%{...}`` in hover templates. It decodes
    ``&amp;``, ``&lt;``, ``&gt;`` and numeric references (``&#37;``) before drawing. So ``&``, ``<`` and
    ``>`` are written as entities and ``%`` as ``&#37;``: the figure shows the original characters,
    and no tag, entity or template of the name's own is read.
    """
    return html.escape(str(text), quote=False).replace("%", "&#37;")


def shorten(text: str, limit: int) -> str:
    """At most ``limit`` characters, ending with "…" when cut (axis labels; the hover has the rest).
    Cut before :func:`plain`, so that no entity is cut in half."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
