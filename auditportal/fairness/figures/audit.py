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
from auditportal.fairness.documents.verdict_documents import PAIRED_COMPARISON
from auditportal.fairness.figures import palette, printing, screen
from auditportal.fairness.figures.text import plain, shorten
from auditportal.fairness.statistics.stats import COMPARED, Verdict
from auditportal.fairness.text import presentation

if TYPE_CHECKING:
    import plotly.graph_objects as go

ROW_PX = 34  # height of one comparison's row, with the verdict's name written above its mark
# Beyond this many comparisons (a large intersection) rows are DENSE_ROW_PX high and the names are
# left to the legend and the hover: the marks keep their colour and shape.
DENSE_ABOVE = 150
DENSE_ROW_PX = 16
LABEL_CHARS = 48  # longer group labels are cut on the axis (the hover has them whole)

# On screens (``forest_plot``, the pages' figure), from the top: the legend, then above each panel its
# title and under the title the tolerance label, each in a band of its own; below each panel its x tick
# labels, and below the last one the axis title. Titles start at the figure's left edge, above the tick
# labels' column, so that a phone's narrow plot does not cut them.
LEGEND_PAD_PX = 6  # above the legend
LEGEND_LINE_PX = 22  # one line of the legend (12 px text)
TITLE_BAND_PX = 24  # a panel's title (13 px bold)
TOLERANCE_BAND_PX = 18  # the tolerance label (11 px), right above the panel
TICKS_BAND_PX = 28  # a panel's x tick labels
AXIS_TITLE_BAND_PX = 28  # the axis title, below the last panel's tick labels
PANEL_GAP_PX = TICKS_BAND_PX + TITLE_BAND_PX + TOLERANCE_BAND_PX  # between panels
MARGIN_BOTTOM_PX = TICKS_BAND_PX + AXIS_TITLE_BAND_PX
MARGIN_RIGHT_PX = 20  # half the widest x tick label ("+0.50"), centred on the plot's right edge
TITLE_INSET_PX = 2  # from the figure's left edge to the titles
LABEL_PAD_PX = 8  # between the tick labels' column and the figure's left edge and the axis
LEGEND_FONT_PX = 12
# Tick labels (font size, characters a line, lines) in a wide figure and in a narrow one (below
# screen.NARROW_BELOW_PX, about 120 px of labels beside about 170 px of plot on a phone); dense rows
# (16 px) hold one line, which a narrow figure cuts in the middle ("group: group-w…name-07").
WIDE_TICKS = (13, LABEL_CHARS, 1)
NARROW_TICKS = (11, 18, 2)
DENSE_TICKS = (10, LABEL_CHARS, 1)
NARROW_DENSE_TICKS = (10, 22, 1)
NARROW_METRIC_CHARS = 24  # a metric's short name in a narrow figure's titles (a metric we do not know)
AXIS_TITLE = "difference, group − reference"
NARROW_AXIS_TITLE = "group − reference"
WIDE_TICK_FORMAT = "+.2f"
NARROW_TICK_FORMAT = "+.2~f"  # trailing zeros dropped

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
    nothing was compared. Laid out for a wide box; ``layout.meta`` holds its narrow layout
    (``screen.narrow_meta``: shorter, wrapped tick labels and so a narrower left margin, short titles
    and axis title). The reference groups are the page's caption (:func:`references`), where they
    wrap."""
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
    )
    span = _span(panels, tolerance)
    legend_shown: set[tuple[str, bool]] = set()
    _add_shapes(figure, [shape for row in range(1, len(metrics) + 1) for shape in _band(row, tolerance)])
    for index, metric in enumerate(metrics, start=1):
        points = panels[metric]
        _add_points(figure, points, legend_shown, named=not dense, row=index)
        figure.update_yaxes(
            tickmode="array",
            tickvals=list(range(len(points))),
            range=[len(points) - 0.5, -0.75],  # reversed: the first comparison on top
            automargin=False,  # the left margin is laid out from the labels (_screen_layout)
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
            tickformat=WIDE_TICK_FORMAT,
            row=index,
            col=1,
        )
    figure.update_xaxes(
        title={"text": AXIS_TITLE, "standoff": 6, "font": {"size": 12}}, automargin=False, row=len(metrics), col=1
    )
    annotations: list[dict[str, Any]] = []
    for index in range(1, len(metrics) + 1):
        # The panel's title (annotations 0 to n - 1), its text and left edge set by the layout below.
        suffix = "" if index == 1 else str(index)
        annotations.append(
            {
                "text": "",
                "x": 0,
                "y": 1,
                "xref": "paper",
                "yref": f"y{suffix} domain",
                "xanchor": "left",
                "yanchor": "bottom",
                "yshift": TOLERANCE_BAND_PX,
                "showarrow": False,
                # Bold by the font's weight: a <b> would be drawn with a style attribute, which the
                # pages' Content-Security-Policy refuses.
                "font": {"size": 13, "color": palette.INK, "weight": "bold"},
            }
        )
    for index in range(1, len(metrics) + 1):
        # The tolerance label (annotations n to 2n - 1): over the band's middle, in its own band
        # between the panel's title and the plot.
        suffix = "" if index == 1 else str(index)
        annotations.append(
            {
                "text": f"tolerance ±{tolerance:g}",
                "x": 0,
                "y": 1,
                "xref": f"x{suffix}",
                "yref": f"y{suffix} domain",
                "xanchor": "center",
                "yanchor": "bottom",
                "yshift": 2,
                "showarrow": False,
                "font": {"size": 11, "color": palette.TOLERANCE_LINE},
            }
        )
    # At once, as the shapes (add_annotation validates every annotation again at each call).
    figure.layout.annotations += tuple(annotations)
    # The legend: one entry a line at the figure's top left, in the band the top margin keeps for it
    # (a row of entries would wrap at the plot's width, which differs from box to box).
    entries = sum(1 for trace in figure.data if trace.showlegend)
    top_px = LEGEND_PAD_PX + LEGEND_LINE_PX * entries + TITLE_BAND_PX + TOLERANCE_BAND_PX
    wide = _screen_layout(panels, dense=dense, narrow=False)
    narrow = _screen_layout(panels, dense=dense, narrow=True)
    figure.update_layout(
        palette.base_layout(
            height=top_px + plot_px + MARGIN_BOTTOM_PX,
            margin={"l": wide["margin.l"], "r": MARGIN_RIGHT_PX, "t": top_px, "b": MARGIN_BOTTOM_PX},
            showlegend=True,
            # In the figure's coordinates, not moving the margins (a legend placed against the plot
            # would).
            legend={
                "orientation": "v",
                "xref": "container",
                "x": 0,
                "xanchor": "left",
                "yref": "container",
                "y": 1,
                "yanchor": "top",
                "tracegroupgap": 0,
                "font": {"size": LEGEND_FONT_PX},
            },
            hoverlabel={"align": "left"},
            meta=screen.narrow_meta(narrow, wide),
        )
    )
    figure.plotly_relayout(wide)
    return figure


def _screen_layout(panels: Mapping[str, list[ForestPoint]], *, dense: bool, narrow: bool) -> dict[str, Any]:
    """What differs between a wide forest plot and a narrow one, as ``Plotly.relayout`` attributes:
    the tick labels (their size, wrapped or cut), the left margin they need, the x tick labels' format,
    the axis title, and the panels' titles and where they start. The height is the same in both."""
    if narrow:
        font_px, chars, lines = NARROW_DENSE_TICKS if dense else NARROW_TICKS
    else:
        font_px, chars, lines = DENSE_TICKS if dense else WIDE_TICKS
    layout: dict[str, Any] = {}
    widest = 1
    for index, points in enumerate(panels.values(), start=1):
        if lines == 1 and narrow:
            labels = [[screen.shorten_middle(point.label, chars)] for point in points]
        elif lines == 1:
            labels = [[shorten(point.label, chars)] for point in points]
        else:
            labels = [_wrapped_label(point.label, chars, lines) for point in points]
        widest = max(widest, *(len(line) for label in labels for line in label))
        suffix = "" if index == 1 else str(index)
        layout[f"yaxis{suffix}.ticktext"] = ["<br>".join(plain(line) for line in label) for label in labels]
        layout[f"yaxis{suffix}.tickfont.size"] = font_px
        # Narrow: "+0.5" rather than "+0.50", so that a phone's plot has room for three x tick labels.
        layout[f"xaxis{suffix}.tickformat"] = NARROW_TICK_FORMAT if narrow else WIDE_TICK_FORMAT
    last = "" if len(panels) == 1 else str(len(panels))
    layout[f"xaxis{last}.title.text"] = NARROW_AXIS_TITLE if narrow else AXIS_TITLE
    margin_left = screen.text_px(widest, font_px) + 2 * LABEL_PAD_PX
    for index, (metric, points) in enumerate(panels.items()):
        layout[f"annotations[{index}].text"] = _screen_title(metric, len(points), narrow=narrow)
        layout[f"annotations[{index}].xshift"] = TITLE_INSET_PX - margin_left
    layout["margin.l"] = margin_left
    return layout


