"""The A/B test planner's figure: each group's power against the total predictions of both arms
(docs/planner.md), the target power as a dotted line and the plan's total as a dashed one; the group
that sets the size drawn thicker. Every group name goes through :func:`plain`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from auditportal.fairness.figures import palette
from auditportal.fairness.figures.text import plain, shorten
from auditportal.fairness.statistics.planning import Plan
from auditportal.fairness.text import numbers

if TYPE_CHECKING:
    import plotly.graph_objects as go

LABEL_CHARS = 32
HEIGHT_PX = 380


def power_curve_figure(plan: Plan) -> go.Figure:
    import plotly.graph_objects as go

    figure = go.Figure()
    totals = [point.total for point in plan.curve]
    for index, group in enumerate(plan.groups):
        name = plain(shorten(group.name, LABEL_CHARS))
        full = plain(group.name)
        figure.add_trace(
            go.Scatter(
                x=totals,
                y=[point.power[index] for point in plan.curve],
                mode="lines",
                name=f"{name} (sets the size)" if group.deciding else name,
                line={"color": palette.series_colour(index), "width": 4 if group.deciding else 2},
                hovertext=[
                    f"<b>{full}</b><br>{numbers.count(total)} predictions: power {numbers.percent(point.power[index])}"
                    for total, point in zip(totals, plan.curve, strict=True)
                ],
                hoverinfo="text",
            )
        )
    figure.add_shape(
        type="line",
        xref="paper",
        x0=0,
        x1=1,
        y0=plan.power,
        y1=plan.power,
        line={"color": palette.INK, "width": 1, "dash": "dot"},
    )
    figure.add_shape(
        type="line",
        yref="paper",
        x0=plan.total,
        x1=plan.total,
        y0=0,
        y1=1,
        line={"color": palette.INK, "width": 1, "dash": "dash"},
    )
    figure.add_annotation(
        x=plan.total,
        y=0.02,
        yref="y",
        text=f"plan: {numbers.count(plan.total)}",
        showarrow=False,
        xanchor="left",
        xshift=4,
        font={"size": 11, "color": palette.INK},
    )
    figure.update_xaxes(
        title={"text": "predictions in both arms", "font": {"size": 12}},
        rangemode="tozero",
        gridcolor=palette.GRID,
        fixedrange=True,
    )
    figure.update_yaxes(
        title={"text": f"power (dotted: {numbers.percent(plan.power)})", "font": {"size": 12}},
        range=[0, 1.02],
        tickformat=".0%",
        gridcolor=palette.GRID,
        fixedrange=True,
    )
    figure.update_layout(
        palette.base_layout(
            height=HEIGHT_PX + 24 * ((len(plan.groups) + 1) // 2),
            margin={"l": 64, "r": 20, "t": 20, "b": 60},
            legend={"orientation": "h", "y": -0.22, "yanchor": "top", "x": 0, "xanchor": "left"},
            showlegend=True,
        )
    )
    return figure
