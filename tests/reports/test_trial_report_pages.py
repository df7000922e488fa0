"""A real trial report of 80 comparisons (the demo's trial 3 has as many), decided, drawn by the
worker's task, signed by two members and printed: every page kept as PNG under
test-artifacts/reports/trial-report-80/ (CI keeps them), and measured with poppler's pdftotext -bbox:
the forest plot's five panels on pages of their own, rows at least 7 mm apart, no figure text under
8 pt, no two words drawn over each other, the legend below the axis title; the report titled by its
review request, no server folder printed, the download named from the request, the report page and the
request page linking each other; pdfsig and the PDF/A-3b structure still hold."""

from __future__ import annotations

import html
import itertools
import re
import shutil
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.urls import reverse

from auditportal.accounts.models import User
from auditportal.approvals import services as approval_services
from auditportal.datasets.models import DatasetVersion
from auditportal.fairness.documents.findings import document_attributes
from auditportal.fairness.documents.report_context import ReportContext
from auditportal.fairness.figures.audit import forest_points
from auditportal.fairness.text.presentation import METRIC_LABELS
from auditportal.outbox.models import OutboxMessage
from auditportal.reports import figures, services
from auditportal.reports.models import Report
from auditportal.reports.tasks import report_generate_task
from tests.approvals.conftest import approved, demo_version, frank, runs
from tests.factories import PASSWORD, client_for
from tests.reports import pdfa
from tests.reports.helpers import ARTIFACTS, nss_database, pdf_tool
from tests.reports.test_independent_tools import _pdfsig
from tests.reports.trial_world import COMPARISONS, eighty_comparison_request

__all__ = ["demo_version", "frank", "runs"]

pytestmark = [pytest.mark.django_db, pytest.mark.slow]  # about 40 s: 15 waivers, four figures, nine pages of them

PAGES = ARTIFACTS / "trial-report-80"
# DejaVu Sans (the report's face) from descender to ascender: pdftotext's word box is this many em high.
WORD_BOX_EM = 1.164
PT_PER_MM = 72 / 25.4
# The running header and footer (7.5 and 6.5 pt by design) lie outside these, in points from the top.
BODY_TOP, BODY_BOTTOM_MARGIN = 40, 45


@dataclass(frozen=True)
class Word:
    text: str
    x0: float
    y0: float
    x1: float
    y1: float

    @property
    def size_pt(self) -> float:
        return (self.y1 - self.y0) / WORD_BOX_EM

    def overlaps(self, other: Word, slack: float = 0.5) -> bool:
        return (
            min(self.x1, other.x1) - max(self.x0, other.x0) > slack
            and min(self.y1, other.y1) - max(self.y0, other.y0) > slack
        )


