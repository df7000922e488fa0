"""Plotly figures as static SVG for the reports (docs/reports.md): WeasyPrint runs no JavaScript.

Plotly's static export drives a headless Chromium through kaleido: Debian's ``chromium-headless-shell``
where installed, else ``chromium`` (kaleido finds it); set ``BROWSER_PATH`` for another. A cold export
starts a browser for each call (seconds: one for all of a call's figures, closed after it); the Celery
worker keeps one warm instead (``keep_warm_export``, called when a worker process starts; the browser
starts with the process's first export, about 1 GB, so never in a web process nor in a worker that
draws nothing), which draws a report's figures in a fraction of a second each.
"""

from __future__ import annotations

import asyncio
import atexit
import copy
import dataclasses
import logging
import os
import re
import threading
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from auditportal.fairness.documents.findings import document_attributes
from auditportal.fairness.documents.report_context import (
    AttributionEvidence,
    EvidenceDocument,
    ExperimentTrials,
    Figure,
    ReportContext,
)
from auditportal.fairness.documents.verdict_documents import PAIRED_COMPARISON
from auditportal.fairness.figures import experiment as experiment_figures
from auditportal.fairness.figures import palette, printing
from auditportal.fairness.figures.attributions import attribution_panels
from auditportal.fairness.figures.audit import forest_plot_panels
from auditportal.fairness.figures.paired import paired_forest_plot_panels

logger = logging.getLogger(__name__)

# The report's text face first (static/fonts, known to WeasyPrint as "Report Sans"), then the same
# font under its own name for Chromium, which measures the text while laying the figure out.
FONT_FAMILY = '"Report Sans", "DejaVu Sans", sans-serif'
WIDTH = 720
# On paper (docs/reports.md, "Figures on paper"): a figure is printed WIDTH pixels wide across the
# page's text width, A4's 210 mm less the two 16 mm margins of static/css/report-pdf.css, so a pixel
# is 0.247 mm. A row of a long figure (fairness/figures/printing.ROW_PX) is then at least MIN_ROW_MM
# high and no text (printing.MIN_FONT_PX, which every figure's fonts are raised to) under MIN_FONT_PT;
# no figure is taller than MAX_HEIGHT_MM, so one fits a page (257 mm of text height) with its caption.
# tests/reports/test_print_figures.py checks these in the figures and in the rendered PDF.
PRINT_WIDTH_MM = 178.0
MM_PER_PX = PRINT_WIDTH_MM / WIDTH
PT_PER_MM = 72 / 25.4
MIN_ROW_MM = 7.0
MIN_FONT_PT = 8.0
MAX_HEIGHT_MM = 225.0
TICK_LABEL_STANDOFF_PX = 6
# The recall figure on paper: its title above the plot, its x axis and its legend (an entry per
# attribute, two lines at most) below.
RECALL_MARGIN_TOP_PX = 44
RECALL_LEGEND_OFFSET_PX = 56
RECALL_MARGIN_BOTTOM_PX = 116
# Seconds one figure may take in Chromium (kaleido's own default).
TIMEOUT = 90
# The lines of the trials not under review on the report's EOD timeline.
OTHER_TRIALS = "rgba(107, 114, 128, 0.55)"
# The page Chromium draws in may load its own scripts (plotly.js and kaleido's, files on this machine),
# take inline styles (plotly.js writes its own) and show data: and blob: images (the export itself);
# nothing else: no http(s), no other file, whatever a figure's text, image or style asks for.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src file: 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:; connect-src 'none'; form-action 'none'; base-uri 'none'"
)
# Anything that would still leave for a network goes to a proxy nobody runs (the discard port of the
# loopback, refused where nothing listens), not to its host: the policy above is the refusal, this
# is the second wall (Chromium sends loopback addresses past any proxy, the policy refuses those).
DEAD_PROXY = "http://127.0.0.1:9"

T = TypeVar("T")


def px_to_mm(px: float) -> float:
    """A length in a figure's pixels as printed in the report, in millimetres."""
    return px * MM_PER_PX


