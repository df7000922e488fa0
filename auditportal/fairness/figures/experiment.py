"""The experiment page's figures: plain data in, a Plotly figure out (docs/dashboard.md).

- :func:`eod_timeline`: eod per validation step for every trial, the policy tolerance as a band, the
  noise floor as a shaded region, the trials' verdict changes marked; long series downsampled
  (:mod:`.downsample`).
- :func:`group_recall`: the selected trial's recall per group, with its interval, per attribute.
- :func:`worker_share_heatmap`: each worker's share of each group over the steps, with the
  worker-share spread; ``None`` for a trial that ran on one worker.
- :func:`accuracy_scatter`: accuracy against eod (or fair_objective) of every trial, the Pareto
  front of the search marked.
- :func:`lowest_eod_bars`: the lowest eod each trial reached, with the tolerance and each trial's
  noise floor.

Every trace that stands for a trial carries its id (``meta`` on a line, ``customdata`` on points),
so a click on it selects the trial (static/js/experiments.js).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from auditportal.fairness.figures import palette
from auditportal.fairness.figures.downsample import MAX_POINTS, MIN_POINTS, downsample_indices, label_changes
from auditportal.fairness.figures.text import plain
from auditportal.fairness.statistics import judge
from auditportal.fairness.statistics.stats import VERDICTS

if TYPE_CHECKING:
    import plotly.graph_objects as go

# All the timeline's traces together keep at most this many points (each at most MAX_POINTS), so
# the page's payload stays bounded however many trials a search has.
TIMELINE_POINTS = 20_000
# Heat-map columns: buckets of consecutive reports, averaged.
HEATMAP_COLUMNS = 400
DIGITS = 5  # short lists are rounded for the charts, long series single precision (the CSV keeps all)
HEIGHT = 380
TIMELINE_HEIGHT = 420
QUIET_TEMPLATE = "none"  # plotly's default template adds ~7 kB of styling to every figure
SERIES_LIGHT = "rgba(0, 114, 178, 0.45)"  # palette.SERIES[0], lighter: the bars of trials not selected

Objective = Literal["eod", "fair_objective"]
OBJECTIVE_LABELS: dict[str, str] = {
    "eod": "eod (largest recall gap)",
    "fair_objective": "fair_objective (val_loss + search_lambda · eod)",
}


# ----------------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class VerdictChange:
    """An attribute's verdict as it was recorded from ``step`` on (None: no recall comparison)."""

    step: int
    attribute: str
    verdict: str | None


@dataclass(frozen=True)
class TrialTimeline:
    trial_id: int
    number: int
    steps: Sequence[int] | npt.NDArray[np.int64]
    eod: Sequence[float | None] | npt.NDArray[np.float64]  # NaN or None where undefined
    # The trial's verdict in force at each step (see verdicts_in_force), or None when unknown.
    verdicts: Sequence[str | None] | None = None


@dataclass(frozen=True)
class TrialSummary:
    """One trial as the scatter and the bars show it: its latest validation and its lowest eod."""

    trial_id: int
    number: int
    accuracy: float | None = None
    eod: float | None = None
    fair_objective: float | None = None
    lowest_eod: float | None = None
    lowest_eod_step: int | None = None
    noise_floor: float | None = None
    verdict: str | None = None
    hparams: Sequence[tuple[str, str]] = ()


@dataclass(frozen=True)
class GroupRecall:
    group: str  # as shown: an intersection's values joined by " & "
    recall: float | None
    low: float | None
    high: float | None
    positives: int
    is_reference: bool = False


@dataclass(frozen=True)
class AttributeRecall:
    attribute: str
    verdict: str | None
    groups: Sequence[GroupRecall] = field(default_factory=list)


@dataclass(frozen=True)
class WorkerShareRow:
    """Worker ``rank``'s share of ``group`` among its rows, at each of the heat map's steps."""

    attribute: str
    group: str
    rank: int
    values: Sequence[float | None]


# ------------------------------------------------------------------------------ derived values


