"""Verifying a report: the command, the page and the API find a good report good, and each kind of
tampering (a flipped byte, an appended revision that draws on a page, a removed signature) bad."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from auditportal.accounts.models import User
from auditportal.fairness.documents.report_context import ReportContext
from auditportal.reports import services
from auditportal.reports.rendering import render
from auditportal.reports.selectors import report_verify
from tests.database import subprocess_database_url
from tests.factories import client_for
from tests.reports import tampering
from tests.reports.helpers import SignedReport

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]

TAMPERINGS: dict[str, Callable[[bytes], bytes]] = {
    "flipped byte": tampering.flip_byte,
    "drawn on a page": tampering.draw_on_page,
    "signature removed": lambda data: tampering.remove_signature(data, "Member2"),
}


def _command(path: Path, *args: str) -> tuple[str, str | None]:
    out = io.StringIO()
    try:
        call_command("verify_report", str(path), *args, stdout=out)
    except CommandError as exc:
        return out.getvalue(), str(exc)
    return out.getvalue(), None


def test_the_command_passes_a_signed_report_and_names_every_signature(
    signed_report: SignedReport, tmp_path: Path
) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(signed_report.data)
    out, error = _command(path)
    assert error is None, out
    assert "Signature 1 of 3: field Organisation (certification)" in out
    assert "signer:   dave (Ethics-committee member, Bias audit portal)" in out
    assert "signer:   Fay Okafor (Ethics-committee member, Bias audit portal)" in out
    assert out.count("valid:    yes") == 3
    assert out.count("trusted:  yes") == 3
    assert out.count("modified after it: yes: form filling and signatures (allowed)") == 2
    assert f"revision 3 of 3 of report #{signed_report.report.pk}" in out
    assert out.rstrip().endswith("Result: OK")


@pytest.mark.slow  # about 6 s: two runs of manage.py, and a report of its own
@pytest.mark.django_db(transaction=True)
def test_the_command_exits_non_zero_on_failure(signed_report_committed: SignedReport, tmp_path: Path) -> None:
    # As CI runs it: a process of its own, reading the test database (committed: transactional test).
    good, bad = tmp_path / "report.pdf", tmp_path / "tampered.pdf"
    good.write_bytes(signed_report_committed.data)
    bad.write_bytes(tampering.flip_byte(signed_report_committed.data))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "auditportal.settings.test",
        "DATABASE_URL": subprocess_database_url(),
        "REPORT_STORAGE_DIR": str(settings.REPORT_STORAGE_DIR),
    }

    def run(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", "verify_report", str(path)],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            cwd=REPO,
            env=env,
        )

    passed, failed = run(good), run(bad)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert passed.stdout.rstrip().endswith("Result: OK")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "Result: FAILED" in failed.stdout
    assert "verification failed: signature 'Organisation': the signed bytes were changed" in failed.stderr


@pytest.mark.parametrize("kind", list(TAMPERINGS))
def test_the_command_detects_tampering(kind: str, signed_report: SignedReport, tmp_path: Path) -> None:
    path = tmp_path / "tampered.pdf"
    path.write_bytes(TAMPERINGS[kind](signed_report.data))
    out, error = _command(path)
    assert error is not None, out
    assert "Result: FAILED" in out
    assert "no stored report has this file's SHA-256" in out or "starts with revision" in out


def test_a_flipped_byte_breaks_every_signature(signed_report: SignedReport) -> None:
    result = report_verify(data=tampering.flip_byte(signed_report.data))
    assert result.pdf.error is None
    assert [check.intact for check in result.pdf.signatures] == [False, False, False]
    assert all("digest mismatch" in " ".join(check.problems) for check in result.pdf.signatures)
    assert result.match is None


def test_a_revision_that_draws_on_a_page_is_a_modification_no_signature_allows(signed_report: SignedReport) -> None:
    result = report_verify(data=tampering.draw_on_page(signed_report.data))
    checks = result.pdf.signatures
    assert all(check.intact and check.valid and check.trusted for check in checks)
    assert all(check.modified_after and not check.modification_allowed for check in checks)
    assert "the file was modified after this signature (other changes), which is not allowed" in checks[-1].problems
    # The signed part is the stored newest revision; what follows is not the portal's.
    assert result.match is not None
    assert result.match.revision == 3
    assert not result.match.exact
    assert any("bytes were added after it" in problem for problem in result.problems)


def test_a_removed_signature_is_found(signed_report: SignedReport) -> None:
    result = report_verify(data=tampering.remove_signature(signed_report.data, "Member2"))
    assert [check.field for check in result.pdf.signatures] == ["Organisation", "Member1"]
    assert not result.ok
    assert all(not check.ok for check in result.pdf.signatures)


def test_an_earlier_revision_is_genuine_but_not_the_newest(signed_report: SignedReport) -> None:
    result = report_verify(data=signed_report.revisions[1].path.read_bytes())
    assert all(check.ok for check in result.pdf.signatures)
    assert result.problems == [
        f"the file is revision 2 of report #{signed_report.report.pk}; the portal holds a newer revision 3 "
        "with more signatures"
    ]


def test_a_pdf_without_signatures_and_a_file_that_is_no_pdf_fail(signed_report: SignedReport) -> None:
    assert report_verify(data=b"%PDF-1.7\nnot really\n").pdf.error is not None
    assert not report_verify(data=b"hello").ok
    context = ReportContext.from_json(signed_report.report.context)
    unsigned = report_verify(data=render(context).pdf)
    assert unsigned.problems == [
        "the file has no signature",
        "the file is not a report this portal issued: no stored report has its SHA-256",
    ]


def _post_page(client: Client, name: str, data: bytes) -> str:
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = client.post(reverse("reports:verify"), {"file": SimpleUploadedFile(name, data, "application/pdf")})
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


def test_the_page_verifies_a_good_report(signed_report: SignedReport, member_dave: User) -> None:
    page = _post_page(client_for(member_dave), "report.pdf", signed_report.data)
    assert 'id="result-verdict">VERIFIED<' in page
    assert f"report #{signed_report.report.pk}</a>" in page
    assert page.count('<span class="badge check-yes">yes</span>') == 6


@pytest.mark.parametrize("kind", list(TAMPERINGS))
def test_the_page_and_the_api_detect_tampering(kind: str, signed_report: SignedReport, member_dave: User) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    data = TAMPERINGS[kind](signed_report.data)
    client = client_for(member_dave)
    page = _post_page(client, "tampered.pdf", data)
    assert 'id="result-verdict">FAILED<' in page
    response = client.post(
        reverse("api-report-verify"), {"file": SimpleUploadedFile("tampered.pdf", data, "application/pdf")}
    )
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is False
    assert body["problems"]
    assert body["file"]["name"] == "tampered.pdf"


def test_the_api_passes_a_good_report(signed_report: SignedReport, member_fay: User) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = client_for(member_fay).post(
        reverse("api-report-verify"), {"file": SimpleUploadedFile("r.pdf", signed_report.data, "application/pdf")}
    )
    body = response.json()
    assert response.status_code == 200
    assert body["ok"] is True, json.dumps(body, indent=1)
    assert [item["signer"] for item in body["signatures"]] == ["Bias audit portal reports", "dave", "Fay Okafor"]
    assert [item["role"] for item in body["signatures"]] == [
        "Organisation",
        "Ethics-committee member",
        "Ethics-committee member",
    ]
    assert body["report"] == {
        "id": signed_report.report.pk,
        "title": signed_report.report.title,
        "subject": signed_report.report.subject_label,
        "revision": 3,
        "latest_revision": 3,
        "exact": True,
        # Made from code, not from a review request's decision.
        "review_request": None,
        "decision": None,
    }


def test_an_account_without_a_role_cannot_verify(oscar: User, signed_report: SignedReport) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    client = client_for(oscar)
    assert client.get(reverse("reports:verify")).status_code == 403
    response = client.post(
        reverse("api-report-verify"), {"file": SimpleUploadedFile("r.pdf", signed_report.data, "application/pdf")}
    )
    assert response.status_code == 403


def test_a_report_signed_before_a_key_rotation_still_verifies(
    signed_report: SignedReport, erin: User, audit: object, member_dave: User
) -> None:
    services.certificate_authority_create(actor=erin, reason="yearly rotation")
    services.organisation_certificate_create(actor=erin, reason="key thought exposed")
    assert report_verify(data=signed_report.data).ok