def _wrapped_label(label: str, chars: int, lines: int) -> list[str]:
    """A tick label in at most ``lines`` lines of ``chars`` characters: whole where it fits; the
    attribute on the first line and the group on the others where the group fits them whole
    ("gender & race:" / "female · b"); else wrapped at spaces and cut."""
    attribute, colon, group = label.partition(": ")
    if colon and len(label) > chars and lines > 1:
        group_lines = screen.wrap(group, chars, lines - 1)
        if " ".join(group_lines) == " ".join(group.split()):
            return [*screen.wrap(attribute + ":", chars, 1), *group_lines]
    return screen.wrap(label, chars, lines)


def _screen_title(metric: str, count: int, *, narrow: bool) -> str:
    """A panel's title: "TPR (equal opportunity): 16 comparisons", and in a narrow figure
    "TPR: 16 comparisons" (the page's caption says what the short names are)."""
    if narrow:
        name = shorten(presentation.SHORT_LABELS.get(metric, metric), NARROW_METRIC_CHARS)
    else:
        name = presentation.METRIC_LABELS.get(metric, metric)
    return f"{plain(name)}: {count} comparison{'' if count == 1 else 's'}"


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
    _add_shapes(figure, _band(1, tolerance))
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
    tolerance of the policy it was judged under; a paired comparison's is its paired differences'
    (fairness/figures/paired.py)."""
    if document.get("kind") == PAIRED_COMPARISON:
        from auditportal.fairness.figures.paired import paired_forest_plot

        return paired_forest_plot(document.get("comparison") or {})
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


def _band(row: int, tolerance: float) -> list[dict[str, Any]]:
    """The ±tolerance band, its edges and the zero line, across the whole panel ``row``: its shapes."""
    suffix = "" if row == 1 else str(row)
    common = {"xref": f"x{suffix}", "yref": f"y{suffix} domain", "y0": 0, "y1": 1, "layer": "below"}
    return [
        {"type": "rect", "x0": -tolerance, "x1": tolerance, "fillcolor": palette.TOLERANCE_FILL, "line": {"width": 0}}
        | common,
        *(
            {
                "type": "line",
                "x0": edge,
                "x1": edge,
                "line": {"color": palette.TOLERANCE_LINE, "width": 1, "dash": "dash"},
            }
            | common
            for edge in (-tolerance, tolerance)
        ),
        {"type": "line", "x0": 0, "x1": 0, "line": {"color": palette.MUTED, "width": 1}} | common,
    ]


def _add_shapes(figure: go.Figure, shapes: list[dict[str, Any]]) -> None:
    """``figure.add_shape`` of each of ``shapes`` in turn (their references given), in one step: plotly
    validates all of the layout's shapes again at each add_shape, so one by one costs the square of
    their number (four a panel, a forest plot of five panels twenty)."""
    figure.layout.shapes += tuple(shapes)


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
        f"{plain(label)} vs {plain(reference)} (reference)",
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
