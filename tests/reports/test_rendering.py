"""Laying out a report: page numbers, a table of contents for long reports, tables that break across
pages with their headers repeated, signature boxes where the fields go, nothing fetched from outside."""

from __future__ import annotations

import random
import re
import subprocess
from pathlib import Path

import pytest
from weasyprint.urls import FatalURLFetchingError

from auditportal.audits.models import PredictionAudit
from auditportal.fairness.documents.report_context import Figure, ReportContext
from auditportal.fairness.statistics.audit import AuditSpec
from auditportal.reports import rendering
from tests.factories import PredictionAuditFactory
from tests.reports.helpers import decided_context, pdf_tool

pytestmark = pytest.mark.django_db


def _many_groups_csv(groups: int = 45, per_group: int = 12, seed: int = 7) -> str:
    rng = random.Random(seed)
    lines = ["label,pred,region,gender,age_group,tenure"]
    for group in range(groups):
        for _ in range(per_group):
            label = rng.random() < 0.4
            pred = label if rng.random() < 0.8 else not label
            lines.append(
                f"{int(label)},{int(pred)},region-{group:02d},{rng.choice('fm')},"
                f"{rng.choice(['young', 'middle', 'old'])},{rng.choice(['new', 'long'])}"
            )
    return "\n".join(lines) + "\n"


@pytest.fixture
def long_audit(db: None, dataset_storage: Path) -> PredictionAudit:
    audit: PredictionAudit = PredictionAuditFactory.create(
        content=_many_groups_csv(),
        spec=AuditSpec(label="label", prediction="pred", attributes=("region", "gender", "age_group", "tenure")),
    )
    return audit


def _pages(pdf: bytes, tmp_path: Path) -> list[str]:
    path = tmp_path / "report.pdf"
    path.write_bytes(pdf)
    text = subprocess.run(
        [pdf_tool("pdftotext"), "-layout", str(path), "-"], capture_output=True, text=True, check=True
    ).stdout
    return text.split("\f")[:-1]


@pytest.mark.slow  # about 9 s: a report of many pages
def test_a_long_report_has_contents_page_numbers_and_repeated_table_headers(
    long_audit: PredictionAudit, member_dave: object, tmp_path: Path
) -> None:
    context = decided_context(long_audit, None, [member_dave])  # type: ignore[list-item]
    assert context.is_long
    rendered = rendering.render(context)
    pages = _pages(rendered.pdf, tmp_path)
    assert len(pages) == rendered.pages
    for number, page in enumerate(pages, start=1):
        assert f"Page {number} of {len(pages)}" in page
    contents = next(page for page in pages if "Contents" in page)
    # Each entry ends with the page its section starts on.
    findings = next(number for number, page in enumerate(pages, start=1) if "Differences are group minus" in page)
    entries = [line.strip() for line in contents.splitlines()]
    assert any(line.startswith("Findings") and line.endswith(f" {findings}") for line in entries), entries
    # The 45-region group table runs over a page break; the next page starts with its header again.
    first = next(number for number, page in enumerate(pages) if "region-00" in page)
    last = max(number for number, page in enumerate(pages) if "region-44" in page)
    assert last > first
    header = pages[first + 1].split("region-")[0]
    assert "Positives" in header
    assert "Predicted" in header  # "Predicted +", over two lines in its narrow column


def test_a_short_report_has_no_contents(audit: PredictionAudit, member_dave: object, tmp_path: Path) -> None:
    context = decided_context(audit, None, [member_dave])  # type: ignore[list-item]
    assert not context.is_long
    pages = _pages(rendering.render(context).pdf, tmp_path)
    assert not any("Contents" in page for page in pages)


def test_the_signature_boxes_become_fields_on_their_page(audit: PredictionAudit, member_dave: object) -> None:
    context = decided_context(audit, None, [member_dave])  # type: ignore[list-item]
    rendered = rendering.render(context)
    assert [field.name for field in rendered.fields] == ["Organisation", "Member1"]
    for field in rendered.fields:
        x1, y1, x2, y2 = field.box
        # 85 mm by 24 mm in points, inside an A4 page (595 by 842 points).
        assert (x2 - x1, y2 - y1) == pytest.approx((241, 68), abs=2)
        assert 0 <= x1 < x2 <= 595
        assert 0 <= y1 < y2 <= 842
        assert 0 <= field.page < rendered.pages
    organisation, member = rendered.fields
    assert member.page > organisation.page or member.box[1] < organisation.box[1]


def test_figures_are_drawn_from_their_svg(audit: PredictionAudit, member_dave: object, tmp_path: Path) -> None:
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" width="400" height="100">'
        '<rect x="0" y="0" width="400" height="100" fill="#0072b2"/></svg>'
    )
    context = decided_context(
        audit,
        None,
        [member_dave],  # type: ignore[list-item]
        figures=(Figure(title="A blue bar", svg=svg, caption="Drawn from SVG."),),
    )
    pages = _pages(rendering.render(context).pdf, tmp_path)
    assert any("A blue bar. Drawn from SVG." in page for page in pages)


def test_nothing_outside_static_is_fetched() -> None:
    fetcher = rendering.static_fetcher()
    with pytest.raises(FatalURLFetchingError, match=re.escape("may not fetch https://example.org/x.css")):
        fetcher.fetch("https://example.org/x.css")
    with pytest.raises(FatalURLFetchingError, match="may not read file:///etc/passwd"):
        fetcher.fetch("file:///etc/passwd")
    fetched = fetcher.fetch((rendering.static_dir() / "css" / "report-pdf.css").as_uri())
    assert b"Report Sans" in fetched._file_obj.read()


def test_the_context_is_what_is_rendered(audit: PredictionAudit, member_dave: object) -> None:
    context = decided_context(audit, None, [member_dave])  # type: ignore[list-item]
    html = rendering.render_html(context, attachments=rendering.embedded_files(context))
    assert context.sha256 in html
    assert ReportContext.from_json(context.as_json()).title in html
