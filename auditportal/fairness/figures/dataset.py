"""A dataset version's groups: how many rows each has (the unknown bucket too, so its share is in
plain sight) and its positive rate with the Wilson interval (docs/dashboard.md, "Dataset versions").

One figure per attribute, or for the intersection: rows on the left, positive rate on the right,
the groups on a shared vertical axis in the order given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from auditportal.fairness.figures import palette
from auditportal.fairness.figures.text import plain, shorten
from auditportal.fairness.statistics import stats
from auditportal.fairness.text import numbers

if TYPE_CHECKING:
    import plotly.graph_objects as go

ROW_PX = 28
MARGIN_TOP_PX = 44
MARGIN_BOTTOM_PX = 48
UNKNOWN_LABEL = "unknown"
LABEL_CHARS = 40


class GroupCounts(Protocol):
    """What the figure needs of a group: the dataset app's group rows have it."""

    @property
    def values(self) -> tuple[str, ...]: ...  # its value per column; empty for the unknown bucket

    @property
    def is_unknown(self) -> bool: ...

    @property
    def rows(self) -> int: ...

    @property
    def positives(self) -> int: ...


@dataclass(frozen=True)
class GroupBar:
    """One group as drawn."""

    label: str
    is_unknown: bool
    rows: int
    share: float  # of all rows of the version
    positives: int
    rate: float | None  # None without rows
    low: float | None  # the Wilson interval at 1 - alpha
    high: float | None


def group_bars(groups: Sequence[GroupCounts], *, total_rows: int, alpha: float = stats.DEFAULT_ALPHA) -> list[GroupBar]:
    rows = np.array([group.rows for group in groups], dtype=np.int64)
    positives = np.array([group.positives for group in groups], dtype=np.int64)
    rates = stats.proportion(positives, rows)
    low, high = stats.wilson_interval(positives, rows, alpha)
    return [
        GroupBar(
            label=UNKNOWN_LABEL if group.is_unknown else " · ".join(group.values),
            is_unknown=group.is_unknown,
            rows=group.rows,
            share=group.rows / total_rows if total_rows else 0.0,
            positives=group.positives,
            rate=_number(rates[index]),
            low=_number(low[index]),
            high=_number(high[index]),
        )
        for index, group in enumerate(groups)
    ]


def group_summary_figure(
    groups: Sequence[GroupCounts],
    *,
    columns: Sequence[str],
    total_rows: int,
    overall_rate: float | None = None,
    alpha: float = stats.DEFAULT_ALPHA,
) -> go.Figure | None:
    """Rows and positive rate per group of one attribute (``columns``: the attribute, or the
    intersected attributes), or None without groups. ``overall_rate``, the version's positive rate,
    is drawn as a dotted line for comparison."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    bars = group_bars(groups, total_rows=total_rows, alpha=alpha)
    if not bars:
        return None
    level = f"{(1 - alpha) * 100:g}%"
    figure = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        horizontal_spacing=0.06,
        column_widths=[0.5, 0.5],
        # Short enough for a panel of a phone-wide figure (about 110 px at 390 px): longer titles ran
        # into each other there. The page's help says what the interval and the dotted line are.
        subplot_titles=["Rows (share)", f"Positive rate ({level})"],
    )
    for annotation in figure.layout.annotations:  # the two subplot titles
        annotation.update(font={"size": 13, "color": palette.INK})
    y = list(range(len(bars)))
    colours = [palette.MUTED if bar.is_unknown else palette.series_colour(0) for bar in bars]
    names = [plain(bar.label) for bar in bars]
    figure.add_trace(
        go.Bar(
            x=[bar.rows for bar in bars],
            y=y,
            orientation="h",
            marker={"color": colours, "pattern": {"shape": ["/" if bar.is_unknown else "" for bar in bars]}},
            text=[f"{numbers.count(bar.rows)} ({numbers.percent(bar.share)})" for bar in bars],
            textposition="auto",
            cliponaxis=False,
            hovertext=[
                f"<b>{name}</b><br>{numbers.plural(bar.rows, 'row')}, {numbers.percent(bar.share)}"
                for name, bar in zip(names, bars, strict=True)
            ],
            hoverinfo="text",
            name="rows",
            showlegend=False,
        ),
        row=1,
        col=1,
    )
    defined = [(at, bar) for at, bar in enumerate(bars) if bar.rate is not None]
    figure.add_trace(
        go.Scatter(
            x=[bar.rate for _, bar in defined],
            y=[at for at, _ in defined],
            mode="markers",
            marker={"color": [colours[at] for at, _ in defined], "size": 9, "symbol": "circle"},
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [_gap(bar.high, bar.rate) for _, bar in defined],
                "arrayminus": [_gap(bar.rate, bar.low) for _, bar in defined],
                "color": palette.INK,
                "thickness": 1.5,
                "width": 4,
            },
            hovertext=[
                f"<b>{names[at]}</b><br>positive rate {numbers.rate(bar.rate)} "
                f"({numbers.count(bar.positives)} of {numbers.count(bar.rows)})"
                f"<br>{level} interval {numbers.interval(bar.low, bar.high, signed=False)}"
                for at, bar in defined
            ],
            hoverinfo="text",
            name="positive rate",
            showlegend=False,
        ),
        row=1,
        col=2,
    )
    if overall_rate is not None:
        figure.add_shape(
            type="line",
            x0=overall_rate,
            x1=overall_rate,
            xref="x2",
            yref="y2 domain",
            y0=0,
            y1=1,
            line={"color": palette.INK, "width": 1, "dash": "dot"},
        )
    figure.update_yaxes(
        tickmode="array",
        tickvals=y,
        ticktext=[plain(shorten(bar.label, LABEL_CHARS)) for bar in bars],
        range=[len(bars) - 0.5, -0.5],
        automargin=True,
        showgrid=False,
        zeroline=False,
        fixedrange=True,
    )
    figure.update_xaxes(gridcolor=palette.GRID, rangemode="tozero", row=1, col=1)
    figure.update_xaxes(gridcolor=palette.GRID, range=[0, 1], tickformat=".1f", row=1, col=2)
    if overall_rate is not None:
        # Under its panel, where nothing else has a title to run into.
        figure.update_xaxes(
            title={"text": f"dotted: all rows, {numbers.rate(overall_rate)}", "font": {"size": 11}, "standoff": 4},
            row=1,
            col=2,
        )
    plot_px = max(len(bars) * ROW_PX, 2 * ROW_PX)
    figure.update_layout(
        palette.base_layout(
            height=plot_px + MARGIN_TOP_PX + MARGIN_BOTTOM_PX,
            margin={"l": 60, "r": 20, "t": MARGIN_TOP_PX, "b": MARGIN_BOTTOM_PX},
            bargap=0.25,
            showlegend=False,
        )
    )
    return figure


def _number(value: np.floating | float) -> float | None:
    result = float(value)
    return None if np.isnan(result) else result


def _gap(outer: float | None, inner: float | None) -> float:
    if outer is None or inner is None:
        return 0.0
    return max(outer - inner, 0.0)
