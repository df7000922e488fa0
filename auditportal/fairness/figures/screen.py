"""Figures on screens from a phone's to a desktop's (docs/dashboard.md, "On a phone"): text that fits
the room it is given, and a second layout for narrow figures.

plotly.js sizes a figure to its box (``static/js/figures.js`` draws with ``responsive: true``), but
not its texts: a tick label, a title or an annotation keeps its length however narrow the figure, and
runs into its neighbours or past the figure's edge. So a figure that must read at a phone's width
carries, in ``layout.meta.narrow``, the layout changes that make it fit (shorter tick labels, wrapped,
a narrower left margin, shorter titles) and the values they replace; ``figures.js`` draws it with
the changes in a box narrower than ``NARROW_BELOW_PX``, and relays it out (``Plotly.relayout``) with
the one or the other when the window's width takes the box across (:func:`narrow_meta`).

Widths of text are estimated from its length (:func:`text_px`): plotly.js measures them only in the
browser. The estimate is generous (``EM_PER_CHAR`` is about the widest average advance of the
portal's fonts), so what is laid out from it has room to spare.
"""

from __future__ import annotations

from typing import Any

# A figure whose box is narrower than this gets its narrow layout: a phone's (390 px wide less the
# page's padding) and a tablet's held upright (768 px less the padding) do, a laptop's does not. Wide
# layouts give long labels a column of up to about 380 px, which leaves the plot at least 360 px here.
NARROW_BELOW_PX = 760
# Average advance of a character, in em, generous for the fonts of palette.FONT_FAMILY.
EM_PER_CHAR = 0.58
ELLIPSIS = "…"


def text_px(characters: int, font_px: float) -> int:
    """The width, in pixels, of ``characters`` characters of text at ``font_px`` (an estimate on the
    generous side)."""
    return round(characters * font_px * EM_PER_CHAR)


def wrap(text: str, width: int, lines: int) -> list[str]:
    """``text`` in at most ``lines`` lines of at most ``width`` characters each, broken at spaces where
    it can be (a longer word is cut), the last line ending with "…" when something was left out.
    Work on the text as it is read, before it is escaped for the figure (``text.plain``), so that no
    entity is cut in half."""
    if width < 2 or lines < 1:
        raise ValueError(f"a line holds at least 2 characters and a label 1 line (width={width}, lines={lines})")
    words = text.split()
    if not words:
        return [text.strip()]
    found: list[str] = []
    line = ""
    at = 0
    while at < len(words):
        word = words[at]
        if not line and len(word) > width:  # a word longer than a line: cut it
            found.append(word[:width])
            words[at] = word[width:]
            continue
        candidate = f"{line} {word}" if line else word
        if len(candidate) <= width:
            line = candidate
            at += 1
        else:
            found.append(line)
            line = ""
    if line:
        found.append(line)
    if len(found) <= lines:
        return found
    # Too long: the last line takes as much of the rest as it can, then the ellipsis.
    rest = " ".join(found[lines - 1 :])
    return [*found[: lines - 1], rest[: width - 1].rstrip() + ELLIPSIS]


def shorten_middle(text: str, limit: int) -> str:
    """At most ``limit`` characters, the middle left out ("…") when cut: the start and the end of a
    name stay, where names that differ only at their end (numbered groups) are told apart."""
    if limit < 3:
        raise ValueError(f"a shortened name keeps at least 3 characters (limit={limit})")
    if len(text) <= limit:
        return text
    tail = (limit - 1) // 3
    return text[: limit - 1 - tail] + ELLIPSIS + text[len(text) - tail :]


def narrow_meta(narrow: dict[str, Any], wide: dict[str, Any]) -> dict[str, Any]:
    """The ``layout.meta`` that ``figures.js`` reads: below ``NARROW_BELOW_PX`` it relays the figure
    out with the attributes of ``narrow`` (``Plotly.relayout`` attribute strings, e.g. ``"margin.l"``)
    that differ from ``wide``'s, at or above it with ``wide``'s values for the same attributes (the
    values the figure was made with)."""
    if set(narrow) != set(wide):
        raise ValueError(f"the narrow and wide layouts change different attributes: {sorted(set(narrow) ^ set(wide))}")
    changed = [name for name in narrow if narrow[name] != wide[name]]
    # Plotly.relayout of a height or a width fixes the figure's size: it would no longer follow its box.
    fixed = [name for name in changed if name in {"height", "width", "autosize"}]
    if fixed:
        raise ValueError(f"the narrow layout may not change the figure's size ({', '.join(fixed)})")
    return {
        "narrow": {
            "below_px": NARROW_BELOW_PX,
            "layout": {name: narrow[name] for name in changed},
            "wide": {name: wide[name] for name in changed},
        }
    }