def px_to_pt(px: float) -> float:
    """A figure's font size in pixels as printed in the report, in points."""
    return px * MM_PER_PX * PT_PER_MM


# Debian's chromium-headless-shell (built from the same chromium sources as Debian's chromium, at the
# same version): Chromium's headless shell, without the desktop browser around the page. The same
# figures' SVG for about 56% of the CPU (tests/reports/test_figures.py and test_figure_network.py:
# Chromium's processes took 14.0 s against 25.0 s with chromium, back to back) and no GTK, CUPS or
# cairo to install.
HEADLESS_SHELL = Path("/usr/lib/chromium/chromium-headless-shell")


def figure_browser() -> str | None:
    """The Chromium kaleido starts, when it is not kaleido's own choice: None where ``BROWSER_PATH``
    names one (kaleido reads it) or where the headless shell is not installed (kaleido finds chromium)."""
    if os.environ.get("BROWSER_PATH") or not HEADLESS_SHELL.exists():
        return None
    return str(HEADLESS_SHELL)


def kaleido_options() -> dict[str, Any]:
    """kaleido's options for every export, cold and warm: the page of ``_LockedPage`` (without
    MathJax, which kaleido would otherwise load from a CDN at every (re)load; no figure here uses
    LaTeX), the dead proxy, and the browser (``figure_browser``)."""
    options: dict[str, Any] = {"page_generator": _locked_page(), "proxy_server": DEAD_PROXY}
    browser = figure_browser()
    if browser is not None:
        options["path"] = browser
    return options


def _locked_page() -> Any:
    from kaleido import PageGenerator

    class _LockedPage(PageGenerator):  # type: ignore[misc]
        """kaleido's page with the content security policy first in its head, before any script."""

        header = PageGenerator.header.replace(
            "<head>",
            f'<head>\n        <meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">',
            1,
        )

    return _LockedPage(mathjax=False)


@dataclass(frozen=True)
class Drawing:
    """A plotly figure to export, at its size in CSS pixels."""

    figure: Any
    height: int
    width: int = WIDTH


class _WarmChromium:
    """One Chromium (a kaleido.Kaleido with one tab) kept open in a thread of its own, with its event loop.

    kaleido's public sync server reloads its page (plotly.js, about 4 MB of script) after every figure,
    which costs as much as drawing one; here the figures of one report are drawn one after the other in
    the tab and the page is reloaded once, after the last, while the report is laid out (kaleido 1.5's
    tab API, pinned in requirements.lock; tests/reports/test_figures.py draws through it).
    """

    def __init__(self) -> None:
        import kaleido

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="report-figures", daemon=True)
        self._thread.start()
        self._kaleido = kaleido.Kaleido(n=1, **kaleido_options())
        self._reloads: set[asyncio.Task[None]] = set()
        try:
            self._run(self._kaleido.__aenter__())
        except BaseException:
            self._stop_loop()
            raise

    def _run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def svgs(self, specs: Sequence[dict[str, Any]]) -> list[bytes]:
        return self._run(self._draw(specs))

    async def _draw(self, specs: Sequence[dict[str, Any]]) -> list[bytes]:
        from kaleido._profiler import RenderTaskProfile
        from kaleido._utils import fig_tools

        tab = await self._kaleido._get_kaleido_tab()
        try:
            drawn = []
            for spec in specs:
                js_spec = fig_tools.coerce_for_js(spec, None, _options(spec))
                profile = RenderTaskProfile(js_spec, None, tab.tab.target_id)
                drawn.append(
                    await asyncio.wait_for(
                        tab._calc_fig(js_spec, topojson=None, render_prof=profile, stepper=False), TIMEOUT
                    )
                )
            return drawn
        finally:
            # The page reloads (clean for the next report) while the report is laid out: the tab is
            # back in kaleido's queue, where the next export waits for it, once the reload is done.
            reload = asyncio.get_running_loop().create_task(self._kaleido._return_kaleido_tab(tab))
            self._reloads.add(reload)
            reload.add_done_callback(self._reloads.discard)

    def close(self) -> None:
        try:
            self._run(self._close(), timeout=TIMEOUT)
        finally:
            self._stop_loop()

    async def _close(self) -> None:
        await asyncio.gather(*self._reloads, return_exceptions=True)
        await self._kaleido.__aexit__(None, None, None)

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=TIMEOUT)
        if not self._thread.is_alive():
            self._loop.close()


