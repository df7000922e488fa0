"""The experiment page's figures: plain data in, a Plotly figure out (docs/dashboard.md).

- :func:`eod_timeline`: eod per validation step for every trial, the policy tolerance as a band, the
  selected trial's noise floor (at each step the floor of the pair of groups that set its eod) as a
  shaded region, the trials' verdict changes marked; long series downsampled (:mod:`.downsample`).
- :func:`group_recall`: the selected trial's recall per group, with its interval, per attribute.
- :func:`worker_share_heatmap`: how far each worker's share of each group strays from the group's
  share over all workers, over the steps, with the worker-share spread; ``None`` for a trial that ran
  on one worker.
- :func:`accuracy_scatter`: accuracy against eod (or fair_objective) of every trial, the Pareto
  front of the search marked, the best few numbered where their labels do not collide.
- :func:`lowest_eod_bars`: the lowest eod each trial reached, with the tolerance and the noise floor
  of the pair of groups that set it.

A figure without data says so in its middle and keeps fixed axes ([0, 1] for rates), not plotly's
empty default (-1 to 4).

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
from auditportal.fairness.figures.downsample import (
    MAX_POINTS,
    MIN_POINTS,
    IndexArray,
    downsample_indices,
    label_changes,
)
from auditportal.fairness.figures.text import plain
from auditportal.fairness.files.intersections import group_values, split_key
from auditportal.fairness.statistics import judge
from auditportal.fairness.statistics.stats import VERDICTS
from auditportal.fairness.text import numbers

if TYPE_CHECKING:
    import plotly.graph_objects as go

# All the timeline's traces together keep at most this many points (each at most MAX_POINTS), so
# the page's payload stays bounded however many trials a search has.
TIMELINE_POINTS = 20_000
# Heat-map columns: buckets of consecutive reports, averaged.
HEATMAP_COLUMNS = 400
# The worker-share map's colour scale reaches at least this deviation from the workers' mean share.
SHARE_DEVIATION_MIN = 0.005
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
    # The largest noise floor of the trial's recall comparisons (its verdicts'), for its report.
    noise_floor: float | None = None
    verdict: str | None = None
    hparams: Sequence[tuple[str, str]] = ()
    # The noise floor of the pair of groups that set the lowest eod, and that pair ("gender: f vs m").
    lowest_eod_floor: float | None = None
    lowest_eod_pair: str | None = None


@dataclass(frozen=True)
class EodFloor:
    """The noise floor under one trial's eod: at each of ``steps``, the floor of the pair of groups
    whose recall gap the eod is there (fairness.statistics.eod), None where no pair sets it; ``pairs``
    names each step's pair as the hover shows it."""

    trial_id: int
    number: int
    steps: Sequence[int]
    floors: Sequence[float | None]
    pairs: Sequence[str]


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


# Where a number may go beside its mark, in order of preference, and the offset of its box's centre
# from the mark in units of the box's half width and half height (plotly's textposition names).
LABEL_PLACES: tuple[tuple[str, float, float], ...] = (
    ("top center", 0.0, 1.0),
    ("bottom center", 0.0, -1.0),
    ("middle right", 1.0, 0.0),
    ("middle left", -1.0, 0.0),
    ("top right", 1.0, 1.0),
    ("top left", -1.0, 1.0),
    ("bottom right", 1.0, -1.0),
    ("bottom left", -1.0, -1.0),
)
# In fractions of the plot (the data's range on each axis): a number of up to three digits in 12 px
# type beside an 11 px mark, on the narrowest plot the page draws (about 300 x 250 px, a phone).
LABEL_HALF_WIDTH = 0.045
LABEL_HALF_HEIGHT = 0.04
MARK_RADIUS = 0.025
MAX_LABELS = 5


