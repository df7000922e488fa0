"""The forest plot of a judged document: every comparison's difference with its familywise interval,
against the ±tolerance band, one panel per metric (docs/dashboard.md, "Prediction audits").

It is drawn from the stored document (docs/audit-json.md), so it shows exactly what was judged:
the difference, ``ci_low``/``ci_high`` and ``verdict`` of each comparison as they were stored, and
the tolerance of the policy the document was judged under. Colour is never the only cue: each
verdict also has its own marker shape and its name written beside the point; comparisons the policy
does not judge are drawn hollow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from auditportal.fairness.documents.findings import document_attributes
from auditportal.fairness.figures import palette
from auditportal.fairness.figures.text import plain, shorten
from auditportal.fairness.statistics.stats import COMPARED, Verdict
from auditportal.fairness.text import numbers, presentation

if TYPE_CHECKING:
    import plotly.graph_objects as go

ROW_PX = 34  # height of one comparison's row, with the verdict's name written above its mark
# Beyond this many comparisons (a large intersection) rows are DENSE_ROW_PX high and the names are
# left to the legend and the hover: the marks keep their colour and shape.
DENSE_ABOVE = 150
DENSE_ROW_PX = 16
PANEL_GAP_PX = 64  # between panels: the next panel's title and the x tick labels
MARGIN_TOP_PX = 64  # the references above the first panel
MARGIN_BOTTOM_PX = 96  # the x axis title and the legend
LABEL_CHARS = 48  # longer group labels are cut on the axis (the hover has them whole)
# Worst first: the legend reads FAIL, INCONCLUSIVE, PASS.
VERDICT_ORDER = (Verdict.FAIL.value, Verdict.INCONCLUSIVE.value, Verdict.PASS.value)


@dataclass(frozen=True)
class ForestPoint:
    """One comparison as the plot draws it (the numbers exactly as stored)."""

    metric: str
    attribute: str  # the attribute's key
    group: str  # the group's key
    label: str  # the axis label: attribute and group, as people read them
    difference: float | None  # None: undefined (a rate has no denominator)
    low: float | None
    high: float | None
    verdict: str
    judged: bool
    hover: str


def references(attributes: Mapping[str, Any]) -> list[str]:
    """Each attribute's reference group, as "gender = male" (intersections: "gender & race = male · a")."""
    return [
        f"{' & '.join(table.columns)} = {' · '.join(table.reference_values)}"
        for table in presentation.attribute_tables({"attributes": attributes})
        if table.reference_values is not None and table.comparisons
    ]


def forest_points(attributes: Mapping[str, Any]) -> dict[str, list[ForestPoint]]:
    """Every comparison of every attribute, grouped by metric (in the order of ``stats.COMPARED``,
    then any other metric in the order met), each metric's in document order."""
    panels: dict[str, list[ForestPoint]] = {}
    tables = presentation.attribute_tables({"attributes": attributes})
    for table, section in zip(tables, attributes.values(), strict=True):
        attribute_label = " & ".join(table.columns)
        reference = " · ".join(table.reference_values or ())
        for row, item in zip(table.comparisons, section["comparisons"], strict=True):
            group_label = " · ".join(row.group_values)
            label = f"{attribute_label}: {group_label}"
            panels.setdefault(item["metric"], []).append(
                ForestPoint(
                    metric=item["metric"],
                    attribute=table.name,
                    group=item["group"],
                    label=label,
                    difference=item["difference"],
                    low=item["ci_low"],
                    high=item["ci_high"],
                    verdict=item["verdict"],
                    judged=row.judged,
                    hover=_hover(label, reference, row),
                )
            )
    order = {metric: index for index, metric in enumerate(COMPARED)}
    return dict(sorted(panels.items(), key=lambda entry: order.get(entry[0], len(order))))