_warm: _WarmChromium | None = None
_warm_lock = threading.Lock()
_stop_at_exit = False
_keep_warm = False


def keep_warm_export() -> None:
    """This process keeps a warm Chromium for its figure exports, started by the first of them (a worker
    process: one that never draws a figure never starts a browser)."""
    global _keep_warm
    _keep_warm = True


def start_warm_export() -> None:
    """Start the worker's warm Chromium for figure exports (once per process; later calls do nothing)."""
    global _warm, _stop_at_exit
    with _warm_lock:
        if _warm is not None:
            return
        _warm = _WarmChromium()
        if not _stop_at_exit:
            atexit.register(stop_warm_export)
            _stop_at_exit = True
    logger.info("kaleido: warm Chromium started for report figures")


def stop_warm_export() -> None:
    global _warm
    with _warm_lock:
        warm, _warm = _warm, None
    if warm is not None:
        warm.close()


def _start_kept_warm() -> None:
    global _keep_warm
    try:
        start_warm_export()
    except Exception:  # no Chromium here: figures fall back to a cold export, reports still render
        _keep_warm = False  # tried once, as the worker's start did
        logger.exception("kaleido: could not start a warm Chromium for report figures")


def figures_svg(drawings: Sequence[Drawing]) -> list[str]:
    """Each of ``drawings`` as SVG text, in the report's font with no text under
    ``printing.MIN_FONT_PX``, in order; the figures are not changed.

    With the warm Chromium, all of them in one go; without, kaleido's cold export: one browser for one
    figure, one browser started for the call and closed after it for several (about 2 s, not 2 s each).
    A figure is a plotly figure or the JSON dict plotly.js draws (fairness/figures/monitoring.py's).
    """
    specs = []
    for drawing in drawings:
        # The figure's dict (a copy), straight to kaleido: plotly's to_image would deep-copy the figure
        # object and validate it again, a tenth of a second per figure.
        figure = drawing.figure
        spec = printing.raise_fonts(copy.deepcopy(figure) if isinstance(figure, dict) else figure.to_dict())
        layout = spec["layout"]
        for name, axis in list(layout.items()):
            if re.fullmatch(r"yaxis\d*", name) and isinstance(axis, dict):
                # The y tick labels a little apart from the axis: the lowest one and the first x tick
                # label would otherwise touch in the plot's corner.
                axis.setdefault("ticklabelstandoff", TICK_LABEL_STANDOFF_PX)
        layout["font"] = {**layout.get("font", {}), "family": FONT_FAMILY}
        layout.update(width=drawing.width, height=drawing.height)
        specs.append(spec)
    warm = _warm
    if warm is None and _keep_warm and specs:
        _start_kept_warm()
        warm = _warm
    if warm is not None:
        drawn = warm.svgs(specs)
    elif len(specs) > 1:
        session = _WarmChromium()
        try:
            drawn = session.svgs(specs)
        finally:
            session.close()
    else:
        import kaleido

        drawn = [bytes(kaleido.calc_fig_sync(spec, opts=_options(spec), kopts=kaleido_options())) for spec in specs]
    return [data.decode() for data in drawn]


def figure_svg(figure: Any, *, width: int = WIDTH, height: int = 360) -> str:
    """One plotly figure as SVG text (``figures_svg``)."""
    return figures_svg([Drawing(figure=figure, width=width, height=height)])[0]


def _options(spec: dict[str, Any]) -> dict[str, Any]:
    return {"format": "svg", "width": spec["layout"]["width"], "height": spec["layout"]["height"]}


