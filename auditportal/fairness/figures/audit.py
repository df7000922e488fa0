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
from auditportal.fairness.figures import palette, printing
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

# On paper (``forest_plot_panels``; sizes and limits in fairness/figures/printing.py): the panel's title
# at the figure's top left, the tolerance label right above the plot, the x tick labels and axis title
# below it, and the legend below those, each in a band of its own, so none is drawn over another.
PRINT_TITLE_PAD_PX = 8  # above the title
PRINT_LINE_PX = 20  # the title's line (13 px bold text)
PRINT_TOLERANCE_BAND_PX = 24  # the tolerance label's band between the title block and the plot
PRINT_AXIS_TITLE_STANDOFF_PX = 10
PRINT_LEGEND_OFFSET_PX = 62  # from the plot's bottom to the legend's top: below the ticks and the axis title
PRINT_LEGEND_LINE_PX = 24
PRINT_LEGEND_PAD_PX = 10
# Up to three legend entries (Fail, Inconclusive, Pass) take one line the figure's width; more (the
# "(not judged)" ones) two.
PRINT_LEGEND_ONE_LINE = 3


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
        _add_points(figure, points, legend_shown, named=not dense, row=index)
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


@dataclass(frozen=True)
class ForestPanel:
    """One printed panel of a forest plot: comparisons ``first`` to ``last`` (counted from 1) of the
    ``total`` of one metric, as a figure of its own at its full height (``figure.layout.height``)."""

    metric: str
    first: int
    last: int
    total: int
    # The reference group of each attribute in the panel, as "gender = male" (plain text: the report
    # writes them in the caption, where they wrap, rather than in the figure).
    references: tuple[str, ...]
    figure: go.Figure

    @property
    def rows(self) -> int:
        return self.last - self.first + 1

    @property
    def title(self) -> str:
        """The panel as the report names it, e.g. "TPR (equal opportunity), comparisons 1–20 of 45"."""
        return _panel_title(self.metric, self.first, self.last, self.total)


def _panel_title(metric: str, first: int, last: int, total: int) -> str:
    label = presentation.METRIC_LABELS.get(metric, metric)
    if last - first + 1 == total:
        return f"{label}, {total} comparison{'' if total == 1 else 's'}"
    if first == last:
        return f"{label}, comparison {first} of {total}"
    return f"{label}, comparisons {first}–{last} of {total}"


def forest_plot_panels(
    attributes: Mapping[str, Any], *, tolerance: float, max_rows: int = printing.ROWS_PER_PANEL
) -> list[ForestPanel]:
    """The forest plot of ``attributes`` for paper: one metric per panel, at most ``max_rows``
    comparisons and ``printing.ATTRIBUTES_PER_PANEL`` attributes a panel (an attribute's comparisons
    kept in one panel where they fit), each panel a figure whose rows are ``printing.ROW_PX`` high, with
    no text under ``printing.MIN_FONT_PX``. Every panel has the same x range. Empty when nothing was
    compared. The page's figure is ``forest_plot``."""
    points = forest_points(attributes)
    span = _span(points, tolerance)
    reference_list = list(zip(_reference_attributes(attributes), references(attributes), strict=True))
    panels: list[ForestPanel] = []
    for metric, metric_points in points.items():
        first = 1
        for chunk in printing.panels(metric_points, block=lambda point: point.attribute, max_rows=max_rows):
            last, total = first + len(chunk) - 1, len(metric_points)
            title = _panel_title(metric, first, last, total)
            figure = _print_figure(chunk, title=title, tolerance=tolerance, span=span)
            shown = {point.attribute for point in chunk}
            panels.append(
                ForestPanel(
                    metric=metric,
                    first=first,
                    last=last,
                    total=total,
                    references=tuple(reference for name, reference in reference_list if name in shown),
                    figure=figure,
                )
            )
            first = last + 1
    return panels