def forest_plot(attributes: Mapping[str, Any], *, tolerance: float) -> go.Figure | None:
    """The forest plot of ``attributes`` (an audit document's, or a trial document's), or None when
    nothing was compared."""
    from plotly.subplots import make_subplots

    panels = forest_points(attributes)
    if not any(panels.values()):
        return None
    metrics = list(panels)
    rows = [len(panels[metric]) for metric in metrics]
    dense = sum(rows) > DENSE_ABOVE
    plot_px = sum(rows) * (DENSE_ROW_PX if dense else ROW_PX) + PANEL_GAP_PX * (len(metrics) - 1)
    figure = make_subplots(
        rows=len(metrics),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=PANEL_GAP_PX / plot_px if len(metrics) > 1 else 0.0,
        row_heights=[count / sum(rows) for count in rows],
        subplot_titles=[
            f"{plain(presentation.METRIC_LABELS.get(metric, metric))}: "
            f"{numbers.plural(len(panels[metric]), 'comparison')}"
            for metric in metrics
        ],
    )
    span = _span(panels, tolerance)
    legend_shown: set[tuple[str, bool]] = set()
    for index, metric in enumerate(metrics, start=1):
        points = panels[metric]
        for verdict in VERDICT_ORDER:
            for judged in (True, False):
                chosen = [(at, p) for at, p in enumerate(points) if p.verdict == verdict and p.judged is judged]
                chosen = [(at, p) for at, p in chosen if p.difference is not None]
                if chosen:
                    key = (verdict, judged)
                    trace = _points_trace(chosen, verdict, judged, legend=key not in legend_shown, named=not dense)
                    figure.add_trace(trace, row=index, col=1)
                    legend_shown.add(key)
        undefined = [(at, p) for at, p in enumerate(points) if p.difference is None]
        if undefined:
            figure.add_trace(_undefined_trace(undefined), row=index, col=1)
        _band(figure, index, tolerance)
        figure.update_yaxes(
            tickmode="array",
            tickvals=list(range(len(points))),
            ticktext=[plain(shorten(point.label, LABEL_CHARS)) for point in points],
            range=[len(points) - 0.5, -0.75],  # reversed: the first comparison on top
            tickfont={"size": 10 if dense else 13},
            automargin=True,
            showgrid=False,
            zeroline=False,
            fixedrange=True,
            row=index,
            col=1,
        )
        figure.update_xaxes(
            range=[-span, span],
            showticklabels=True,
            gridcolor=palette.GRID,
            zeroline=False,
            tickformat="+.2f",
            row=index,
            col=1,
        )
    figure.update_xaxes(title_text="difference, group − reference (familywise interval)", row=len(metrics), col=1)
    height = plot_px + MARGIN_TOP_PX + MARGIN_BOTTOM_PX
    figure.update_layout(
        palette.base_layout(
            height=height,
            margin={"l": 60, "r": 30, "t": MARGIN_TOP_PX, "b": MARGIN_BOTTOM_PX},
            showlegend=True,
            legend={"orientation": "h", "x": 0, "y": -(MARGIN_BOTTOM_PX - 20) / plot_px, "yanchor": "top"},
            hoverlabel={"align": "left"},
        )
    )
    # The subplot titles (annotations) sit left, in the ink colour.
    for annotation in figure.layout.annotations:
        annotation.update(x=0, xanchor="left", font={"size": 13, "color": palette.INK})
    figure.add_annotation(
        text="Against the reference: " + plain("; ".join(references(attributes))),
        x=0,
        y=1,
        xref="paper",
        yref="paper",
        yshift=MARGIN_TOP_PX - 24,
        xanchor="left",
        yanchor="bottom",
        showarrow=False,
        font={"size": 12, "color": palette.MUTED},
    )
    figure.add_annotation(
        text=f"tolerance ±{tolerance:g}",
        x=tolerance,
        y=1,
        xref="x",
        yref="y domain",
        xanchor="left",
        yanchor="bottom",
        showarrow=False,
        font={"size": 11, "color": palette.TOLERANCE_LINE},
    )
    return figure


def audit_forest_plot(document: Mapping[str, Any]) -> go.Figure | None:
    """The forest plot of a prediction audit's stored document (docs/audit-json.md)."""
    return forest_plot(document.get("attributes", {}), tolerance=presentation.document_tolerance(document))


def verdict_document_forest_plot(document: Mapping[str, Any]) -> go.Figure | None:
    """The forest plot of a frozen verdict document of either kind (docs/verdict-documents.md), at the
    tolerance of the policy it was judged under."""
    return forest_plot(document_attributes(document), tolerance=document["policy"]["tolerance"])