def context_with_figures(context: ReportContext) -> ReportContext:
    """``context`` with the dashboard's figures added, as SVG: call it in the worker, where Chromium is
    warm. For each verdict document, its forest plot (fairness/figures/audit.py) and its recall per
    group with intervals, or for a paired comparison's its forest plot of paired differences
    (fairness/figures/paired.py); for a trial report, the EOD timeline of every trial of the experiment and
    accuracy against eod (fairness/figures/experiment.py). They are drawn from the context alone (the
    documents' stored text, the trials as recorded at the decision), so the report shows what the
    committee saw.
    """
    planned: list[tuple[Drawing, str, str]] = []  # the figure, its title and caption
    tolerance = context.policy.tolerance
    for document in context.documents:
        value = document.document
        if value.get("kind") == PAIRED_COMPARISON:
            planned += _paired_drawings(document)
            continue
        attributes = document_attributes(value)
        # Paginated for paper: one metric per panel, at most printing.ROWS_PER_PANEL comparisons each,
        # every panel at its full height.
        for panel in forest_plot_panels(attributes, tolerance=tolerance):
            planned.append(
                (
                    Drawing(panel.figure, height=int(panel.figure.layout.height)),
                    f"Forest plot, {panel.title}: {document.label}",
                    f"Against the reference: {'; '.join(panel.references)}. Each comparison's difference from "
                    "the reference group with its familywise interval; the shaded band is the policy's "
                    f"tolerance (±{tolerance:g}). Document SHA-256 {document.sha256}.",
                )
            )
        recall = [
            experiment_figures.attribute_recall(name, section, section.get("verdict"))
            for name, section in attributes.items()
        ]
        trial = value.get("trial") or {}
        pages = recall_panels(recall)
        for number, page in enumerate(pages, start=1):
            plot = experiment_figures.group_recall(page, trial_number=trial.get("number"), step=value.get("step"))
            part = f" ({number} of {len(pages)})" if len(pages) > 1 else ""
            planned.append(
                (
                    print_recall(plot, rows=sum(len(attribute.groups) for attribute in page)),
                    f"Recall per group{part}: {document.label}",
                    "Each group's recall (true positive rate: the share of its actual positives the model "
                    "found) with its interval; squares mark the reference groups. "
                    f"Document SHA-256 {document.sha256}.",
                )
            )
    if context.trials is not None:
        planned += _experiment_drawings(context.trials)
    for attribution in context.attributions:
        planned += _attribution_drawings(attribution)
    svgs = figures_svg([drawing for drawing, _, _ in planned])
    added = [
        Figure(title=title, svg=svg, caption=caption) for (_, title, caption), svg in zip(planned, svgs, strict=True)
    ]
    return dataclasses.replace(context, figures=(*context.figures, *added))


def _paired_drawings(document: EvidenceDocument) -> list[tuple[Drawing, str, str]]:
    """A paired comparison's forest plot for paper: one panel per metric (fairness/figures/paired.py)."""
    value = document.document
    comparison = value.get("comparison") or {}
    tolerance = float(comparison.get("tolerance") or value["policy"]["tolerance"])
    champion = (value.get("champion") or {}).get("column")
    challenger = (value.get("challenger") or {}).get("column")
    return [
        (
            Drawing(panel.figure, height=panel.height),
            f"Paired differences, {panel.title}: {document.label}",
            f"Challenger {challenger} minus champion {champion} on the same rows, per group, with Newcombe's "
            "paired interval at the family's level; the shaded band is the policy's tolerance "
            f"(±{tolerance:g}): within it EQUIVALENT, beyond it on the better side BETTER, on the worse side "
            f"WORSE. Document SHA-256 {document.sha256}.",
        )
        for panel in paired_forest_plot_panels(comparison)
    ]


def _attribution_drawings(attribution: AttributionEvidence) -> list[tuple[Drawing, str, str]]:
    """The reviewed checkpoint's attributions for paper: per attribute, each group's gap in mean score
    against the reference split into its features' contributions (fairness/figures/attributions.py)."""
    value = attribution.document
    sample = value.get("sample") or {}
    return [
        (
            Drawing(panel.figure, height=panel.height),
            f"Why the gaps, {panel.title}: {attribution.label}",
            "Each group's gap in mean score against the reference group, split into the features that carry it "
            "(a group's mean attribution minus the reference's; the bars add up to the gap, the other features "
            "in one grey bar), with 95% bootstrap intervals; a pale bar's interval holds 0. "
            f"{value.get('method', '')}; {sample.get('size')} validation rows, seed {sample.get('seed')}. "
            f"Attributions SHA-256 {attribution.sha256}.",
        )
        for panel in attribution_panels(value)
    ]


