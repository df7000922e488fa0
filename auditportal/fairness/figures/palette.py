"""Colours every figure uses, chosen to stay distinguishable for colour-blind readers.

Series colours are the Okabe-Ito palette (Okabe & Ito, "Color Universal Design", 2008), which
stays distinct under protanopia, deuteranopia and tritanopia. Verdicts use three of its colours
that differ in lightness as well as hue, and every verdict mark also carries its name as text
(``VERDICT_LABELS``, ``VERDICT_SYMBOLS``), so colour is never the only cue.
"""

from __future__ import annotations

from typing import Any

from auditportal.fairness.statistics.stats import Verdict

# Okabe-Ito, without its black (kept for text and reference lines).
SERIES: tuple[str, ...] = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#D55E00",  # vermillion
    "#F0E442",  # yellow
)
INK = "#1f2430"
MUTED = "#6b7280"
GRID = "#e5e7eb"
# The tolerance band and the noise floor: light fills that do not compete with the series.
TOLERANCE_FILL = "rgba(0, 114, 178, 0.08)"
TOLERANCE_LINE = "#0072B2"
NOISE_FILL = "rgba(107, 114, 128, 0.18)"

VERDICT_COLOURS: dict[str, str] = {
    Verdict.PASS.value: "#009E73",
    Verdict.INCONCLUSIVE.value: "#E69F00",
    Verdict.FAIL.value: "#D55E00",
}
NO_VERDICT_COLOUR = MUTED
VERDICT_LABELS: dict[str, str] = {verdict.value: verdict.label for verdict in Verdict}
# Marker shapes, so verdicts differ in shape too (and in print).
VERDICT_SYMBOLS: dict[str, str] = {
    Verdict.PASS.value: "circle",
    Verdict.INCONCLUSIVE.value: "diamond",
    Verdict.FAIL.value: "x",
}
FONT_FAMILY = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif"


def series_colour(index: int) -> str:
    return SERIES[index % len(SERIES)]


def verdict_colour(verdict: str | None) -> str:
    return VERDICT_COLOURS.get(verdict or "", NO_VERDICT_COLOUR)


def base_layout(**overrides: Any) -> dict[str, Any]:
    """The layout every figure starts from: the portal's font, a white plot, quiet grid lines."""
    layout: dict[str, Any] = {
        "font": {"family": FONT_FAMILY, "size": 13, "color": INK},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "margin": {"l": 60, "r": 20, "t": 40, "b": 50},
        "colorway": list(SERIES),
        "hovermode": "closest",
        "legend": {"orientation": "h", "y": -0.2},
        "xaxis": {"gridcolor": GRID, "zerolinecolor": GRID},
        "yaxis": {"gridcolor": GRID, "zerolinecolor": MUTED},
    }
    layout.update(overrides)
    return layout