def verdicts_in_force(
    steps: Sequence[int] | npt.NDArray[np.int64], changes: Iterable[VerdictChange]
) -> list[str | None]:
    """The trial's verdict at each of ``steps``: the worst, over its attributes, of each attribute's
    latest recorded verdict at or before the step (None before the first one)."""
    ordered = sorted(changes, key=lambda change: change.step)  # stable: recorded order among equals
    if not ordered:
        return [None] * len(steps)
    # The verdict after each change (a handful), then each step looks up the last change at or before it.
    current: dict[str, str | None] = {}
    after: list[str | None] = [None]
    for change in ordered:
        current[change.attribute] = change.verdict
        after.append(judge.worst(list(current.values())))
    at = np.searchsorted([change.step for change in ordered], np.asarray(steps), side="right")
    return [after[position] for position in at.tolist()]


def lowest_eod(
    steps: Sequence[int] | npt.NDArray[np.int64], eod: Sequence[float | None] | npt.NDArray[np.float64]
) -> tuple[float | None, int | None]:
    """The smallest eod of a timeline and the (first) step it was reached; (None, None) if none."""
    values = _floats(eod)
    if len(values) != len(steps):
        raise ValueError(f"{len(steps)} steps for {len(values)} values")
    finite = np.isfinite(values)
    if not finite.any():
        return None, None
    index = int(np.argmin(np.where(finite, values, np.inf)))
    return float(values[index]), int(np.asarray(steps)[index])


def attribute_recall(attribute: str, document: Mapping[str, Any], verdict: str | None = None) -> AttributeRecall:
    """The recall (TPR) and its interval per group out of an attribute section of a verdict document."""
    reference = document.get("reference")
    groups = []
    # In the document's order, by value (a JSON column may have reordered the keys).
    entries = sorted(document.get("groups", {}).items(), key=lambda item: list(item[1].get("values") or [item[0]]))
    for key, entry in entries:
        interval = (entry.get("ci") or {}).get("tpr") or [None, None]
        values = entry.get("values") or [key]
        groups.append(
            GroupRecall(
                group=" & ".join(str(value) for value in values),
                recall=entry.get("tpr"),
                low=interval[0],
                high=interval[1],
                positives=int(entry.get("positives", 0)),
                is_reference=key == reference,
            )
        )
    return AttributeRecall(attribute=attribute, verdict=verdict, groups=groups)


def pareto_front(xs: Sequence[float], ys: Sequence[float]) -> list[int]:
    """Indices of the points no other point beats, ordered by x: a point is beaten by one with an x
    no larger and a y no smaller, better in at least one (lower eod, higher accuracy)."""
    front = []
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        beaten = any(
            other_x <= x and other_y >= y and (other_x < x or other_y > y)
            for j, (other_x, other_y) in enumerate(zip(xs, ys, strict=True))
            if j != i
        )
        if not beaten:
            front.append(i)
    return sorted(front, key=lambda i: (xs[i], -ys[i]))


