"""A decision on "challenger B replaces champion A" becomes a signed report with the comparison's
forest plot of paired differences and its table; the document is embedded byte for byte; hostile
model and group names stay text in the page, the figure, the PDF and the CSV."""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from auditportal.accounts.models import User
from auditportal.approvals import services as approval_services
from auditportal.approvals.models import RequestState, ReviewRequest
from auditportal.comparisons import services as comparison_services
from auditportal.evidence.models import VerdictDocument
from auditportal.fairness.documents.report_context import ReportContext, paired_table_csv
from auditportal.fairness.statistics.paired_file import PairedSpec
from auditportal.reports import rendering, services
from auditportal.reports.models import Report
from tests.approvals.conftest import frank, in_review, vote, waive_all
from tests.approvals.test_paired_requests import worse_for_one_group_csv
from tests.factories import PASSWORD, client_for
from tests.reports.helpers import ARTIFACTS, nss_database, pdf_tool
from tests.reports.test_decision_reports import worker
from tests.reports.test_independent_tools import _pdfsig

__all__ = ["frank", "worker"]

pytestmark = pytest.mark.django_db

CHAMPION = "<img src=x onerror=alert(1)>"
CHALLENGER = "<script>alert('b')</script>"
GROUPS = ("<b>women</b>", "=1+2", "x")


def _paired_request(bob: User, tmp_path: Path) -> ReviewRequest:
    source = worse_for_one_group_csv(tmp_path / "hostile.csv", champion=CHAMPION, challenger=CHALLENGER, groups=GROUPS)
    comparison = comparison_services.comparison_create(
        user=bob,
        source=source,
        original_name="hostile.csv",
        spec=PairedSpec.from_input(label="label", attributes="gender", champion=CHAMPION, challenger=CHALLENGER),
    )
    document = VerdictDocument.objects.get(paired_comparison=comparison)
    return approval_services.review_request_create(
        user=bob, title="B replaces A", intended_use="loan pre-screening", documents=[document]
    )


def test_hostile_names_are_text_on_the_comparison_document_and_request_pages(
    bob: User, carol: User, tmp_path: Path
) -> None:
    request = _paired_request(bob, tmp_path)
    assert request.model_identifier == CHALLENGER
    document = request.documents.get()
    client = client_for(carol)
    for url in (
        f"/comparisons/{request.paired_comparison_id}/",
        f"/documents/{document.pk}/",
        request.get_absolute_url(),
    ):
        html = client.get(url).content.decode()
        assert "<script>alert" not in html, url
        assert "<img src=x" not in html, url
        assert "<b>women</b>" not in html, url
    assert (
        "&lt;script&gt;alert(&#x27;b&#x27;)&lt;/script&gt;" in client.get(request.get_absolute_url()).content.decode()
    )


def test_the_csv_of_a_paired_document_quotes_formulas(bob: User, tmp_path: Path) -> None:
    request = _paired_request(bob, tmp_path)
    context_document = ReportContext.from_json(_context_json(request)).documents[0]
    text = paired_table_csv(context_document)
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][:4] == ["attribute", "metric", "group", "n"]
    groups = {row[2] for row in rows[1:]}
    assert "'=1+2" in groups
    assert "=1+2" not in groups


def _context_json(request: ReviewRequest) -> dict[str, Any]:
    from auditportal.fairness.documents.report_context import ReportContext as Context

    document = request.documents.get()
    from auditportal.approvals.context import evidence_document, policy_provenance
    from auditportal.fairness.documents.report_context import Subject

    return Context(
        title=request.title,
        organisation="Test",
        subject=Subject(kind="paired_comparison", label=request.subject_label, model=request.model_identifier),
        policy=policy_provenance(request.policy),
        documents=(evidence_document(document),),
    ).as_json()


@pytest.mark.slow  # renders and signs a report with figures
def test_an_approved_comparison_gets_a_signed_report_with_its_forest_plot_and_table(
    worker: None,
    bob: User,
    carol: User,
    dave: User,
    frank: User,
    django_capture_on_commit_callbacks: Callable[..., Any],
    tmp_path: Path,
) -> None:
    request = in_review(_paired_request(bob, tmp_path), carol)
    waive_all(request, carol, [dave, frank])
    vote(request, dave)
    with django_capture_on_commit_callbacks(execute=True):
        vote(request, frank)
    assert request.state == RequestState.APPROVED
    report = Report.objects.get()
    context = ReportContext.from_json(report.context)
    assert context.subject.kind == "paired_comparison"
    paired = [figure for figure in context.figures if figure.title.startswith("Paired differences")]
    assert [figure.title.split(":")[0] for figure in paired] == [
        "Paired differences, true positive rate",
        "Paired differences, false positive rate",
        "Paired differences, false negative rate",
        "Paired differences, selection rate",
        "Paired differences, accuracy",
    ]
    assert not [figure for figure in context.figures if figure.title.startswith("Forest plot")]
    for figure in paired:
        assert figure.svg.startswith("<svg")
        # The figure's text is escaped (figures/text.plain): no markup of the names reaches the SVG.
        assert "<script" not in figure.svg
        assert "<b>women" not in figure.svg
        assert "&lt;b&gt;women" in figure.svg or "women" in figure.svg
    html = rendering.render_html(context, attachments=rendering.embedded_files(context))
    assert "<script>alert" not in html
    assert "&lt;b&gt;women&lt;/b&gt;" in html
    assert "The committee voted on" in html

    services.report_sign_member(report=report, member=dave, password=PASSWORD)
    newest = services.report_sign_member(report=report, member=frank, password=PASSWORD)
    path = tmp_path / "paired-report.pdf"
    path.write_bytes(newest.path.read_bytes())
    signatures = _pdfsig(path, nss_database(tmp_path / "nss"))
    assert [item["field"] for item in signatures] == ["Organisation", "Member1", "Member2"]
    assert all(item["valid"] and item["trusted"] for item in signatures), signatures
    text = " ".join(
        subprocess.run(
            [pdf_tool("pdftotext"), str(path), "-"], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    assert f"Challenger {CHALLENGER} replaces champion {CHAMPION}" in text
    assert "Paired differences, accuracy" in text
    assert "<b>women</b>" in text  # the name as text, never as markup
    stored = request.documents.get()
    out = tmp_path / "document.json"
    subprocess.run(
        [pdf_tool("pdfdetach"), "-savefile", f"verdict-document-{stored.short_hash}.json", "-o", str(out), str(path)],
        check=True,
        capture_output=True,
    )
    assert out.read_bytes() == stored.canonical_bytes
    subprocess.run(
        [pdf_tool("pdftoppm"), "-png", "-r", "60", str(path), str(tmp_path / "page")], check=True, timeout=120
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, ARTIFACTS / "paired-report.pdf")
    for page in sorted(tmp_path.glob("page-*.png")):
        shutil.copyfile(page, ARTIFACTS / f"paired-report-{page.name}")