def _pages(path: Path) -> list[list[Word]]:
    """Every page's words with their boxes (points from the top left), as pdftotext -bbox gives them."""
    out = subprocess.run(
        [pdf_tool("pdftotext"), "-bbox", str(path), "-"], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    pages = []
    for page in out.split("<page ")[1:]:
        height = float(re.search(r'height="([\d.]+)"', page).group(1))  # type: ignore[union-attr]
        words = [
            Word(html.unescape(text), float(x0), float(y0), float(x1), float(y1))
            for x0, y0, x1, y1, text in re.findall(
                r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">(.*?)</word>', page
            )
        ]
        pages.append([word for word in words if word.y0 > BODY_TOP and word.y1 < height - BODY_BOTTOM_MARGIN])
    return pages


def _lines(words: list[Word]) -> dict[float, str]:
    """The words of one baseline (pdftotext gives a text run's words one yMin) joined, by that yMin."""
    lines: dict[float, list[Word]] = defaultdict(list)
    for word in words:
        lines[round(word.y0, 1)].append(word)
    return {y: " ".join(word.text for word in sorted(line, key=lambda word: word.x0)) for y, line in lines.items()}


def _text(words: list[Word]) -> str:
    return " ".join(_lines(words)[y] for y in sorted(_lines(words)))


@pytest.fixture
def warm_chromium(warm_figure_export: None) -> None:
    """A warm Chromium, as the worker has (the session's: tests/conftest.py)."""


def test_an_80_comparison_trial_report_prints_every_label_legibly_and_keeps_its_pages_as_png(
    warm_chromium: None,
    demo_version: DatasetVersion,
    bob: User,
    carol: User,
    dave: User,
    frank: User,
    runs: Path,
    tmp_path: Path,
) -> None:
    request = approved(eighty_comparison_request(demo_version, bob, runs), carol, [dave, frank])
    assert request.checkpoint.startswith(str(runs))  # a local checkpoint: a folder on this machine
    [message] = OutboxMessage.objects.filter(name=approval_services.REPORT_GENERATE_TASK)
    report = Report.objects.get(pk=report_generate_task.apply(args=message.args).get())
    for member in (dave, frank):
        services.report_sign_member(report=report, member=member, password=PASSWORD)
    newest = report.revisions.order_by("-number").first()
    assert newest is not None
    assert newest.number == 3
    path = tmp_path / "report.pdf"
    path.write_bytes(newest.path.read_bytes())

    # Every page as PNG, kept with the PDF for CI's artifacts (and for people to look at).
    shutil.rmtree(PAGES, ignore_errors=True)
    PAGES.mkdir(parents=True)
    shutil.copyfile(path, PAGES / "report.pdf")
    subprocess.run([pdf_tool("pdftoppm"), "-png", "-r", "100", str(path), str(PAGES / "page")], check=True, timeout=300)
    pngs = sorted(PAGES.glob("page-*.png"))
    assert len(pngs) == report.pages
    assert all(png.stat().st_size > 10_000 for png in pngs)  # each a page with something on it

    pages = _pages(path)
    assert len(pages) == report.pages
    context = ReportContext.from_json(report.context)
    [document] = context.documents
    points = forest_points(document_attributes(document.document))
    assert sum(len(rows) for rows in points.values()) == COMPARISONS

    # The forest plot: one metric per panel, each panel on a page of its own with all its 16 rows.
    forest_pages = []
    for metric, rows in points.items():
        title = f"{METRIC_LABELS[metric]}, {len(rows)} comparisons"
        [number] = [index for index, words in enumerate(pages) if title in _lines(words).values()]
        forest_pages.append(number)
        words = pages[number]
        lines = _lines(words)
        labels = sorted((y, text) for y, text in lines.items() if text in {point.label for point in rows})
        assert [text for _, text in labels] == [point.label for point in rows], f"page {number + 1}"
        # Rows at least 7 mm apart on paper, and evenly.
        pitches = [(b - a) / PT_PER_MM for (a, _), (b, _) in itertools.pairwise(labels)]
        assert min(pitches) >= figures.MIN_ROW_MM, f"page {number + 1}: rows {min(pitches):.2f} mm apart"
        assert max(pitches) - min(pitches) < 0.2
        # The title above the tolerance label, that above the first row; the legend below the axis title.
        title_y = next(y for y, text in lines.items() if text == title)
        tolerance_y = next(y for y, text in lines.items() if text.startswith("tolerance ±"))
        axis_y = next(y for y, text in lines.items() if text.startswith("difference, group − reference"))
        legend_y = max(y for y, text in lines.items() if text.startswith(("Fail", "Inconclusive", "Pass")))
        assert title_y < tolerance_y < labels[0][0] < labels[-1][0] < axis_y < legend_y
    assert len(set(forest_pages)) == len(points)
    assert forest_pages == list(range(forest_pages[0], forest_pages[0] + len(points)))

    # On every page with a figure: no word under 8 pt, and no two words drawn over each other.
    # (From the Figures heading's page to the page before the Signatures heading's.)
    first = next(index for index, words in enumerate(pages) if "Figures" in _lines(words).values())
    last = next(index for index, words in enumerate(pages) if "Signatures" in _lines(words).values())
    figure_pages = list(range(first, last))
    assert len(figure_pages) >= len(points) + 2  # the forest plot's, the recall figure's, the experiment's
    for index in figure_pages:
        words = pages[index]
        small = [word for word in words if word.size_pt < figures.MIN_FONT_PT - 0.05]
        assert not small, f"page {index + 1}: {[(word.text, round(word.size_pt, 2)) for word in small]}"
        crossed = [(a.text, b.text) for n, a in enumerate(words) for b in words[n + 1 :] if a.overlaps(b)]
        assert not crossed, f"page {index + 1}: words drawn over each other: {crossed}"

    # Titled by its review request; the checkpoint by its folder's name, no folder of this machine.
    text = "\n".join(_text(words) for words in pages)
    assert _text(pages[0]).startswith(request.title)
    info = subprocess.run([pdf_tool("pdfinfo"), str(path)], capture_output=True, text=True, check=True).stdout
    assert re.search(rf"^Title:\s+{re.escape(request.title)}$", info, flags=re.MULTILINE)
    assert "local checkpoint 0b5d3f4e-checkpoint" in text
    assert str(runs) not in text
    assert not re.search(r"(?<![\w.])/(?:[\w.-]+/)+", text), re.findall(r"(?<![\w.])/(?:[\w.-]+/)+\S*", text)
    assert "var/" not in text

    # Signed and still PDF/A-3b in structure.
    signatures = _pdfsig(path, nss_database(tmp_path / "nss"))
    assert [(item["valid"], item["trusted"]) for item in signatures] == [(True, True)] * 3
    assert signatures[-1]["total"]
    assert pdfa.problems(path.read_bytes()) == []

    # Downloaded under the request's name; the report page and the request page link each other.
    browser = client_for(carol)
    download = browser.get(reverse("reports:revision", args=[report.pk, 3]))
    name = f"review-request-{request.pk}-credit-model-v5-for-pre-screening-approved-r3.pdf"
    assert download["Content-Disposition"] == f"attachment; filename=\"{name}\"; filename*=UTF-8''{name}"
    detail = browser.get(reverse("reports:detail", args=[report.pk])).content.decode()
    assert f'href="{reverse("approvals:request", args=[request.pk])}"' in detail
    assert f"Review request #{request.pk}: {request.title}" in detail
    page = browser.get(reverse("approvals:request", args=[request.pk])).content.decode()
    assert f'href="{reverse("reports:detail", args=[report.pk])}"' in page
    assert f'href="{reverse("reports:revision", args=[report.pk, 3])}"' in page
