"""A figure as the JSON the page's plotly.js draws."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import plotly.graph_objects as go


def figure_json(figure: go.Figure | dict[str, Any]) -> dict[str, Any]:
    """``{"data": [...], "layout": {...}}`` with numpy arrays as lists and NaN as null.

    A figure written as that JSON already (the deployment page's, figures/monitoring.py) is returned
    as it is.

    plotly's own encoder does the conversion; the round trip through text gives plain Python
    values the JSON response and the canonical JSON of the evidence can take.
    """
    if isinstance(figure, dict):
        return figure
    from plotly.utils import PlotlyJSONEncoder

    parsed: dict[str, Any] = json.loads(json.dumps(figure.to_plotly_json(), cls=PlotlyJSONEncoder))
    return {"data": parsed.get("data", []), "layout": parsed.get("layout", {})}
