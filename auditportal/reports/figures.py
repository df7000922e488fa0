"""Plotly figures as static SVG for the reports (docs/reports.md): WeasyPrint runs no JavaScript.

Plotly's static export drives a headless Chromium through kaleido (Debian's ``chromium``; set
``BROWSER_PATH`` for another). A cold export starts a browser per figure (seconds); the Celery worker
keeps one warm instead (``start_warm_export``, called when a worker process starts: about 1 GB, so
never in a web process), which exports a figure in a fraction of a second.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import warnings
from typing import Any

from auditportal.fairness.figures.audit import forest_plot
from auditportal.fairness.findings import document_attributes
from auditportal.fairness.report_context import Figure, ReportContext

logger = logging.getLogger(__name__)

# The report's text face first (static/fonts, known to WeasyPrint as "Report Sans"), then the same
# font under its own name for Chromium, which measures the text while laying the figure out.
FONT_FAMILY = '"Report Sans", "DejaVu Sans", sans-serif'

_warm = False


def start_warm_export() -> None:
    """Start the worker's warm Chromium for figure exports (once per process; later calls do nothing)."""
    global _warm
    if _warm:
        return
    import kaleido

    kaleido.start_sync_server(silence_warnings=True)
    _warm = True
    logger.info("kaleido: warm Chromium started for report figures")


def stop_warm_export() -> None:
    global _warm
    if not _warm:
        return
    import kaleido

    kaleido.stop_sync_server(silence_warnings=True)
    _warm = False


def figure_svg(figure: Any, *, width: int = 720, height: int = 360) -> str:
    """``figure`` (a plotly Figure) as SVG text, in the report's font; the figure itself is not changed."""
    drawn = copy.deepcopy(figure)
    drawn.update_layout(font_family=FONT_FAMILY, width=width, height=height)
    with warnings.catch_warnings():
        # With the warm server, plotly passes options the server ignores, and says so each time.
        warnings.filterwarnings("ignore", message="The kopts argument is ignored", category=UserWarning)
        data = drawn.to_image(format="svg")
    return bytes(data).decode()


def context_with_figures(context: ReportContext) -> ReportContext:
    """``context`` with the forest plot of each of its verdict documents added to its figures, as SVG
    (fairness/figures/audit.py, the dashboard's figure): call it in the worker, where Chromium is warm.
    The figures come from the documents' stored text only, so the report draws what the committee saw.
    """
    added: list[Figure] = []
    for document in context.documents:
        value = document.document
        plot = forest_plot(document_attributes(value), tolerance=context.policy.tolerance)
        if plot is None:
            continue
        added.append(
            Figure(
                title=f"Forest plot: {document.label}",
                svg=figure_svg(plot, height=_forest_height(plot)),
                caption=(
                    "Each comparison's difference from the reference group with its familywise interval, one "
                    f"panel per metric; the shaded band is the policy's tolerance (±{context.policy.tolerance:g}). "
                    f"Document SHA-256 {document.sha256}."
                ),
            )
        )
    return dataclasses.replace(context, figures=(*context.figures, *added))


def _forest_height(plot: Any) -> int:
    # The dashboard sizes the plot for its rows; keep that height, within a page.
    height = plot.layout.height
    return max(360, min(int(height), 900)) if height else 480
