"""The deployment page's figures: plain data in, a figure out as the JSON plotly.js draws (docs/monitoring.md, "The
deployment page").

- :func:`rate_figure`: one attribute's metric against an absolute limit over the looks, per group:
  the observed rate, its confidence sequence as a band, the limit as a line and the sequential
  boundary (the observed rate that would confirm a breach at that look's trials) dotted.
- :func:`gap_figure`: one attribute's metric, each group minus the reference group, with the gap's
  interval as a band and the limit on either side.
- :func:`drift_figure`: each group's share of the production rows against its share of the training
  data, with the production share's confidence sequence and the drift limit around the training
  share; a group the training data never had is drawn with crosses and named "unseen in training".

The values are those a look stores (``LookJudgement.as_json()`` per attribute, fairness/statistics/
monitor.py): ``rates[i]`` estimate/low/high/limit/boundary/status, ``gaps[i]`` difference/low/high/
limit/status, ``drift.findings[i]`` production_share (with ``production.low``/``high``)/
training_share/status. The x axis is the look's number. Every line keeps at most
:data:`~.downsample.MAX_POINTS` points (:func:`.downsample.downsample_indices`, status changes kept);
every group name goes through :func:`.text.plain`.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from auditportal.fairness.figures import palette
from auditportal.fairness.figures.downsample import MAX_POINTS, downsample_indices
from auditportal.fairness.figures.text import plain, shorten

# A figure as the JSON the page's plotly.js draws, written here directly in the form
# figures/serialize.figure_json gives a plotly Figure (checking a year of points through plotly's
# validators cost 0.1-0.3 s a page): {"data": [traces], "layout": {...}}, arrays as typed arrays.
Figure = dict[str, Any]

HEIGHT = 340
NAME_CHARS = 32
LIMIT_COLOUR = palette.INK  # black, dashed: no series colour is near it
STATUS_LABELS = {
    "breach": "breach confirmed",
    "watching": "watching",
    "within": "within the limit",
    "too_few": "too few rows",
    "unseen": "unseen in training",
}

Values = Sequence[float | None] | npt.NDArray[np.float64]
# A status per look: its name, or its code (fairness/figures/lookpoints.STATUSES; NaN for none).
Statuses = Sequence[str | None] | npt.NDArray[np.float64]


@dataclass(frozen=True)
class RateSeries:
    """One group's rate against one absolute limit, at each look in ``seq`` (None where not judged)."""

    group: str
    seq: Sequence[int] | npt.NDArray[np.int64]
    estimate: Values
    low: Values
    high: Values
    limit: Values
    boundary: Values
    status: Statuses


@dataclass(frozen=True)
class GapSeries:
    """One group's rate minus the reference group's, at each look in ``seq``."""

    group: str
    reference: str
    seq: Sequence[int] | npt.NDArray[np.int64]
    difference: Values
    low: Values
    high: Values
    limit: Values
    status: Statuses


@dataclass(frozen=True)
class ShareSeries:
    """One group's production share (its confidence sequence ``low``/``high``) and training share at
    each look; ``unseen``: the training data never had the group (no training share, never judged)."""

    group: str
    seq: Sequence[int] | npt.NDArray[np.int64]
    production: Values
    low: Values
    high: Values
    training: Values
    limit: Values
    status: Statuses
    unseen: bool = False


def _floats(values: Values) -> npt.NDArray[np.float64]:
    if isinstance(values, np.ndarray):
        return values.astype(np.float64, copy=False)
    return np.array([np.nan if value is None else value for value in values], dtype=np.float64)


def _kept(values: Values, status: Statuses, max_points: int) -> npt.NDArray[np.intp]:
    if len(values) <= max_points:
        return np.arange(len(values), dtype=np.intp)
    if isinstance(status, np.ndarray):
        # Codes compared as integers: NaN (no status) is one label of its own, as None is.
        labels: Sequence[object] | npt.NDArray[np.int64] = np.where(np.isnan(status), -1, status).astype(np.int64)
    else:
        labels = list(status)
    return downsample_indices(_floats(values), max_points=max_points, labels=labels)


