# pyHanko's writer methods carry no annotations.
# mypy: disable-error-code="no-untyped-call"
"""PDF/A-3b as far as it can be checked here (no veraPDF): the structural rules of tests/reports/pdfa.py
hold for every stored revision of a signed report, figures included, and each rule finds a file that
breaks it."""

from __future__ import annotations

import io
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from pyhanko.pdf_utils import generic
from pyhanko.pdf_utils.incremental_writer import IncrementalPdfFileWriter
from weasyprint import HTML

from auditportal.audits.models import PredictionAudit
from auditportal.fairness.documents.report_context import Figure
from auditportal.reports import services
from tests.factories import PASSWORD
from tests.reports import pdfa
from tests.reports.helpers import SignedReport, decided_context, pdf_tool

pytestmark = pytest.mark.django_db

# A figure as kaleido writes them: text in the report's font, drawn by WeasyPrint from the SVG.
SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="400" height="120">'
    '<rect x="0" y="0" width="400" height="120" fill="rgba(0, 114, 178, 0.4)"/>'
    '<text x="20" y="60" style="font-family: \'Report Sans\'; font-size: 16px;">recall of female: 0.71</text></svg>'
)


def test_every_revision_of_a_signed_report_meets_the_checked_rules(signed_report: SignedReport) -> None:
    for revision in signed_report.revisions:
        assert pdfa.problems(revision.path.read_bytes()) == [], f"revision {revision.number}"


def test_a_report_with_figures_meets_them_too(
    audit: PredictionAudit, member_dave: object, member_fay: object, tmp_path: Path
) -> None:
    context = decided_context(
        audit,
        None,
        [member_dave, member_fay],  # type: ignore[list-item]
        figures=(Figure(title="Recall", svg=SVG, caption="Text in the SVG."),),
    )
    report = services.report_generate(context=context)
    services.report_sign_member(report=report, member=member_dave, password=PASSWORD)  # type: ignore[arg-type]
    newest = report.revisions.order_by("-number").first()
    assert newest is not None
    data = newest.path.read_bytes()
    assert pdfa.problems(data) == []
    # The figure's text is the PDF's text, in the embedded report font (pdftotext reads it back).
    path = tmp_path / "report.pdf"
    path.write_bytes(data)
    text = subprocess.run([pdf_tool("pdftotext"), str(path), "-"], capture_output=True, text=True, check=True)
    assert "recall of female: 0.71" in text.stdout
    check = subprocess.run([pdf_tool("qpdf"), "--check", str(path)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


# --- each rule finds a file that breaks it ---------------------------------------------------------


def _revised(data: bytes, change: Callable[[IncrementalPdfFileWriter], None]) -> bytes:
    writer = IncrementalPdfFileWriter(io.BytesIO(data))
    change(writer)
    output = io.BytesIO()
    writer.write(output)
    return output.getvalue()


def _name(value: str) -> generic.NameObject:
    return generic.NameObject(value)


def _standard_font(writer: IncrementalPdfFileWriter) -> None:
    # Helvetica, one of the 14 fonts a viewer is expected to have: not embedded, as PDF/A forbids.
    entries = {"/Type": "/Font", "/Subtype": "/Type1", "/BaseFont": "/Helvetica", "/Encoding": "/WinAnsiEncoding"}
    font = writer.add_object(generic.DictionaryObject({_name(key): _name(value) for key, value in entries.items()}))
    content = writer.add_object(generic.StreamObject(stream_data=b"BT /Hv 12 Tf 72 72 Td (added) Tj ET"))
    writer.add_stream_to_page(
        0, content, resources=generic.DictionaryObject({_name("/Font"): generic.DictionaryObject({_name("/Hv"): font})})
    )


def _hidden_widget(writer: IncrementalPdfFileWriter) -> None:
    fields = writer.root["/AcroForm"]["/Fields"]
    field = next(item.get_object() for item in fields.iterate() if str(item.get_object()["/T"]) == "Member1")
    field[_name("/F")] = generic.NumberObject(2)  # Hidden, not Print
    writer.update_container(field)


def _no_relationship(writer: IncrementalPdfFileWriter) -> None:
    specification = writer.root["/AF"][0]
    del specification["/AFRelationship"]
    writer.update_container(specification)


def _other_title(writer: IncrementalPdfFileWriter) -> None:
    info = writer.trailer["/Info"]
    info[_name("/Title")] = generic.TextStringObject("Another title")
    writer.update_container(info)


BREAKS: dict[str, tuple[Callable[[IncrementalPdfFileWriter], None], str]] = {
    "a font not embedded": (_standard_font, "6.2.11.4.1: font /Helvetica has no font descriptor"),
    "a hidden signature widget": (_hidden_widget, "6.3.2: /Widget annotation Member1 has flags 2"),
    "an attachment without AFRelationship": (_no_relationship, "has no valid /AFRelationship"),
    "Info and XMP disagree": (_other_title, "Info /Title 'Another title' differs from XMP dc:title"),
}


@pytest.mark.parametrize("kind", list(BREAKS))
def test_each_rule_finds_a_file_that_breaks_it(kind: str, signed_report: SignedReport) -> None:
    change, message = BREAKS[kind]
    found = pdfa.problems(_revised(signed_report.data, change))
    assert any(message in item for item in found), found


def test_a_pdf_a_2b_file_and_a_plain_pdf_are_not_taken_for_pdf_a_3b() -> None:
    html = HTML(string="<p>Fairness audit</p>")
    assert pdfa.problems(html.write_pdf(pdf_variant="pdf/a-2b")) == [
        "6.6.4: XMP identifies PDF/A part '2', conformance 'B', not 3 and B"
    ]
    plain = pdfa.problems(html.write_pdf())
    assert "6.6.2.1: the catalogue has no /Metadata stream" in plain
    assert "6.2.2: the catalogue has no /OutputIntents" in plain


def test_an_encrypted_file_is_refused(signed_report: SignedReport, tmp_path: Path) -> None:
    plain, encrypted = tmp_path / "report.pdf", tmp_path / "encrypted.pdf"
    plain.write_bytes(signed_report.data)
    subprocess.run(
        [pdf_tool("qpdf"), "--encrypt", "", "owner", "256", "--", str(plain), str(encrypted)],
        check=True,
        capture_output=True,
    )
    assert pdfa.problems(encrypted.read_bytes()) == ["6.1.3: the trailer has /Encrypt: the file is encrypted"]


def test_a_file_of_another_pdf_version_or_without_identifier_is_refused(signed_report: SignedReport) -> None:
    assert any("6.1.2" in item for item in pdfa.problems(b"%PDF-2.0" + signed_report.data[8:]))
    without_id = signed_report.data.replace(b"/ID", b"/XD")
    assert "6.1.3: the trailer has no /ID of two strings" in pdfa.problems(without_id)
