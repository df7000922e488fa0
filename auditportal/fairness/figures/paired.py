"""The forest plot of a paired comparison: per metric, each group's difference challenger − champion
with its paired (Newcombe) familywise interval, against the tolerance band. The audit forest plot's
palette, band and shapes (fairness/figures/audit.py); every user string through ``text.plain``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from auditportal.fairness.figures import palette, printing
from auditportal.fairness.figures.text import plain, shorten
from auditportal.fairness.statistics import paired

if TYPE_CHECKING:
    import plotly.graph_objects as go

ROW_PX = 30
PANEL_GAP_PX = 70
LABEL_CHARS = 32
VERDICT_COLOURS = {
    paired.BETTER: "#009E73",
    paired.EQUIVALENT: "#0072B2",
    paired.DIFFERENT: "#CC79A7",
    paired.INCONCLUSIVE: "#E69F00",
    paired.WORSE: "#D55E00",
}
VERDICT_SYMBOLS = {
    paired.BETTER: "triangle-up",
    paired.EQUIVALENT: "circle",
    paired.DIFFERENT: "square",
    paired.INCONCLUSIVE: "diamond",
    paired.WORSE: "x",
}
BETTER_WORDS = {1: "higher is better", -1: "lower is better", 0: "no better side"}
AXIS_TITLE = "difference, challenger − champion"


def paired_forest_plot(
    document: Mapping[str, Any], *, row_px: int = ROW_PX, span: float | None = None
) -> go.Figure | None:
    """One panel per metric, one row per attribute's group; None when nothing was compared. ``row_px``:
    each row's height; ``span``: the x axis's half-width (by default from the intervals shown)."""
    from plotly.subplots import make_subplots

    attributes: Mapping[str, Any] = document.get("attributes", {})
    metrics = [m for m in document.get("metrics", []) if any(m in a["metrics"] for a in attributes.values())]
    rows = {
        metric: [
            (name, group, row)
            for name, section in attributes.items()
            for group, row in section["metrics"][metric]["groups"].items()
            if row["difference"] is not None
        ]
        for metric in metrics
    }
    metrics = [metric for metric in metrics if rows[metric]]
    if not metrics:
        return None
    tolerance = float(document["tolerance"])
    counts = [len(rows[metric]) for metric in metrics]
    plot_px = sum(counts) * row_px + PANEL_GAP_PX * (len(metrics) - 1)
    figure = make_subplots(
        rows=len(metrics),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=PANEL_GAP_PX / plot_px if len(metrics) > 1 else 0.0,
        row_heights=[count / sum(counts) for count in counts],
        subplot_titles=[f"{paired.METRIC_NAMES[m]} ({BETTER_WORDS[paired.DIRECTION[m]]})" for m in metrics],
    )
    if span is None:
        span = _span(tolerance, [r for m in metrics for _n, _g, r in rows[m]])
    shown: set[str] = set()
    for index, metric in enumerate(metrics, start=1):
        points = rows[metric]
        labels = [shorten(plain(f"{name}: {group}"), LABEL_CHARS) for name, group, _r in points]
        for verdict in paired.VERDICT_ORDER:
            chosen = [(i, r) for i, (_n, _g, r) in enumerate(points) if r["verdict"] == verdict]
            if not chosen:
                continue
            figure.add_scatter(
                x=[r["difference"] for _i, r in chosen],
                y=[i for i, _r in chosen],
                mode="markers",
                name=verdict.title(),
                legendgroup=verdict,
                showlegend=verdict not in shown,
                marker={"color": VERDICT_COLOURS[verdict], "symbol": VERDICT_SYMBOLS[verdict], "size": 11},
                error_x={
                    "type": "data",
                    "symmetric": False,
                    "array": [r["high"] - r["difference"] for _i, r in chosen],
                    "arrayminus": [r["difference"] - r["low"] for _i, r in chosen],
                    "color": VERDICT_COLOURS[verdict],
                    "thickness": 2,
                    "width": 4,
                },
                customdata=[
                    [
                        plain(f"{points[i][0]}: {points[i][1]}"),
                        r["champion"]["rate"],
                        r["challenger"]["rate"],
                        r["low"],
                        r["high"],
                        r["level"],
                    ]
                    for i, r in chosen
                ],
                hovertemplate="%{customdata[0]}<br>champion %{customdata[1]:.3f}, challenger %{customdata[2]:.3f}"
                "<br>B − A %{x:+.3f} [%{customdata[3]:+.3f}, %{customdata[4]:+.3f}] at %{customdata[5]:.4f}"
                f"<extra>{verdict.title()}</extra>",
                row=index,
                col=1,
            )
            shown.add(verdict)
        figure.add_vrect(
            x0=-tolerance,
            x1=tolerance,
            fillcolor=palette.TOLERANCE_FILL,
            line={"color": palette.TOLERANCE_LINE, "width": 1, "dash": "dot"},
            row=index,
            col=1,
        )
        figure.add_vline(x=0, line={"color": palette.MUTED, "width": 1}, row=index, col=1)
        figure.update_yaxes(
            tickmode="array",
            tickvals=list(range(len(points))),
            ticktext=labels,
            range=[len(points) - 0.5, -0.5],
            showgrid=False,
            zeroline=False,
            fixedrange=True,
            row=index,
            col=1,
        )
        figure.update_xaxes(
            range=[-span, span], showticklabels=True, gridcolor=palette.GRID, zeroline=False, tickformat="+.2f",
            row=index, col=1,
        )  # fmt: skip
    figure.update_xaxes(title={"text": AXIS_TITLE, "font": {"size": 12}}, row=len(metrics), col=1)
    figure.update_annotations(font={"size": 13, "color": palette.INK}, xanchor="left", x=0)
    figure.update_layout(
        palette.base_layout(
            height=plot_px + 170,
            margin={"l": 10, "r": 20, "t": 90, "b": 60},
            showlegend=True,
            legend={"orientation": "h", "x": 0, "y": 1, "yref": "container", "yanchor": "top"},
            hoverlabel={"align": "left"},
        )
    )
    figure.update_yaxes(automargin=True)
    return figure


def _span(tolerance: float, rows: list[Mapping[str, Any]]) -> float:
    span = max([tolerance * 2, 0.05] + [abs(float(v)) for r in rows for v in (r["low"], r["high"]) if v is not None])
    return min(1.0, span * 1.1)


@dataclass(frozen=True)
class PairedPanel:
    """One printed panel of a paired comparison's forest plot: one metric, at most
    ``printing.ROWS_PER_PANEL`` groups, the figure at its full height in pixels."""

    metric: str
    title: str
    figure: go.Figure
    height: int


def paired_forest_plot_panels(
    document: Mapping[str, Any], *, max_rows: int = printing.ROWS_PER_PANEL
) -> list[PairedPanel]:
    """The paired forest plot for paper (the signed report): one metric per panel, at most ``max_rows``
    groups each (an attribute's groups kept together where they fit), rows ``printing.ROW_PX`` high,
    every panel on the same x range. Empty when nothing was compared."""
    attributes: Mapping[str, Any] = document.get("attributes", {})
    tolerance = float(document["tolerance"])
    every = [
        row
        for section in attributes.values()
        for block in section["metrics"].values()
        for row in block["groups"].values()
        if row["difference"] is not None
    ]
    span = _span(tolerance, every)
    panels: list[PairedPanel] = []
    for metric in document.get("metrics", []):
        points = [
            (name, group)
            for name, section in attributes.items()
            if metric in section["metrics"]
            for group, row in section["metrics"][metric]["groups"].items()
            if row["difference"] is not None
        ]
        chunks = printing.panels(points, block=lambda point: point[0], max_rows=max_rows)
        for number, chunk in enumerate(chunks, start=1):
            chosen: dict[str, set[str]] = {}
            for name, group in chunk:
                chosen.setdefault(name, set()).add(group)
            part = {
                **document,
                "metrics": [metric],
                "attributes": {
                    name: {
                        **attributes[name],
                        "metrics": {
                            metric: {
                                **attributes[name]["metrics"][metric],
                                "groups": {
                                    group: row
                                    for group, row in attributes[name]["metrics"][metric]["groups"].items()
                                    if group in groups
                                },
                            }
                        },
                    }
                    for name, groups in chosen.items()
                },
            }
            figure = paired_forest_plot(part, row_px=printing.ROW_PX, span=span)
            if figure is None:
                continue
            title = paired.METRIC_NAMES[metric] + (f" ({number} of {len(chunks)})" if len(chunks) > 1 else "")
            panels.append(PairedPanel(metric=metric, title=title, figure=figure, height=int(figure.layout.height)))
    return panels