def _column(values: Values, kept: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
    """The kept values (NaN where missing: a gap in the line)."""
    return _floats(values)[kept]


def _typed(values: Any) -> dict[str, str]:
    """An array as plotly.js's typed array: integers in the smallest type that holds them, values in
    single precision (7 significant digits, half the bytes of double; NaN stays a gap)."""
    array = np.asarray(values)
    if array.dtype.kind in "iu":
        low, high = (int(array.min()), int(array.max())) if array.size else (0, 0)
        dtype = next(kind for kind in ("i1", "i2", "i4") if np.iinfo(kind).min <= low and high <= np.iinfo(kind).max)
    else:
        dtype = "f4"
    typed = {"dtype": dtype, "bdata": base64.b64encode(array.astype(f"<{dtype}").tobytes()).decode("ascii")}
    if array.ndim > 1:
        typed["shape"] = ", ".join(str(size) for size in array.shape)
    return typed


def _scatter(**properties: Any) -> dict[str, Any]:
    """A scatter trace: ``properties`` as plotly names them, arrays as typed arrays."""
    return {
        "type": "scatter",
        **{key: _typed(value) if isinstance(value, np.ndarray) else value for key, value in properties.items()},
    }


def _changes(
    x: npt.NDArray[np.int64], y: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """A step line (shape ``hv``) drawn the same from only its points where the value changes, and its
    last: a limit is constant for as long as the policy is."""
    if y.size <= 2:
        return x, y
    same = (y[1:-1] == y[:-2]) | (np.isnan(y[1:-1]) & np.isnan(y[:-2]))
    keep = np.concatenate([[True], ~same, [True]])
    return x[keep], y[keep]


def _xs(seq: Sequence[int] | npt.NDArray[np.int64], kept: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
    return np.asarray(seq, dtype=np.int64)[kept]


def _pairs(low: npt.NDArray[np.float64], high: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The interval's ends as each point's customdata, for the hover template."""
    return np.column_stack([low, high])


def _name(group: str) -> str:
    return plain(shorten(group, NAME_CHARS))


def _band(
    x: npt.NDArray[np.int64],
    low: npt.NDArray[np.float64],
    high: npt.NDArray[np.float64],
    colour: str,
    group: str,
) -> list[Any]:
    """The interval as one shaded band: along its high end and back along its low end (one trace: each
    trace costs plotly a millisecond or two to check, and a page has dozens)."""
    defined = ~(np.isnan(low) | np.isnan(high))
    if not defined.any():
        return []
    xs, lows, highs = x[defined], low[defined], high[defined]
    return [
        _scatter(
            x=np.concatenate([xs, xs[::-1]]),
            y=np.concatenate([highs, lows[::-1]]),
            mode="lines",
            fill="toself",
            fillcolor=_translucent(colour),
            line={"width": 0, "color": _translucent(colour)},
            hoverinfo="skip",
            showlegend=False,
            legendgroup=group,
        )
    ]


def _both_sides(
    x: npt.NDArray[np.int64], upper: npt.NDArray[np.float64], lower: npt.NDArray[np.float64]
) -> dict[str, Any]:
    """Two lines as one trace, a gap between them."""
    return {
        "x": np.concatenate([x, [x[-1] if x.size else 0], x]),
        "y": np.concatenate([upper, [np.nan], lower]),
    }


def _translucent(colour: str, alpha: float = 0.16) -> str:
    red, green, blue = (int(colour[at : at + 2], 16) for at in (1, 3, 5))
    return f"rgba({red}, {green}, {blue}, {alpha})"


def _empty(figure: Figure, text: str) -> Figure:
    figure["layout"].setdefault("annotations", []).append(
        {
            "text": text,
            "x": 0.5,
            "y": 0.5,
            "xref": "paper",
            "yref": "paper",
            "showarrow": False,
            "font": {"color": palette.MUTED},
        }
    )
    return figure


def _layout(title: str, y_title: str, y_range: list[float] | None = None) -> dict[str, Any]:
    return palette.base_layout(
        template={"data": {"scatter": [{"type": "scatter"}]}},  # plotly's "none", as it writes it
        height=HEIGHT,
        title={"text": plain(title), "font": {"size": 14}, "x": 0, "xanchor": "left"},
        # Without a title (a page that writes it above the figure, where it wraps on a phone), no room for one.
        margin={"l": 56, "r": 16, "t": 40 if title else 12, "b": 40},
        xaxis={"title": {"text": "look", "standoff": 4}, "gridcolor": palette.GRID, "zeroline": False},
        yaxis={
            "title": {"text": y_title},
            "gridcolor": palette.GRID,
            "zerolinecolor": palette.MUTED,
            **({"range": y_range} if y_range is not None else {"rangemode": "tozero"}),
        },
        legend={"orientation": "h", "x": 0, "y": -0.18, "yanchor": "top"},
        hovermode="closest",
    )


def rate_figure(series: Sequence[RateSeries], *, title: str, metric_label: str, max_points: int = MAX_POINTS) -> Figure:
    """``metric_label`` of each group in ``series`` against its absolute limit, over the looks."""
    data: list[dict[str, Any]] = []
    figure: Figure = {"data": data, "layout": _layout(title, metric_label)}
    if not any(len(line.seq) for line in series):
        return _empty(figure, "No look judged yet")
    limit_drawn = False
    for index, line in enumerate(series):
        colour = palette.series_colour(index)
        name = _name(line.group)
        kept = _kept(line.estimate, line.status, max_points)
        x = _xs(line.seq, kept)
        estimate = _column(line.estimate, kept)
        low, high = _column(line.low, kept), _column(line.high, kept)
        data += _band(x, low, high, colour, name)
        data.append(
            _scatter(
                x=x,
                y=estimate,
                mode="lines",
                name=name,
                legendgroup=name,
                line={"color": colour, "width": 2},
                customdata=_pairs(low, high),
                hovertemplate=f"<b>{name}</b> · look %{{x}}<br>%{{y:.3f}} "
                "(interval %{customdata[0]:.3f} to %{customdata[1]:.3f})<extra></extra>",
            )
        )
        data.append(
            _scatter(
                x=x,
                y=_column(line.boundary, kept),
                mode="lines",
                name=f"{name}: breach boundary",
                legendgroup=name,
                showlegend=index == 0,
                line={"color": colour, "width": 1, "dash": "dot"},
                hovertemplate="sequential boundary %{y:.3f}<extra></extra>",
            )
        )
        if not limit_drawn:
            limit_drawn = True
            limit_x, limit_y = _changes(x, _column(line.limit, kept))
            data.append(
                _scatter(
                    x=limit_x,
                    y=limit_y,
                    mode="lines",
                    name="limit",
                    line={"color": LIMIT_COLOUR, "width": 2, "dash": "dash", "shape": "hv"},
                    hovertemplate="limit %{y:.3f}<extra></extra>",
                )
            )
    return figure


def gap_figure(series: Sequence[GapSeries], *, title: str, metric_label: str, max_points: int = MAX_POINTS) -> Figure:
    """Each group's ``metric_label`` minus the reference group's, with the gap limit on either side."""
    data: list[dict[str, Any]] = []
    figure: Figure = {"data": data, "layout": _layout(title, f"{metric_label}: gap")}
    if not any(len(line.seq) for line in series):
        return _empty(figure, "No look judged yet")
    limit_drawn = False
    for index, line in enumerate(series):
        colour = palette.series_colour(index)
        name = f"{_name(line.group)} − {_name(line.reference)}"
        kept = _kept(line.difference, line.status, max_points)
        x = _xs(line.seq, kept)
        difference = _column(line.difference, kept)
        low, high = _column(line.low, kept), _column(line.high, kept)
        data += _band(x, low, high, colour, name)
        data.append(
            _scatter(
                x=x,
                y=difference,
                mode="lines",
                name=name,
                legendgroup=name,
                line={"color": colour, "width": 2},
                customdata=_pairs(low, high),
                hovertemplate=f"<b>{name}</b> · look %{{x}}<br>%{{y:+.3f}} "
                "(interval %{customdata[0]:+.3f} to %{customdata[1]:+.3f})<extra></extra>",
            )
        )
        if not limit_drawn:
            limit_drawn = True
            limit_x, limits = _changes(x, _column(line.limit, kept))
            data.append(
                _scatter(
                    **_both_sides(limit_x, limits, -limits),
                    mode="lines",
                    name="limit",
                    line={"color": LIMIT_COLOUR, "width": 2, "dash": "dash", "shape": "hv"},
                    hovertemplate="limit %{y:.3f}<extra></extra>",
                )
            )
    figure["layout"]["yaxis"].update(rangemode="normal", zeroline=True)
    return figure


def drift_figure(series: Sequence[ShareSeries], *, title: str, max_points: int = MAX_POINTS) -> Figure:
    """Each group's production share against its training share ± the drift limit; groups unseen in
    training drawn with crosses and named so."""
    data: list[dict[str, Any]] = []
    figure: Figure = {"data": data, "layout": _layout(title, "share of rows", [0, 1])}
    if not any(len(line.seq) for line in series):
        return _empty(figure, "No look judged yet")
    for index, line in enumerate(series):
        colour = palette.MUTED if line.unseen else palette.series_colour(index)
        name = _name(line.group) + (" (unseen in training)" if line.unseen else "")
        kept = _kept(line.production, line.status, max_points)
        x = _xs(line.seq, kept)
        production = _column(line.production, kept)
        if not line.unseen:
            data += _band(x, _column(line.low, kept), _column(line.high, kept), colour, name)
        data.append(
            _scatter(
                x=x,
                y=production,
                mode="lines+markers" if line.unseen else "lines",
                name=name,
                legendgroup=name,
                line={"color": colour, "width": 2, **({"dash": "dot"} if line.unseen else {})},
                marker={"symbol": "x", "size": 7, "color": colour},
                # d3's "p": a percentage to 3 significant digits, as numbers.percent writes it.
                hovertemplate=f"<b>{name}</b> · look %{{x}}<br>production share %{{y:.3p}}<extra></extra>",
            )
        )
        if line.unseen:
            continue
        training_x, training = _changes(x, _column(line.training, kept))
        data.append(
            _scatter(
                x=training_x,
                y=training,
                mode="lines",
                name=f"{name}: training share",
                legendgroup=name,
                showlegend=False,
                line={"color": colour, "width": 1, "dash": "dash", "shape": "hv"},
                hovertemplate="training share %{y:.3f}<extra></extra>",
            )
        )
        limits = _column(line.limit, kept)
        upper_x, upper = _changes(x, np.clip(_column(line.training, kept) + limits, 0.0, 1.0))
        lower_x, lower = _changes(x, np.clip(_column(line.training, kept) - limits, 0.0, 1.0))
        data.append(
            _scatter(
                x=np.concatenate([upper_x, [upper_x[-1]], lower_x]),
                y=np.concatenate([upper, [np.nan], lower]),
                mode="lines",
                name="training share ± limit",
                legendgroup="limit",
                showlegend=index == 0,
                line={"color": colour, "width": 1, "dash": "dot", "shape": "hv"},
                hovertemplate="drift limit %{y:.3f}<extra></extra>",
            )
        )
    if any(line.unseen for line in series):
        figure["layout"].setdefault("annotations", []).append(
            {
                "text": "× a group the training data never had: flagged, never judged",
                "x": 0,
                "y": 1,
                "xref": "paper",
                "yref": "paper",
                "xanchor": "left",
                "yanchor": "top",
                "showarrow": False,
                "bgcolor": "rgba(255, 255, 255, 0.85)",
                "font": {"size": 11, "color": palette.INK},
            }
        )
    return figure