def _points_trace(
    chosen: list[tuple[int, ForestPoint]], verdict: str, judged: bool, *, legend: bool, named: bool
) -> go.Scatter:
    import plotly.graph_objects as go

    colour = palette.verdict_colour(verdict)
    symbol = palette.VERDICT_SYMBOLS[verdict] + ("" if judged else "-open")
    label = palette.VERDICT_LABELS[verdict]
    points = [point for _, point in chosen]
    return go.Scatter(
        x=[point.difference for point in points],
        y=[at for at, _ in chosen],
        mode="markers+text" if named else "markers",
        name=label if judged else f"{label} (not judged)",
        legendgroup=f"{verdict}-{judged}",
        showlegend=legend,
        marker={"color": colour, "symbol": symbol, "size": 10 if named else 7, "line": {"color": colour, "width": 2}},
        error_x={
            "type": "data",
            "symmetric": False,
            "array": [_bound(point.high, point.difference) for point in points],
            "arrayminus": [_bound(point.difference, point.low) for point in points],
            "color": colour,
            "thickness": 2,
            "width": 5,
        },
        text=[label] * len(points),
        textposition="top center",
        textfont={"color": colour, "size": 11},
        hovertext=[point.hover for point in points],
        hoverinfo="text",
        opacity=1.0 if judged else 0.6,
        customdata=[_key(point) for point in points],
    )


def _undefined_trace(chosen: list[tuple[int, ForestPoint]]) -> go.Scatter:
    import plotly.graph_objects as go

    return go.Scatter(
        x=[0.0] * len(chosen),
        y=[at for at, _ in chosen],
        mode="text",
        name="undefined",
        showlegend=False,
        text=["undefined: a rate has no denominator"] * len(chosen),
        textfont={"color": palette.MUTED, "size": 11},
        hovertext=[point.hover for _, point in chosen],
        hoverinfo="text",
        customdata=[_key(point) for _, point in chosen],
    )


def _key(point: ForestPoint) -> list[str]:
    """The comparison's key in the document (attribute, group, metric): data for clicks and tests,
    which no template of the plot shows."""
    return [point.attribute, point.group, point.metric]


def _band(figure: go.Figure, row: int, tolerance: float) -> None:
    """The ±tolerance band, its edges and the zero line, across the whole panel."""
    suffix = "" if row == 1 else str(row)
    common = {"xref": f"x{suffix}", "yref": f"y{suffix} domain", "y0": 0, "y1": 1, "layer": "below"}
    figure.add_shape(
        type="rect", x0=-tolerance, x1=tolerance, fillcolor=palette.TOLERANCE_FILL, line={"width": 0}, **common
    )
    for edge in (-tolerance, tolerance):
        figure.add_shape(
            type="line", x0=edge, x1=edge, line={"color": palette.TOLERANCE_LINE, "width": 1, "dash": "dash"}, **common
        )
    figure.add_shape(type="line", x0=0, x1=0, line={"color": palette.MUTED, "width": 1}, **common)


def _span(panels: Mapping[str, list[ForestPoint]], tolerance: float) -> float:
    """Half the x range, the same for every panel: every interval and the band, with a margin."""
    values = [value for points in panels.values() for p in points for value in (p.low, p.high, p.difference)]
    largest = max([abs(value) for value in values if value is not None] + [tolerance * 1.5, 0.02])
    return min(largest * 1.12, 1.05)


def _bound(outer: float | None, inner: float | None) -> float:
    if outer is None or inner is None:
        return 0.0
    return max(outer - inner, 0.0)


def _hover(label: str, reference: str, row: presentation.ComparisonRow) -> str:
    lines = [
        f"<b>{plain(label)}</b> vs {plain(reference)} (reference)",
        f"{plain(row.metric_title)}: {row.difference}",
        f"interval {row.interval} at {row.level} (familywise)",
        f"verdict {row.verdict}" + ("" if row.judged else " (not judged under the policy)"),
    ]
    if row.ratio != "—":
        lines.append(f"ratio {row.ratio} {row.ratio_interval}".rstrip())
    if row.positives_needed not in {"—", ""}:
        lines.append(f"positives needed: {row.positives_needed}")
    if row.note:
        lines.append(plain(row.note))
    return "<br>".join(lines)