def timeline_point_budget(traces: int, *, total: int = TIMELINE_POINTS) -> int:
    """Points each of ``traces`` timeline traces may keep: an equal share of ``total``, at most
    MAX_POINTS, at least 100."""
    if traces <= 0:
        return MAX_POINTS
    return max(100, min(MAX_POINTS, total // traces))


# ---------------------------------------------------------------------------------- figures


def eod_timeline(
    timelines: Sequence[TrialTimeline],
    *,
    tolerance: float | None,
    floor: float | None,
    selected: int | None = None,
    total_points: int = TIMELINE_POINTS,
) -> go.Figure:
    """eod per validation step, one line per trial; ``[0, tolerance]`` as a band, ``[0, floor]`` as a
    shaded region; a marker (verdict colour, shape and name) where a trial's verdict changed."""
    import plotly.graph_objects as go

    layout = _layout(
        title="EOD per validation step",
        height=TIMELINE_HEIGHT,
        xaxis={"title": {"text": "step (batches trained)"}},
        yaxis={"title": {"text": "eod (largest recall gap)"}, "rangemode": "tozero"},
        # Beside the plot: a search's many trials scroll there instead of squeezing the plot.
        legend={"orientation": "v", "x": 1.01, "xanchor": "left", "y": 1, "yanchor": "top"},
    )
    data: list[dict[str, Any]] = []
    _bands(layout, tolerance=tolerance, floor=floor)
    with_data = [timeline for timeline in timelines if len(timeline.steps)]
    if not with_data:
        return _empty(layout, "No validation yet: the timeline grows as validations arrive.")
    budget = timeline_point_budget(len(with_data), total=total_points)
    changes: dict[str, list[tuple[int, float | None, int, str]]] = {}
    for index, timeline in enumerate(with_data):
        steps = np.asarray(timeline.steps, dtype=np.int64)
        values = _floats(timeline.eod)
        kept = downsample_indices(values, max_points=max(budget, MIN_POINTS), labels=timeline.verdicts)
        chosen = timeline.trial_id == selected
        data.append(
            dict(
                type="scatter",
                x=steps[kept],
                y=_shown(values[kept]),
                mode="lines+markers" if kept.size <= 30 else "lines",
                name=f"trial {timeline.number}",
                meta=timeline.trial_id,
                line={"color": palette.series_colour(index), "width": 3.5 if chosen else 1.6},
                opacity=1.0 if selected is None or chosen else 0.75,
                hovertemplate=f"trial {timeline.number}<br>step %{{x}}<br>eod %{{y:.4f}}<extra></extra>",
            )
        )
        if timeline.verdicts is not None and len(timeline.verdicts):
            labels = timeline.verdicts
            for i in [0, *label_changes(labels).tolist()]:
                if labels[i] is not None:
                    value = values[i]
                    shown = None if math.isnan(value) else round(float(value), DIGITS)
                    changes.setdefault(str(labels[i]), []).append(
                        (int(steps[i]), shown, timeline.trial_id, f"trial {timeline.number}")
                    )
    for verdict in VERDICTS:
        marks = changes.get(verdict)
        if not marks:
            continue
        label = palette.VERDICT_LABELS[verdict]
        data.append(
            dict(
                type="scatter",
                x=[mark[0] for mark in marks],
                y=[mark[1] for mark in marks],
                mode="markers",
                name=f"verdict became {label}",
                customdata=[mark[2] for mark in marks],
                text=[mark[3] for mark in marks],
                marker={
                    "color": palette.verdict_colour(verdict),
                    "symbol": palette.VERDICT_SYMBOLS[verdict],
                    "size": 11,
                    "line": {"color": palette.INK, "width": 1},
                },
                hovertemplate=f"%{{text}}: {label} from step %{{x}}<extra></extra>",
            )
        )
    return go.Figure(data=data, layout=layout)


def group_recall(attributes: Sequence[AttributeRecall], *, trial_number: int | None, step: int | None) -> go.Figure:
    """Recall per group with its interval (error bars), one row per group, the groups of each
    attribute together (the attribute labels its block); each attribute's legend entry names its
    verdict, and the reference groups are squares."""
    import plotly.graph_objects as go

    title = "Recall per group" if trial_number is None else f"Recall per group, trial {trial_number}"
    if step is not None:
        title += f" (step {step})"
    shown = [attribute for attribute in attributes if attribute.groups]
    rows = sum(len(attribute.groups) for attribute in shown)
    layout = _layout(
        title=title,
        height=max(HEIGHT, 150 + 24 * rows),
        xaxis={"title": {"text": "recall (TPR)"}, "range": [0, 1.02]},
        yaxis={"type": "multicategory", "autorange": "reversed", "automargin": True},
        showlegend=True,
        # Above the plot, whose height grows with the groups.
        legend={"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
        margin={"l": 60, "r": 20, "t": 80, "b": 50},
    )
    data: list[dict[str, Any]] = []
    if not shown:
        return _empty(layout, "No judged validation for this trial yet.")
    for index, attribute in enumerate(shown):
        groups = attribute.groups
        recall = [group.recall for group in groups]
        upper = [_gap(group.high, group.recall) for group in groups]
        lower = [_gap(group.recall, group.low) for group in groups]
        verdict = palette.VERDICT_LABELS.get(attribute.verdict or "", "no verdict")
        data.append(
            dict(
                type="scatter",
                x=[None if value is None else round(value, DIGITS) for value in recall],
                y=[[plain(attribute.attribute)] * len(groups), [plain(group.group) for group in groups]],
                mode="markers",
                name=f"{plain(attribute.attribute)}: {verdict}",
                marker={
                    "color": palette.series_colour(index),
                    "size": 10,
                    "symbol": ["square" if group.is_reference else "circle" for group in groups],
                },
                error_x={"type": "data", "symmetric": False, "array": upper, "arrayminus": lower, "width": 5},
                customdata=[
                    [
                        group.positives,
                        _interval_text(group.low, group.high),
                        " (reference)" if group.is_reference else "",
                    ]
                    for group in groups
                ],
                hovertemplate=(
                    "%{y}%{customdata[2]}<br>recall %{x:.3f} %{customdata[1]}<br>%{customdata[0]} positives"
                    "<extra></extra>"
                ),
            )
        )
    return go.Figure(data=data, layout=layout)


def worker_share_heatmap(
    steps: Sequence[int],
    rows: Sequence[WorkerShareRow],
    spreads: Mapping[str, Sequence[float | None]],
    *,
    max_columns: int = HEATMAP_COLUMNS,
) -> go.Figure | None:
    """Each worker's share of each group (rows: attribute, group, worker rank; columns: steps), and
    below it each attribute's worker-share spread. None when fewer than two workers reported."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    if len({row.rank for row in rows}) < 2 or not len(steps):
        return None
    ordered = sorted(rows, key=lambda row: (row.attribute, row.group, row.rank))
    matrix = np.vstack([_floats(row.values) for row in ordered])
    columns, x = _bucket_means(matrix, np.asarray(steps, dtype=np.int64), max_columns)
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.72, 0.28], vertical_spacing=0.06)
    figure.update_layout(_layout(
        title="Worker share of each group over training",
        # Room for every row's label (attribute=group · rank k): with less, plotly shows every other
        # one, which with two workers is only rank 0's.
        height=max(HEIGHT, 160 + 24 * len(ordered)),
        showlegend=True,
    ))  # fmt: skip
    figure.add_trace(
        go.Heatmap(
            z=columns.astype(np.float32),
            x=x,
            y=[f"{plain(row.attribute)}={plain(row.group)} · rank {row.rank}" for row in ordered],
            colorscale="Cividis",
            zmin=0,
            zmax=1,
            colorbar={"title": {"text": "share"}, "len": 0.7, "y": 0.64},
            hovertemplate="%{y}<br>step %{x}<br>share %{z:.3f}<extra></extra>",
            showscale=True,
        ),
        row=1,
        col=1,
    )
    step_array = np.asarray(steps, dtype=np.int64)
    for index, (attribute, values) in enumerate(sorted(spreads.items())):
        series = _floats(values)
        kept = downsample_indices(series, max_points=MAX_POINTS)
        figure.add_trace(
            go.Scatter(
                x=step_array[kept],
                y=_shown(series[kept]),
                mode="lines",
                name=f"spread {plain(attribute)}",
                line={"color": palette.series_colour(index), "width": 1.6},
                hovertemplate=f"{plain(attribute)}<br>step %{{x}}<br>spread %{{y:.3f}}<extra></extra>",
            ),
            row=2,
            col=1,
        )
    figure.update_yaxes(autorange="reversed", dtick=1, automargin=True, tickfont={"size": 11}, row=1, col=1)
    figure.update_yaxes(title_text="spread", rangemode="tozero", row=2, col=1)
    figure.update_xaxes(title_text="step (batches trained)", row=2, col=1)
    return figure


def accuracy_scatter(
    summaries: Sequence[TrialSummary], *, objective: Objective = "eod", selected: int | None = None
) -> go.Figure:
    """Accuracy against ``objective`` at each trial's latest validation, markers in the verdict's
    colour and shape; the Pareto front (lower objective, higher accuracy) joined by a line."""
    import plotly.graph_objects as go

    label = OBJECTIVE_LABELS[objective]
    layout = _layout(
        title=f"Accuracy vs {objective}",
        xaxis={"title": {"text": label}},
        yaxis={"title": {"text": "accuracy"}},
    )
    data: list[dict[str, Any]] = []
    points = [
        summary for summary in summaries if summary.accuracy is not None and getattr(summary, objective) is not None
    ]
    if not points:
        return _empty(layout, "No validation yet.")
    xs = [float(getattr(point, objective)) for point in points]
    ys = [float(point.accuracy) for point in points]  # type: ignore[arg-type]
    front = pareto_front(xs, ys)
    data.append(
        dict(
            type="scatter",
            x=[round(xs[i], DIGITS) for i in front],
            y=[round(ys[i], DIGITS) for i in front],
            mode="lines",
            line={"color": palette.INK, "width": 1.4, "dash": "dot", "shape": "hv"},
            name="Pareto front",
            hoverinfo="skip",
        )
    )
    on_front = set(front)
    for verdict in (*VERDICTS, None):
        members = [i for i, point in enumerate(points) if point.verdict == verdict]
        if not members:
            continue
        name = palette.VERDICT_LABELS[verdict] if verdict else "no verdict"
        outline = [3 if points[i].trial_id == selected else (1.5 if i in on_front else 0.5) for i in members]
        data.append(
            dict(
                type="scatter",
                x=[round(xs[i], DIGITS) for i in members],
                y=[round(ys[i], DIGITS) for i in members],
                mode="markers+text",
                name=name,
                text=[f"{points[i].number}" for i in members],
                textposition="top center",
                customdata=[points[i].trial_id for i in members],
                hovertext=[_trial_hover(points[i], on_front=i in on_front) for i in members],
                hovertemplate="%{hovertext}<extra></extra>",
                marker={
                    "color": palette.verdict_colour(verdict),
                    "symbol": palette.VERDICT_SYMBOLS.get(verdict or "", "circle-open"),
                    "size": [16 if points[i].trial_id == selected else 11 for i in members],
                    "line": {"color": palette.INK, "width": outline},
                },
            )
        )
    return go.Figure(data=data, layout=layout)


def lowest_eod_bars(
    summaries: Sequence[TrialSummary], *, tolerance: float | None, selected: int | None = None
) -> go.Figure:
    """The lowest eod each trial reached (bars), the tolerance (a line) and each trial's noise floor
    (a tick across its bar)."""
    import plotly.graph_objects as go

    layout = _layout(
        title="Lowest EOD per trial",
        xaxis={"title": {"text": "trial"}, "type": "category"},
        yaxis={"title": {"text": "lowest eod"}, "rangemode": "tozero"},
        bargap=0.35,
    )
    data: list[dict[str, Any]] = []
    _bands(layout, tolerance=tolerance, floor=None)
    bars = [summary for summary in summaries if summary.lowest_eod is not None]
    if not bars:
        return _empty(layout, "No validation yet.")
    names = [f"trial {bar.number}" for bar in bars]
    data.append(
        dict(
            type="bar",
            x=names,
            y=[round(float(bar.lowest_eod), DIGITS) for bar in bars],  # type: ignore[arg-type]
            name="lowest eod",
            customdata=[bar.trial_id for bar in bars],
            hovertext=[f"trial {bar.number}: {bar.lowest_eod:.4f} at step {bar.lowest_eod_step}" for bar in bars],
            hovertemplate="%{hovertext}<extra></extra>",
            marker={
                "color": [palette.SERIES[0] if bar.trial_id == selected else SERIES_LIGHT for bar in bars],
                "line": {"color": palette.INK, "width": [2 if bar.trial_id == selected else 0 for bar in bars]},
            },
        )
    )
    floors = [(name, bar) for name, bar in zip(names, bars, strict=True) if bar.noise_floor is not None]
    if floors:
        data.append(
            dict(
                type="scatter",
                x=[name for name, _ in floors],
                y=[round(float(bar.noise_floor), DIGITS) for _, bar in floors],  # type: ignore[arg-type]
                mode="markers",
                name="noise floor",
                customdata=[bar.trial_id for _, bar in floors],
                marker={"symbol": "line-ew-open", "size": 34, "color": palette.MUTED, "line": {"width": 3}},
                hovertemplate="%{x}: noise floor %{y:.4f}<extra></extra>",
            )
        )
    return go.Figure(data=data, layout=layout)


# --------------------------------------------------------------------------------- helpers


def _layout(**overrides: Any) -> dict[str, Any]:
    layout = palette.base_layout(**{
        "template": QUIET_TEMPLATE,
        "height": HEIGHT,
        # Below the axis title, not on it.
        "legend": {"orientation": "h", "x": 0, "y": -0.3, "yanchor": "top"},
        "margin": {"l": 60, "r": 20, "t": 40, "b": 40},
        **overrides,
    })  # fmt: skip
    title = layout.get("title")
    if isinstance(title, str):
        layout["title"] = {"text": title, "x": 0.01, "font": {"size": 15}}
    return layout


def _bands(layout: dict[str, Any], *, tolerance: float | None, floor: float | None) -> None:
    """The tolerance band [0, δ] with its edge, and the noise floor [0, floor] shaded, across the
    plot; both in the legend, so the colours are named."""
    shapes = layout.setdefault("shapes", [])
    if floor is not None and floor > 0:
        shapes.append({
            "type": "rect", "xref": "paper", "x0": 0, "x1": 1, "y0": 0, "y1": round(floor, DIGITS), "layer": "below",
            "fillcolor": palette.NOISE_FILL, "line": {"width": 0},
            "name": f"noise floor {floor:.3f}", "showlegend": True,
        })  # fmt: skip
    if tolerance is not None:
        shapes.append({
            "type": "rect", "xref": "paper", "x0": 0, "x1": 1, "y0": 0, "y1": tolerance, "layer": "below",
            "fillcolor": palette.TOLERANCE_FILL, "line": {"width": 0},
            "name": f"tolerance δ = {tolerance:g}", "showlegend": True,
        })  # fmt: skip
        shapes.append({
            "type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": tolerance, "y1": tolerance, "layer": "below",
            "line": {"color": palette.TOLERANCE_LINE, "width": 1.5, "dash": "dash"},
        })  # fmt: skip


def _empty(layout: dict[str, Any], message: str) -> go.Figure:
    """The figure with ``message`` in place of data."""
    import plotly.graph_objects as go

    layout.setdefault("annotations", []).append({
        "text": message, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5, "showarrow": False,
        "font": {"color": palette.MUTED},
    })  # fmt: skip
    return go.Figure(layout=layout)


def _floats(values: Sequence[float | None] | npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return np.asarray(values, dtype=np.float64)  # None becomes NaN


def _shown(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    """A long series as the chart gets it: single precision (7 significant digits, more than any
    chart shows), NaN for a gap. Arrays go to plotly as they are: it checks and encodes an array at
    once (base64 in the JSON, which plotly.js reads), where a list is checked item by item."""
    return values.astype(np.float32)


def _gap(high: float | None, low: float | None) -> float | None:
    return None if high is None or low is None else round(max(0.0, high - low), DIGITS)


def _interval_text(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f"[{low:.3f}, {high:.3f}]"


def _trial_hover(point: TrialSummary, *, on_front: bool) -> str:
    lines = [f"trial {point.number}" + (" (Pareto front)" if on_front else "")]
    for name in ("accuracy", "eod", "fair_objective"):
        value = getattr(point, name)
        if value is not None:
            lines.append(f"{name} {value:.4f}")
    lines.extend(f"{plain(name)}={plain(value)}" for name, value in point.hparams)
    return "<br>".join(lines)


def _bucket_means(
    matrix: npt.NDArray[np.float64], steps: npt.NDArray[np.int64], max_columns: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """``matrix`` (rows x steps) with its columns averaged over at most ``max_columns`` buckets of
    consecutive steps (NaN ignored), and each bucket's last step."""
    n = steps.size
    if n <= max_columns:
        return matrix, steps
    bucket = (np.arange(n) * max_columns) // n
    starts = np.searchsorted(bucket, np.arange(max_columns))
    present = ~np.isnan(matrix)
    sums = np.add.reduceat(np.where(present, matrix, 0.0), starts, axis=1)
    counts = np.add.reduceat(present.astype(np.int64), starts, axis=1)
    means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    ends = np.append(starts[1:], n) - 1
    return means, steps[ends]