def recall_panels(
    recall: Sequence[experiment_figures.AttributeRecall], *, max_rows: int = printing.ROWS_PER_PANEL
) -> list[list[experiment_figures.AttributeRecall]]:
    """The attributes of a recall figure cut into panels of at most ``max_rows`` groups (and
    ``printing.ATTRIBUTES_PER_PANEL`` attributes), an attribute's groups kept together where they fit."""
    rows = [(index, group) for index, attribute in enumerate(recall) for group in attribute.groups]
    result = []
    for chunk in printing.panels(rows, block=lambda row: row[0], max_rows=max_rows):
        attributes: dict[int, list[experiment_figures.GroupRecall]] = {}
        for index, group in chunk:
            attributes.setdefault(index, []).append(group)
        result.append([dataclasses.replace(recall[index], groups=groups) for index, groups in attributes.items()])
    return result


def print_recall(plot: Any, *, rows: int) -> Drawing:
    """The recall figure of ``rows`` groups laid out for paper: each group's row printing.ROW_PX high,
    the legend below the x axis (not above the plot, beside the title), margins that do not move."""
    plot_px = rows * printing.ROW_PX
    height = RECALL_MARGIN_TOP_PX + plot_px + RECALL_MARGIN_BOTTOM_PX
    plot.update_layout(
        margin={"t": RECALL_MARGIN_TOP_PX, "b": RECALL_MARGIN_BOTTOM_PX},
        title={"y": 1, "yref": "container", "yanchor": "top", "pad": {"t": 10}},
        legend={
            "orientation": "h",
            "xref": "container",
            "x": 0,
            "yref": "container",
            "y": (RECALL_MARGIN_BOTTOM_PX - RECALL_LEGEND_OFFSET_PX) / height,
            "yanchor": "top",
        },
    )
    plot.update_xaxes(automargin=False)
    return Drawing(plot, height=height)


def _experiment_drawings(trials: ExperimentTrials) -> list[tuple[Drawing, str, str]]:
    reviewed = trials.reviewed.number
    timeline = experiment_figures.eod_timeline(
        [
            experiment_figures.TrialTimeline(
                trial_id=trial.number,
                number=trial.number,
                steps=trial.steps,
                eod=trial.eod_series,
                verdicts=trial.verdicts,
            )
            for trial in trials.trials
        ],
        tolerance=trials.tolerance,
        floor=trials.noise_floor,
        selected=reviewed,
    )
    # On paper the page's one legend entry per trial would not fit: the other trials in one grey entry,
    # drawn first, so that the reviewed trial's line and the verdict marks lie on top of them.
    others = [trace for trace in timeline.data if trace.meta is not None and trace.meta != reviewed]
    for index, trace in enumerate(others):
        trace.update(
            line={"color": OTHER_TRIALS, "width": 1},
            opacity=1,
            legendgroup="others",
            showlegend=index == 0,
            name="other trials" if index == 0 else trace.name,
        )
    for trace in timeline.data:
        if trace.meta == reviewed:
            trace.update(line={"color": palette.SERIES[0]})  # not a light series colour on paper
    moved = {id(trace) for trace in others}
    timeline.data = (*others, *(trace for trace in timeline.data if id(trace) not in moved))
    scatter = experiment_figures.accuracy_scatter(
        [
            experiment_figures.TrialSummary(
                trial_id=trial.number,
                number=trial.number,
                accuracy=trial.accuracy,
                eod=trial.eod,
                verdict=trial.verdict,
            )
            for trial in trials.trials
        ],
        objective="eod",
        selected=reviewed,
    )
    return [
        (
            Drawing(timeline, height=_height(timeline, low=360, high=600)),
            f"EOD per validation step, every trial of {trials.label}",
            "eod (the largest gap in recall between two groups) at each validation of the reviewed trial "
            f"{reviewed} (in colour) and of every other trial (grey). The blue band is the tolerance, the grey "
            "region the largest noise floor; markers show where a trial's verdict changed. Long series are "
            "thinned for print (first and last points, extremes and verdict changes kept).",
        ),
        (
            Drawing(scatter, height=360),
            f"Accuracy against eod, every trial of {trials.label}",
            "Each trial at its latest validation, labelled with its number, in its verdict's colour and shape; "
            f"the reviewed trial {reviewed}'s marker is the largest. The dotted line joins the trials no other "
            "trial beats on both (the Pareto front: lower eod, higher accuracy).",
        ),
    ]


