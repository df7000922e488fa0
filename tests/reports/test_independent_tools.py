"""A signed report as tools outside the portal see it: poppler's pdfsig (with an NSS database that
trusts the portal's authority), qpdf, pdfdetach, pdffonts, pdftotext and pdftoppm."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from pyhanko.pdf_utils.reader import PdfFileReader

from auditportal.audits.models import PredictionAudit
from auditportal.evidence.selectors import verdict_document_of_audit
from auditportal.reports.selectors import report_verify
from tests.reports.helpers import ARTIFACTS, SignedReport, nss_database, pdf_tool

pytestmark = pytest.mark.django_db


def _pdfsig(path: Path, nssdir: str) -> list[dict[str, str | bool]]:
    result = subprocess.run(
        [pdf_tool("pdfsig"), "-nssdir", nssdir, str(path)], capture_output=True, text=True, check=False, timeout=60
    )
    # pdfsig exits 0 even on a digest mismatch: read its text.
    assert result.returncode == 0, result.stderr
    blocks = re.split(r"^Signature #\d+:$", result.stdout, flags=re.MULTILINE)[1:]
    return [
        {
            "field": re.search(r"Signature Field Name: (.*)", block).group(1).strip(),  # type: ignore[union-attr]
            "valid": "Signature Validation: Signature is Valid." in block,
            "trusted": "Certificate Validation: Certificate is Trusted." in block,
            "total": "  - Total document signed" in block,
            "end": block.split("Signed Ranges:")[1].split("\n")[0],
        }
        for block in blocks
    ]


def test_pdfsig_finds_every_signature_valid_and_trusted_and_the_newest_covering_the_whole_file(
    signed_report: SignedReport, tmp_path: Path
) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(signed_report.data)
    signatures = _pdfsig(path, nss_database(tmp_path / "nss"))
    assert [item["field"] for item in signatures] == ["Organisation", "Member1", "Member2"]
    assert all(item["valid"] and item["trusted"] for item in signatures), signatures
    # The newest signature (Member2, by fay) covers the whole file; the earlier ones their revisions.
    assert [item["total"] for item in signatures] == [False, False, True]


def test_pdfsig_without_the_portal_authority_does_not_trust_the_signatures(
    signed_report: SignedReport, tmp_path: Path
) -> None:
    certutil = pdf_tool("certutil")
    directory = tmp_path / "empty-nss"
    directory.mkdir()
    subprocess.run([certutil, "-N", "-d", f"sql:{directory}", "--empty-password"], check=True, capture_output=True)
    path = tmp_path / "report.pdf"
    path.write_bytes(signed_report.data)
    signatures = _pdfsig(path, f"sql:{directory}")
    assert all(item["valid"] for item in signatures)
    assert not any(item["trusted"] for item in signatures)


def test_qpdf_finds_no_structural_error_in_any_revision(signed_report: SignedReport, tmp_path: Path) -> None:
    for revision in signed_report.revisions:
        result = subprocess.run(
            [pdf_tool("qpdf"), "--check", str(revision.path)], capture_output=True, text=True, check=False, timeout=60
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "No syntax or stream encoding errors found" in result.stdout


def test_the_embedded_verdict_document_is_the_stored_one_byte_for_byte(
    signed_report: SignedReport, audit: PredictionAudit, tmp_path: Path
) -> None:
    pdfdetach = pdf_tool("pdfdetach")
    path = tmp_path / "report.pdf"
    path.write_bytes(signed_report.data)
    stored = verdict_document_of_audit(audit=audit)
    name = f"verdict-document-{stored.short_hash}.json"
    listing = subprocess.run([pdfdetach, "-list", str(path)], capture_output=True, text=True, check=True).stdout
    assert name in listing
    assert f"groups-{stored.short_hash}.csv" in listing
    out = tmp_path / "detached.json"
    subprocess.run([pdfdetach, "-savefile", name, "-o", str(out), str(path)], check=True, capture_output=True)
    assert out.read_bytes() == stored.canonical_bytes


def test_the_attachments_are_pdf_a_3_associated_files(signed_report: SignedReport) -> None:
    reader = PdfFileReader(io.BytesIO(signed_report.data))
    associated = {
        str(item.get_object()["/UF"]): str(item.get_object()["/AFRelationship"]) for item in reader.root["/AF"]
    }
    assert sorted(associated.values()) == ["/Data", "/Source"]
    assert all(name.endswith(".json") for name, kind in associated.items() if kind == "/Source")
    metadata = reader.root["/Metadata"].get_object().data.decode()
    assert 'pdfaid:part="3"' in metadata or "<pdfaid:part>3</pdfaid:part>" in metadata
    assert 'pdfaid:conformance="B"' in metadata or "<pdfaid:conformance>B</pdfaid:conformance>" in metadata
    # PDF/A: the Info dictionary and the XMP metadata name the same producer (pyHanko, the last writer).
    producer = str(reader.trailer["/Info"]["/Producer"])
    assert f'pdf:Producer="{producer}"' in metadata or f"<pdf:Producer>{producer}</pdf:Producer>" in metadata


def test_fonts_are_embedded_and_come_from_static(signed_report: SignedReport, tmp_path: Path) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(signed_report.data)
    result = subprocess.run([pdf_tool("pdffonts"), str(path)], capture_output=True, text=True, check=True)
    rows = result.stdout.splitlines()[2:]
    assert rows
    for row in rows:
        columns = row.split()
        # name type encoding emb sub uni object ID: every font embedded (PDF/A); the page text in the
        # families only static/css/report-pdf.css defines, the stamps in DejaVu Sans (static/fonts).
        assert re.search(r"\+(Report-Sans|Report-Mono|DejaVuSans)", columns[0]), row
        assert columns[-5] == "yes", row


def test_the_first_page_is_rendered_and_kept_as_an_artifact(signed_report: SignedReport, tmp_path: Path) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(signed_report.data)
    subprocess.run(
        [pdf_tool("pdftoppm"), "-png", "-r", "80", str(path), str(tmp_path / "page")], check=True, timeout=120
    )
    pages = sorted(tmp_path.glob("page-*.png"))
    assert len(pages) == signed_report.report.pages
    assert pages[0].stat().st_size > 20_000  # a page with text on it, not a blank one
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(pages[0], ARTIFACTS / "report-page-1.png")
    shutil.copyfile(path, ARTIFACTS / "report.pdf")
    text = subprocess.run(
        [pdf_tool("pdftotext"), "-layout", str(path), "-"], capture_output=True, text=True, check=True
    ).stdout
    first_page = text.split("\f")[0]
    assert "Summary" in first_page
    assert "The ethics committee approved Prediction audit" in first_page
    assert f"Page 1 of {signed_report.report.pages}" in first_page
    assert report_verify(data=signed_report.data).ok
