"""Figures for paper (the signed report's PDF, docs/reports.md "Figures on paper"): long figures cut into
panels of at most ``ROWS_PER_PANEL`` rows, each panel drawn at its full height, never squeezed into a
page, and no text smaller than ``MIN_FONT_PX``.

Sizes here are in the figure's pixels. The report prints a figure ``reports.figures.WIDTH`` pixels wide
across the page's text width; ``reports.figures`` says (and its tests check) what these sizes are on
paper: a row at least 7 mm high, no text under 8 pt.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

# One row (a comparison of the forest plot, a group of the recall figure) is this high, and a panel
# holds at most this many rows and this many attributes (so its reference lines stay few).
ROWS_PER_PANEL = 20
ATTRIBUTES_PER_PANEL = 4
ROW_PX = 34
# The smallest text of a printed figure, and its tick labels and titles.
MIN_FONT_PX = 12
TICK_FONT_PX = 13
TITLE_FONT_PX = 14

T = TypeVar("T")


def panels(items: Sequence[T], *, block: Callable[[T], Hashable], max_rows: int = ROWS_PER_PANEL,
           max_blocks: int = ATTRIBUTES_PER_PANEL) -> list[list[T]]:  # fmt: skip
    """``items`` (rows, in order, each block's rows together: an attribute's comparisons) cut into
    panels of at most ``max_rows`` rows and ``max_blocks`` blocks, in order, keeping a block in one
    panel where it fits; a block longer than ``max_rows`` is cut into the fewest panels of its own, of
    sizes as even as can be (45 rows by 20: 15, 15 and 15)."""
    if max_rows < 1 or max_blocks < 1:
        raise ValueError(f"a panel needs room for a row and a block (max_rows={max_rows}, max_blocks={max_blocks})")
    runs: list[list[T]] = []
    for item in items:
        if runs and block(runs[-1][-1]) == block(item):
            runs[-1].append(item)
        else:
            runs.append([item])
    pieces = [piece for run in runs for piece in _even(run, max_rows)]
    result: list[list[T]] = []
    blocks = 0
    for piece in pieces:
        if result and len(result[-1]) + len(piece) <= max_rows and blocks < max_blocks:
            result[-1].extend(piece)
            blocks += 1
        else:
            result.append(list(piece))
            blocks = 1
    return result


def _even(run: list[T], max_rows: int) -> list[list[T]]:
    count = -(-len(run) // max_rows)
    size, extra = divmod(len(run), count)
    pieces, start = [], 0
    for index in range(count):
        end = start + size + (index < extra)
        pieces.append(run[start:end])
        start = end
    return pieces


def raise_fonts(spec: dict[str, Any], *, minimum: int = MIN_FONT_PX) -> dict[str, Any]:
    """``spec`` (a figure's dict) with every font size under ``minimum`` raised to it: the layout's
    font (which ticks, legends and annotations inherit) and each ``...font`` given its own size
    (tick, text, title, legend, annotation fonts), lists of sizes element by element. Changed in place
    and returned; marker sizes are not fonts and stay."""
    layout = spec.setdefault("layout", {})
    font = layout.setdefault("font", {})
    font["size"] = max(font.get("size") or 0, minimum)
    for value in _dicts(spec):
        for key, item in value.items():
            if key.endswith("font") and isinstance(item, dict) and "size" in item:
                item["size"] = _raised(item["size"], minimum)
    return spec


def font_sizes(spec: dict[str, Any]) -> list[float]:
    """Every font size ``spec`` (a figure's dict) gives, the layout's included (what a test checks)."""
    sizes: list[float] = []
    for value in _dicts(spec):
        for key, item in value.items():
            if key.endswith("font") and isinstance(item, dict) and item.get("size") is not None:
                size = item["size"]
                sizes += [float(entry) for entry in size] if isinstance(size, list | tuple) else [float(size)]
    return sizes


def _raised(size: Any, minimum: int) -> Any:
    if isinstance(size, list | tuple):
        return [max(entry, minimum) if isinstance(entry, int | float) else entry for entry in size]
    return max(size, minimum) if isinstance(size, int | float) else size


def _dicts(value: Any) -> Iterable[dict[str, Any]]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