def label_positions(
    xs: Sequence[float],
    ys: Sequence[float],
    order: Sequence[int],
    *,
    limit: int = MAX_LABELS,
    always: Sequence[int] = (),
) -> dict[int, str]:
    """Which points get their number written beside them, and where (a plotly ``textposition``):
    up to ``limit`` of ``order`` (most wanted first), each at the first of LABEL_PLACES where its box
    overlaps no mark and no number placed before it, measured in fractions of the data's range (the
    plot's scale, give or take its margin). A point with no free place gets no number, but one of
    ``always`` (the selected trial) then takes the first place clear of numbers, over a mark."""
    if not xs:
        return {}

    def scaled(values: Sequence[float]) -> npt.NDArray[np.float64]:
        array = np.asarray(values, dtype=np.float64)
        span = float(array.max() - array.min())
        return np.full(array.shape, 0.5) if span == 0 else (array - array.min()) / span

    x, y = scaled(xs), scaled(ys)
    marks = [(float(px), float(py), MARK_RADIUS, MARK_RADIUS) for px, py in zip(x, y, strict=True)]
    boxes: list[tuple[float, float, float, float]] = []
    placed: dict[int, str] = {}

    def box_at(i: int, dx: float, dy: float) -> tuple[float, float, float, float]:
        return (
            float(x[i]) + dx * (MARK_RADIUS + LABEL_HALF_WIDTH),
            float(y[i]) + dy * (MARK_RADIUS + LABEL_HALF_HEIGHT),
            LABEL_HALF_WIDTH,
            LABEL_HALF_HEIGHT,
        )

    for i in dict.fromkeys(order):
        if len(placed) >= limit:
            break
        for avoid_marks in (True, False) if i in always else (True,):
            free = [
                (name, box)
                for name, dx, dy in LABEL_PLACES
                for box in [box_at(i, dx, dy)]
                if not any(_overlap(box, other) for other in [*boxes, *(marks if avoid_marks else [])])
            ]
            if free:
                placed[i], box = free[0]
                boxes.append(box)
                break
    return placed


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    """Two boxes (centre x, centre y, half width, half height) overlap (touching is not overlapping)."""
    return abs(a[0] - b[0]) < a[2] + b[2] - 1e-9 and abs(a[1] - b[1]) < a[3] + b[3] - 1e-9