def _height(plot: Any, *, low: int, high: int) -> int:
    # The dashboard sizes a plot for its rows; keep that height, within a page.
    height = plot.layout.height
    return max(low, min(int(height), high)) if height else (low + high) // 2


# ----------------------------------------------------------------------------- a monitoring report's figures

# The deployment page's figures on paper: a legend row holds about this many entries at WIDTH pixels,
# and each row past the first makes the figure this much taller (the plot keeps its height).
MONITORING_LEGEND_PER_ROW = 4
MONITORING_LEGEND_ROW_PX = 24
# Over a period of at most this many looks (after the first), a tick at every look.
MONITORING_TICK_EVERY_LOOK = 12
MONITORING_CAPTIONS = {
    "rate": (
        "Each group's observed value at each look of the period with its confidence sequence (shaded, valid "
        "over every look of the monitor's horizon); the dotted line is the sequential breach boundary, the "
        "dashed line the limit. A breach is confirmed when the interval lies entirely beyond the limit."
    ),
    "gap": (
        "Each group's value minus the reference group's at each look of the period, with the interval of the "
        "difference (shaded); the dashed lines are the gap limit on either side."
    ),
    "share": (
        "Each group's share of the production rows at each look of the period with its confidence sequence "
        "(shaded), its share of the training data (dashed) and the drift limit around it (dotted); a group "
        "the training data never had is drawn with crosses: flagged, never judged."
    ),
}
MONITORING_THINNED = "The x axis is the look's number; long series are thinned for print (status changes kept)."


def monitoring_figures(charts: Sequence[dict[str, Any]], *, looks: Sequence[int] = ()) -> tuple[Figure, ...]:
    """The deployment page's figures of a monitoring report's period (``monitoring.selectors.look_figures``:
    ``{"kind", "title", "figure"}``, the figure as plotly JSON) as the report's: SVG, with their titles
    and captions for paper. ``looks``: the period's look numbers; a look is a whole number on the x axis
    (a tick per look over a short period, never 1.5). The figures given are not changed."""
    drawings = [
        Drawing(_whole_looks(chart["figure"], looks), height=_monitoring_height(chart["figure"])) for chart in charts
    ]
    svgs = figures_svg(drawings) if drawings else []
    return tuple(
        Figure(title=chart["title"], svg=svg, caption=f"{MONITORING_CAPTIONS[chart['kind']]} {MONITORING_THINNED}")
        for chart, svg in zip(charts, svgs, strict=True)
    )


def _monitoring_height(figure: dict[str, Any]) -> int:
    entries = sum(1 for trace in figure["data"] if trace.get("showlegend", True) and trace.get("name"))
    rows = max(1, -(-entries // MONITORING_LEGEND_PER_ROW))
    return int(figure["layout"]["height"]) + MONITORING_LEGEND_ROW_PX * (rows - 1)


def _whole_looks(figure: dict[str, Any], looks: Sequence[int]) -> dict[str, Any]:
    xaxis = {**figure["layout"].get("xaxis", {}), "tickformat": "d"}
    if looks and max(looks) - min(looks) <= MONITORING_TICK_EVERY_LOOK:
        xaxis.update(tick0=min(looks), dtick=1)
    return {**figure, "layout": {**figure["layout"], "xaxis": xaxis}}
