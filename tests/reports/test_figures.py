"""Plotly figures as static SVG through kaleido and Debian's chromium, drawn into a report."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import plotly.graph_objects as go
import pytest

from auditportal.audits.models import PredictionAudit
from auditportal.fairness.documents.report_context import Figure
from auditportal.reports import figures, rendering
from auditportal.reports import tasks as report_tasks
from tests.browser.conftest import NO_CHROMIUM, chromium_path, require_system_tool
from tests.reports.helpers import decided_context, pdf_tool

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


@pytest.fixture
def chromium() -> Iterator[None]:
    if chromium_path() is None:
        require_system_tool(NO_CHROMIUM)
    yield
    figures.stop_warm_export()


def _figure() -> go.Figure:
    figure = go.Figure(go.Bar(x=["female", "male"], y=[0.71, 0.84], name="recall"))
    figure.update_layout(title_text="Recall by gender", yaxis_title="Recall")
    return figure


def test_a_figure_becomes_svg_in_the_report_font_and_stays_unchanged(chromium: None) -> None:
    figure = _figure()
    before = figure.to_plotly_json()
    svg = figures.figure_svg(figure)
    assert svg.startswith("<svg")
    assert "Recall by gender" in svg
    assert "Report Sans" in svg
    assert figure.to_plotly_json() == before


def test_a_worker_process_starts_its_warm_chromium_with_its_first_export_and_keeps_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[object] = []

    class Browser:
        """Stands in for the warm Chromium: counts its starts, draws a placeholder per figure."""

        def __init__(self) -> None:
            started.append(self)

        def svgs(self, specs: list[dict[str, object]]) -> list[bytes]:
            return [b"<svg></svg>" for _ in specs]

        def close(self) -> None:
            pass

    monkeypatch.setattr(figures, "_WarmChromium", Browser)
    monkeypatch.setattr(figures, "_warm", None)
    monkeypatch.setattr(figures, "_keep_warm", False)
    report_tasks._warm_figure_export()  # what worker_process_init runs in a worker process
    assert started == []  # no browser for a worker that draws nothing
    assert figures.figure_svg(_figure()) == "<svg></svg>"
    assert figures.figures_svg([figures.Drawing(_figure(), height=300)] * 2) == ["<svg></svg>"] * 2
    assert len(started) == 1  # started by the first export, kept for the next
    figures.stop_warm_export()


def _without_uid(svg: str) -> str:
    # plotly names its clip paths after a random id per export.
    uid = re.search(r'id="defs-([0-9a-f]+)"', svg)
    assert uid is not None
    return svg.replace(uid.group(1), "UID")


def test_the_warm_export_gives_the_same_svg(chromium: None) -> None:
    cold = figures.figure_svg(_figure())
    figures.start_warm_export()
    figures.start_warm_export()  # a second start does nothing
    assert _without_uid(figures.figure_svg(_figure())) == _without_uid(cold)


def test_the_figure_is_drawn_in_the_pdf_with_its_text(
    chromium: None, audit: PredictionAudit, member_dave: object, tmp_path: Path
) -> None:
    svg = figures.figure_svg(_figure())
    context = decided_context(
        audit,
        None,
        [member_dave],  # type: ignore[list-item]
        figures=(Figure(title="Recall by gender", svg=svg, caption="Bars: recall per group."),),
    )
    path = tmp_path / "report.pdf"
    path.write_bytes(rendering.render(context).pdf)
    text = subprocess.run([pdf_tool("pdftotext"), str(path), "-"], capture_output=True, text=True, check=True).stdout
    # The axis labels are the SVG's own text, drawn by WeasyPrint, not a picture of it.
    assert "female" in text
    assert "Bars: recall per group." in text
    # in the report's own embedded font (static/fonts), not a system font Chromium knew it by
    fonts = subprocess.run([pdf_tool("pdffonts"), str(path)], capture_output=True, text=True, check=True).stdout
    names = [line.split()[0] for line in fonts.splitlines()[2:]]
    assert names
    assert all(re.search(r"\+Report-(Sans|Sans-Bold|Mono)$", name) for name in names), names


def _normalised(svg: str) -> str:
    # Each trace of a scatter is named after a random id per export too.
    return re.sub(r"\btrace[0-9a-f]{6}\b", "traceUID", _without_uid(svg))


def test_a_reports_figures_are_drawn_in_one_go_in_their_order(chromium: None) -> None:
    first = _figure()
    second = go.Figure(go.Scatter(x=[1, 2], y=[0.2, 0.1], name="eod"))
    second.update_layout(title_text="EOD per step")
    cold = figures.figures_svg([figures.Drawing(first, height=300), figures.Drawing(second, height=400)])
    figures.start_warm_export()
    warm = figures.figures_svg([figures.Drawing(first, height=300), figures.Drawing(second, height=400)])
    assert [_normalised(svg) for svg in warm] == [_normalised(svg) for svg in cold]
    assert "Recall by gender" in warm[0]
    assert "EOD per step" in warm[1]
    assert 'height="400"' in warm[1]
    # The page is clean again for the next report: the same figures again, the same SVG.
    assert [_normalised(svg) for svg in figures.figures_svg([figures.Drawing(second, height=400)])] == [
        _normalised(warm[1])
    ]


def test_kaleido_is_given_the_headless_shell_where_installed_unless_browser_path_names_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shell = tmp_path / "chromium-headless-shell"
    monkeypatch.setattr(figures, "HEADLESS_SHELL", shell)
    monkeypatch.delenv("BROWSER_PATH", raising=False)
    assert "path" not in figures.kaleido_options()  # not installed: kaleido finds chromium itself

    shell.touch()
    assert figures.kaleido_options()["path"] == str(shell)

    monkeypatch.setenv("BROWSER_PATH", "/opt/another/chrome")
    assert "path" not in figures.kaleido_options()  # kaleido reads BROWSER_PATH itself