def _print_figure(points: list[ForestPoint], *, title: str, tolerance: float, span: float) -> go.Figure:
    import plotly.graph_objects as go

    figure = go.Figure()
    legend_shown: set[tuple[str, bool]] = set()
    _add_points(figure, points, legend_shown, named=True, text_px=printing.MIN_FONT_PX, printed=True)
    _band(figure, 1, tolerance)
    # The range [rows - 0.5, -0.75] spans rows + 0.25 rows: the extra quarter above the first row
    # holds its verdict name.
    plot_px = round((len(points) + 0.25) * printing.ROW_PX)
    top_px = PRINT_TITLE_PAD_PX + PRINT_LINE_PX + PRINT_TOLERANCE_BAND_PX
    entries = sum(1 for trace in figure.data if trace.showlegend)
    legend_lines = 1 if entries <= PRINT_LEGEND_ONE_LINE else 2
    bottom_px = PRINT_LEGEND_OFFSET_PX + PRINT_LEGEND_LINE_PX * legend_lines + PRINT_LEGEND_PAD_PX
    height = top_px + plot_px + bottom_px
    figure.update_yaxes(
        tickmode="array",
        tickvals=list(range(len(points))),
        ticktext=[plain(shorten(point.label, LABEL_CHARS)) for point in points],
        range=[len(points) - 0.5, -0.75],
        tickfont={"size": printing.TICK_FONT_PX},
        automargin=True,
        showgrid=False,
        zeroline=False,
        fixedrange=True,
    )
    figure.update_xaxes(
        range=[-span, span],
        gridcolor=palette.GRID,
        zeroline=False,
        tickformat="+.2f",
        tickfont={"size": printing.TICK_FONT_PX},
        title={
            "text": "difference, group − reference (familywise interval)",
            "standoff": PRINT_AXIS_TITLE_STANDOFF_PX,
            "font": {"size": printing.TICK_FONT_PX},
        },
        # The bottom margin is laid out below (ticks, axis title, legend): not grown over the plot.
        automargin=False,
        fixedrange=True,
    )
    figure.update_layout(
        palette.base_layout(
            height=height,
            font={"family": palette.FONT_FAMILY, "size": printing.TICK_FONT_PX, "color": palette.INK},
            margin={"l": 60, "r": 30, "t": top_px, "b": bottom_px},
            title={
                "text": f"<b>{plain(title)}</b>",
                "xref": "container",
                "x": 0,
                "xanchor": "left",
                "yref": "container",
                "y": 1,
                "yanchor": "top",
                "pad": {"l": 4, "t": PRINT_TITLE_PAD_PX},
                "font": {"size": printing.TICK_FONT_PX, "color": palette.INK},
            },
            showlegend=True,
            # In the figure's coordinates (both): placed where the bottom margin has room for it, the
            # whole width, and not moving the margins (a legend placed against the plot would).
            legend={
                "orientation": "h",
                "xref": "container",
                "x": 0,
                "yref": "container",
                "y": (bottom_px - PRINT_LEGEND_OFFSET_PX) / height,
                "yanchor": "top",
                "font": {"size": printing.TICK_FONT_PX},
            },
            hovermode=False,
        )
    )
    # Over the band's middle, in the band between the title block and the plot.
    figure.add_annotation(
        text=f"tolerance ±{tolerance:g}",
        x=0,
        y=1,
        xref="x",
        yref="y domain",
        xanchor="center",
        yanchor="bottom",
        yshift=3,
        showarrow=False,
        font={"size": printing.MIN_FONT_PX, "color": palette.TOLERANCE_LINE},
    )
    return figure


def _reference_attributes(attributes: Mapping[str, Any]) -> list[str]:
    """The attributes ``references`` names, in its order."""
    return [
        table.name
        for table in presentation.attribute_tables({"attributes": attributes})
        if table.reference_values is not None and table.comparisons
    ]


def audit_forest_plot(document: Mapping[str, Any]) -> go.Figure | None:
    """The forest plot of a prediction audit's stored document (docs/audit-json.md)."""
    return forest_plot(document.get("attributes", {}), tolerance=presentation.document_tolerance(document))


def verdict_document_forest_plot(document: Mapping[str, Any]) -> go.Figure | None:
    """The forest plot of a frozen verdict document of either kind (docs/verdict-documents.md), at the
    tolerance of the policy it was judged under."""
    return forest_plot(document_attributes(document), tolerance=document["policy"]["tolerance"])


def _add_points(
    figure: go.Figure,
    points: list[ForestPoint],
    legend_shown: set[tuple[str, bool]],
    *,
    named: bool,
    row: int | None = None,
    text_px: int = 11,
    printed: bool = False,
) -> None:
    """One trace per verdict and judged-or-not (its legend entry once per figure), and the undefined
    comparisons' words, at their rows (the points' indices) of panel ``row`` (None: a figure of one).
    ``printed``: on paper, the verdicts' names in the ink colour and nothing faded (a light orange word,
    or a faded one, is hard to read in print; the marks keep their colours, shapes and hollowness)."""
    where = {} if row is None else {"row": row, "col": 1}
    for verdict in VERDICT_ORDER:
        for judged in (True, False):
            chosen = [(at, p) for at, p in enumerate(points) if p.verdict == verdict and p.judged is judged]
            chosen = [(at, p) for at, p in chosen if p.difference is not None]
            if chosen:
                key = (verdict, judged)
                trace = _points_trace(
                    chosen,
                    verdict,
                    judged,
                    legend=key not in legend_shown,
                    named=named,
                    text_px=text_px,
                    printed=printed,
                )
                figure.add_trace(trace, **where)
                legend_shown.add(key)
    undefined = [(at, p) for at, p in enumerate(points) if p.difference is None]
    if undefined:
        figure.add_trace(_undefined_trace(undefined, text_px=text_px), **where)


def _points_trace(
    chosen: list[tuple[int, ForestPoint]],
    verdict: str,
    judged: bool,
    *,
    legend: bool,
    named: bool,
    text_px: int,
    printed: bool = False,
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
        textfont={"color": palette.INK if printed else colour, "size": text_px},
        hovertext=[point.hover for point in points],
        hoverinfo="text",
        opacity=1.0 if judged or printed else 0.6,
        customdata=[_key(point) for point in points],
    )


def _undefined_trace(chosen: list[tuple[int, ForestPoint]], *, text_px: int) -> go.Scatter:
    import plotly.graph_objects as go

    return go.Scatter(
        x=[0.0] * len(chosen),
        y=[at for at, _ in chosen],
        mode="text",
        name="undefined",
        showlegend=False,
        text=["undefined: a rate has no denominator"] * len(chosen),
        textfont={"color": palette.MUTED, "size": text_px},
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