def timeline_point_budget(traces: int, *, total: int = TIMELINE_POINTS) -> int:
    """Points each of ``traces`` timeline traces may keep: an equal share of ``total``, at most
    MAX_POINTS, at least 100."""
    if traces <= 0:
        return MAX_POINTS
    return max(100, min(MAX_POINTS, total // traces))


# ---------------------------------------------------------------------------------- figures


def timeline_kept(timelines: Sequence[TrialTimeline], *, total_points: int = TIMELINE_POINTS) -> dict[int, IndexArray]:
    """Per trial id, the indices of its timeline's points the chart keeps (:mod:`.downsample`, the
    trials with a validation sharing ``total_points``): the selectors compute the noise floor at
    these steps only."""
    with_data = [timeline for timeline in timelines if len(timeline.steps)]
    budget = max(timeline_point_budget(len(with_data), total=total_points), MIN_POINTS)
    return {
        timeline.trial_id: downsample_indices(_floats(timeline.eod), max_points=budget, labels=timeline.verdicts)
        for timeline in with_data
    }


def pair_label(attribute: str, high: str, low: str) -> str:
    """The pair of groups that sets an eod, as people read it: ``gender: male − female``, an
    intersection's ``gender & race: female · b − male · a`` (keys in, fairness/files/intersections)."""
    columns = split_key(attribute)

    def shown(group: str) -> str:
        return " · ".join(group_values(group, len(columns)))

    return f"{' & '.join(columns)}: {shown(high)} − {shown(low)}"


def eod_timeline(
    timelines: Sequence[TrialTimeline],
    *,
    tolerance: float | None,
    floor: float | None = None,
    eod_floor: EodFloor | None = None,
    selected: int | None = None,
    total_points: int = TIMELINE_POINTS,
    max_step: int | None = None,
) -> go.Figure:
    """eod per validation step, one line per trial; ``[0, tolerance]`` as a band; a marker (verdict
    colour, shape and name) where a trial's verdict changed. ``eod_floor``: one trial's noise floor
    at each step (the floor of the pair that set its eod there), shaded under its line. ``floor``: one
    value shaded across the plot instead (the signed report's experiment figure). ``max_step``: the
    step axis's end while there is no validation yet."""
    import plotly.graph_objects as go

    layout = _layout(
        title="EOD per validation step",
        height=TIMELINE_HEIGHT,
        # From 0 (one validation is not a range from 99 to 101); to the planned length when known,
        # so that a running trial's line grows across the axis.
        xaxis={"title": {"text": "step (batches trained)"}, "rangemode": "tozero"},
        yaxis={"title": {"text": "eod (largest recall gap)"}, "rangemode": "tozero"},
        # Beside the plot: a search's many trials scroll there instead of squeezing the plot.
        legend={"orientation": "v", "x": 1.01, "xanchor": "left", "y": 1, "yanchor": "top"},
    )
    data: list[dict[str, Any]] = []
    _bands(layout, tolerance=tolerance, floor=floor)
    with_data = [timeline for timeline in timelines if len(timeline.steps)]
    if not with_data:
        return _empty(
            layout,
            "No validations yet: the timeline grows as validations arrive.",
            x=[0, max_step] if max_step else None,
            y=[0, 1],
        )
    last = max(int(np.max(timeline.steps)) for timeline in with_data)
    if max_step:
        layout["xaxis"]["range"] = [0, max(max_step, last)]
    kept_of = timeline_kept(with_data, total_points=total_points)
    if eod_floor is not None and any(value is not None for value in eod_floor.floors):
        data.append(_floor_band(eod_floor))
    changes: dict[str, list[tuple[int, float | None, int, str]]] = {}
    for index, timeline in enumerate(with_data):
        steps = np.asarray(timeline.steps, dtype=np.int64)
        values = _floats(timeline.eod)
        kept = kept_of[timeline.trial_id]
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
                hovertemplate=f"trial {timeline.number}<br>step %{{x:,}}<br>eod %{{y:.3g}}<extra></extra>",
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
                hovertemplate=f"%{{text}}: {label} from step %{{x:,}}<extra></extra>",
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
        # The title holds its own room at the top (automargin), the legend below it takes the rows
        # its entries wrap into on a narrow screen: neither is drawn over the other.
        title={
            "text": title, "x": 0.01, "font": {"size": 15}, "automargin": True,
            "yref": "container", "y": 1, "yanchor": "top", "pad": {"t": 10, "b": 12},
        },
        height=max(HEIGHT, 150 + 24 * rows),
        xaxis={"title": {"text": "recall (TPR)"}, "range": [0, 1.02]},
        yaxis={"type": "multicategory", "autorange": "reversed", "automargin": True},
        showlegend=True,
        # Above the plot, whose height grows with the groups.
        legend={"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
        margin={"l": 60, "r": 20, "t": 30, "b": 50},
    )  # fmt: skip
    data: list[dict[str, Any]] = []
    if not shown:
        return _empty(layout, "No judged validation for this trial yet.", x=[0, 1.02])
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
                    "%{y}%{customdata[2]}<br>recall %{x:.3g} %{customdata[1]}<br>%{customdata[0]:,} positives"
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
    trial_number: int | None = None,
    max_columns: int = HEATMAP_COLUMNS,
) -> go.Figure | None:
    """How far each worker's share of each group strays from the group's share over all workers
    (rows: attribute, group, worker rank; columns: steps), on a diverging scale centred at 0, and
    below it each attribute's worker-share spread. None when fewer than two workers reported.

    A worker's expected share of a group is the mean of the workers' shares at that step (the shards
    are stratified, and data-parallel workers read equally many rows): a worker whose batches hold
    too few of a group is blue, too many red. The scale runs to the largest deviation in the data,
    at least SHARE_DEVIATION_MIN, so that differences of a thousandth show and float noise does not."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    if len({row.rank for row in rows}) < 2 or not len(steps):
        return None
    ordered = sorted(rows, key=lambda row: (row.attribute, row.group, row.rank))
    matrix = np.vstack([_floats(row.values) for row in ordered])
    expected = _group_means(matrix, [(row.attribute, row.group) for row in ordered])
    columns, x = _bucket_means(matrix, np.asarray(steps, dtype=np.int64), max_columns)
    deviations, _ = _bucket_means(matrix - expected, np.asarray(steps, dtype=np.int64), max_columns)
    finite = np.abs(deviations[np.isfinite(deviations)])
    reach = max(float(finite.max()) if finite.size else 0.0, SHARE_DEVIATION_MIN)
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.72, 0.28], vertical_spacing=0.06)
    title = "Worker share of each group" + ("" if trial_number is None else f", trial {trial_number}")
    figure.update_layout(_layout(
        title=title,
        # Room for every row's label (attribute=group · rank k): with less, plotly shows every other
        # one, which with two workers is only rank 0's.
        height=max(HEIGHT, 160 + 24 * len(ordered)),
        showlegend=True,
    ))  # fmt: skip
    figure.add_trace(
        go.Heatmap(
            z=deviations.astype(np.float32),
            customdata=columns.astype(np.float32),
            x=x,
            y=[f"{plain(row.attribute)}={plain(row.group)} · rank {row.rank}" for row in ordered],
            colorscale="RdBu",
            reversescale=True,  # more of the group than expected: red; fewer: blue
            zmin=-reach,  # symmetric: 0, no deviation, is the scale's white middle
            zmax=reach,
            colorbar={"title": {"text": "share −<br>workers'<br>mean"}, "len": 0.7, "y": 0.64, "tickformat": "+.3~f"},
            hovertemplate=(
                "%{y}<br>step %{x:,}<br>share %{customdata:.3g}<br>against the workers' mean %{z:+.2g}<extra></extra>"
            ),
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
                hovertemplate=f"{plain(attribute)}<br>step %{{x:,}}<br>spread %{{y:.3g}}<extra></extra>",
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
    colour and shape; the Pareto front (lower objective, higher accuracy) joined by a line; the
    selected trial and the best few of the front numbered (:func:`label_positions`), every trial's
    number in its hover."""
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
        # eod is a rate's gap, in [0, 1]; fair_objective a loss plus a multiple of it, unbounded.
        return _empty(layout, "No validations yet.", x=[0, 1] if objective == "eod" else None, y=[0, 1])
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
    # Numbers beside the selected trial and the best of the front only, where they collide with no
    # other number or mark; every trial's number and values are in its hover.
    chosen = [i for i, point in enumerate(points) if point.trial_id == selected]
    placed = label_positions(xs, ys, [*chosen, *front], always=chosen)
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
                mode="markers",
                name=name,
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
    if placed:
        # The numbers in a trace of their own, on top and without hover: a marks trace with an empty
        # text for the unnumbered would lose a number when plotly.js redraws it (Plotly.react keeps
        # no text node for a point whose text was empty before).
        numbered = sorted(placed)
        data.append(
            dict(
                type="scatter",
                x=[round(xs[i], DIGITS) for i in numbered],
                y=[round(ys[i], DIGITS) for i in numbered],
                # Invisible marks as large as the drawn ones: plotly.js sets a number beside its mark.
                mode="markers+text",
                marker={"size": [16 if points[i].trial_id == selected else 11 for i in numbered], "opacity": 0},
                name="trial numbers",
                text=[f"{points[i].number}" for i in numbered],
                textposition=[placed[i] for i in numbered],
                textfont={"color": palette.INK, "size": 12},
                cliponaxis=False,  # a number beside a mark at the plot's edge stays whole
                hoverinfo="skip",
                showlegend=False,
            )
        )
    return go.Figure(data=data, layout=layout)


def lowest_eod_bars(
    summaries: Sequence[TrialSummary], *, tolerance: float | None, selected: int | None = None
) -> go.Figure:
    """The lowest eod each trial reached (bars), the tolerance (a line) and the noise floor of the pair
    of groups that set it (a tick across its bar, ``TrialSummary.lowest_eod_floor``)."""
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
        return _empty(layout, "No validations yet.", y=[0, 1])
    names = [f"trial {bar.number}" for bar in bars]
    data.append(
        dict(
            type="bar",
            x=names,
            y=[round(float(bar.lowest_eod), DIGITS) for bar in bars],  # type: ignore[arg-type]
            name="lowest eod",
            customdata=[bar.trial_id for bar in bars],
            hovertext=[
                f"trial {bar.number}: {numbers.rate(bar.lowest_eod)} at step {numbers.count(bar.lowest_eod_step)}"
                for bar in bars
            ],
            hovertemplate="%{hovertext}<extra></extra>",
            marker={
                "color": [palette.SERIES[0] if bar.trial_id == selected else SERIES_LIGHT for bar in bars],
                "line": {"color": palette.INK, "width": [2 if bar.trial_id == selected else 0 for bar in bars]},
            },
        )
    )
    floors = [(name, bar) for name, bar in zip(names, bars, strict=True) if bar.lowest_eod_floor is not None]
    if floors:
        data.append(
            dict(
                type="scatter",
                x=[name for name, _ in floors],
                y=[round(float(bar.lowest_eod_floor), DIGITS) for _, bar in floors],  # type: ignore[arg-type]
                mode="markers",
                name="noise floor of the pair that set it",
                customdata=[bar.trial_id for _, bar in floors],
                text=[plain(bar.lowest_eod_pair or "") for _, bar in floors],
                marker={"symbol": "line-ew-open", "size": 34, "color": palette.MUTED, "line": {"width": 3}},
                hovertemplate="%{x}: set by %{text}<br>noise floor of that pair %{y:.3g}<extra></extra>",
            )
        )
    return go.Figure(data=data, layout=layout)


# --------------------------------------------------------------------------------- helpers


def _floor_band(eod_floor: EodFloor) -> dict[str, Any]:
    """The region [0, floor] under the trial's eod, the floor at each step that of the pair that set
    the eod there; no region where no pair did. Drawn first, under every line."""
    if not len(eod_floor.steps) == len(eod_floor.floors) == len(eod_floor.pairs):
        raise ValueError("an EodFloor has one floor and one pair per step")
    floors = _floats(eod_floor.floors)
    return dict(
        type="scatter",
        x=np.asarray(eod_floor.steps, dtype=np.int64),
        y=_shown(floors),
        # A tick at each step while there are few (one validation has no area to shade).
        mode="lines+markers" if len(floors) <= 30 else "lines",
        marker={"symbol": "line-ew-open", "size": 14, "color": palette.MUTED, "line": {"width": 2}},
        fill="tozeroy",
        fillcolor=palette.NOISE_FILL,
        line={"width": 0, "color": palette.MUTED},
        name=f"noise floor, trial {eod_floor.number}",
        legendrank=2000,  # after the trials
        text=[plain(pair) for pair in eod_floor.pairs],
        hovertemplate=(
            f"trial {eod_floor.number}, step %{{x:,}}<br>eod set by %{{text}}<br>noise floor of that pair %{{y:.3g}}"
            "<extra></extra>"
        ),
    )


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


def _empty(
    layout: dict[str, Any], message: str, *, x: Sequence[float] | None = None, y: Sequence[float] | None = None
) -> go.Figure:
    """The figure with ``message`` in place of data, on fixed axes: ``x`` and ``y`` their ranges (a
    rate's is [0, 1]); an axis without one keeps its title but no numbers, rather than plotly's
    empty default of -1 to 4 (impossible for a rate, a step or an accuracy)."""
    import plotly.graph_objects as go

    layout.setdefault("annotations", []).append({
        "text": message, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5, "showarrow": False,
        "font": {"color": palette.MUTED},
    })  # fmt: skip
    for name, bounds in (("xaxis", x), ("yaxis", y)):
        axis = {key: value for key, value in layout.get(name, {}).items() if key not in ("rangemode", "type")}
        if bounds is None:
            axis.update(range=[0, 1], showticklabels=False, showgrid=False)
        else:
            axis.update(range=list(bounds))
        layout[name] = {**axis, "autorange": False, "fixedrange": True, "zeroline": False}
    layout["showlegend"] = False
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
    return "" if low is None or high is None else numbers.interval(low, high, signed=False)


def _trial_hover(point: TrialSummary, *, on_front: bool) -> str:
    lines = [f"trial {point.number}" + (" (Pareto front)" if on_front else "")]
    for name in ("accuracy", "eod", "fair_objective"):
        value = getattr(point, name)
        if value is not None:
            lines.append(f"{name} {numbers.rate(value)}")
    lines.extend(f"{plain(name)}={plain(value)}" for name, value in point.hparams)
    return "<br>".join(lines)


def _group_means(matrix: npt.NDArray[np.float64], keys: Sequence[tuple[str, str]]) -> npt.NDArray[np.float64]:
    """Each row's expected value: at each step, the mean over the rows of its (attribute, group),
    the workers that reported there (NaN ignored)."""
    expected = np.full(matrix.shape, np.nan)
    for key in dict.fromkeys(keys):
        members = [index for index, other in enumerate(keys) if other == key]
        block = matrix[members]
        present = np.isfinite(block)
        counts = present.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(counts > 0, np.where(present, block, 0.0).sum(axis=0) / np.maximum(counts, 1), np.nan)
        expected[members] = mean
    return expected


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
