from __future__ import annotations

import hashlib
import re
from urllib.parse import unquote

import pytest
from cryptography import x509
from django.test import Client
from django.urls import reverse

from auditportal.accounts.models import User
from auditportal.approvals.models import ReviewRequest
from auditportal.audits.models import PredictionAudit
from auditportal.reports import services
from auditportal.reports.models import CertificateAuthority, Report
from tests.approvals.conftest import audit_request
from tests.factories import PASSWORD, client_for
from tests.reports.helpers import SignedReport, decided_context

__all__ = ["audit_request"]

pytestmark = pytest.mark.django_db


def test_anyone_may_download_every_authority_certificate(signed_report: SignedReport, erin: User) -> None:
    services.certificate_authority_create(actor=erin, reason="rotation")
    anonymous = Client()
    page = anonymous.get(reverse("reports:authorities"))
    assert page.status_code == 200
    authorities = list(CertificateAuthority.objects.order_by("-id"))
    assert len(authorities) == 2
    for authority in authorities:
        assert authority.fingerprint in page.content.decode()
        response = anonymous.get(reverse("reports:authority-pem", args=[authority.pk]))
        assert response.status_code == 200
        assert response["Content-Type"] == "application/x-pem-file"
        certificate = x509.load_pem_x509_certificate(response.content)
        assert certificate.fingerprint(certificate.signature_hash_algorithm).hex() == authority.fingerprint  # type: ignore[arg-type]
    assert anonymous.get(reverse("reports:authority-pem", args=[999])).status_code == 404


def test_members_see_reports_and_outsiders_do_not(signed_report: SignedReport, carol: User, oscar: User) -> None:
    report = signed_report.report
    member = client_for(carol)
    assert report.title in member.get(reverse("reports:list")).content.decode()
    detail = member.get(reverse("reports:detail", args=[report.pk]))
    assert detail.status_code == 200
    for revision in signed_report.revisions:
        assert revision.sha256 in detail.content.decode()
    outsider = client_for(oscar)
    assert report.title not in outsider.get(reverse("reports:list")).content.decode()
    assert outsider.get(reverse("reports:detail", args=[report.pk])).status_code == 404
    assert outsider.get(reverse("reports:revision", args=[report.pk, 1])).status_code == 404


def test_a_revision_downloads_as_stored(signed_report: SignedReport, carol: User) -> None:
    newest = signed_report.newest
    response = client_for(carol).get(reverse("reports:revision", args=[signed_report.report.pk, newest.number]))
    assert response.status_code == 200
    data = b"".join(response.streaming_content)  # type: ignore[attr-defined]
    assert hashlib.sha256(data).hexdigest() == newest.sha256 == response["X-Content-SHA256"]
    assert response["Content-Type"] == "application/pdf"


def _file_names(response: object) -> tuple[str, str]:
    """The ASCII fallback and the UTF-8 name of a download's Content-Disposition."""
    header = response["Content-Disposition"]  # type: ignore[index]
    match = re.fullmatch(r"attachment; filename=\"([A-Za-z0-9._-]+)\"; filename\*=UTF-8''([A-Za-z0-9._~%-]+)", header)
    assert match is not None, header
    return match.group(1), unquote(match.group(2), errors="strict")


def test_a_report_without_a_request_downloads_under_its_number(signed_report: SignedReport, carol: User) -> None:
    report = signed_report.report
    response = client_for(carol).get(reverse("reports:revision", args=[report.pk, 2]))
    assert _file_names(response) == (f"report-{report.pk}-r2.pdf", f"report-{report.pk}-r2.pdf")


@pytest.mark.parametrize(
    ("title", "unicode", "ascii"),
    [
        ("Credit model v5", "credit-model-v5-", "credit-model-v5-"),
        ('Say "hi"\r\nContent-Type: text/html', "say-hi-content-type-texthtml-", "say-hi-content-type-texthtml-"),
        ("../../etc/passwd", "etcpasswd-", "etcpasswd-"),
        ("Modèle de crédit — 信用模型", "modèle-de-crédit-信用模型-", "modele-de-credit-"),
        ("!!! ???", "", ""),
        ("A" * 290, "a" * 60 + "-", "a" * 60 + "-"),
    ],
)
def test_a_revision_downloads_under_a_name_made_from_its_review_request(
    signed_report: SignedReport, audit_request: ReviewRequest, carol: User, title: str, unicode: str, ascii: str
) -> None:
    report = signed_report.report
    Report.objects.filter(pk=report.pk).update(review_request=audit_request, request_outcome="approved", title=title)
    response = client_for(carol).get(reverse("reports:revision", args=[report.pk, 3]))
    assert response.status_code == 200
    prefix = f"review-request-{audit_request.pk}-"
    assert _file_names(response) == (f"{prefix}{ascii}approved-r3.pdf", f"{prefix}{unicode}approved-r3.pdf")


def test_a_signatory_signs_on_the_page_with_their_password(
    audit: PredictionAudit, member_dave: User, member_fay: User
) -> None:
    report = services.report_generate(context=decided_context(audit, None, [member_dave]))
    page = client_for(member_dave).get(reverse("reports:detail", args=[report.pk])).content.decode()
    assert 'id="sign-form"' in page
    # Someone who is not a signatory gets no form.
    assert (
        'id="sign-form"' not in client_for(member_fay).get(reverse("reports:detail", args=[report.pk])).content.decode()
    )
    client = client_for(member_dave)
    detail = reverse("reports:detail", args=[report.pk])
    wrong = client.post(reverse("reports:sign", args=[report.pk]), {"password": "not it"}, follow=True)
    # Back on the report's page (303), not on the POST-only signing URL; the password is not kept.
    assert wrong.redirect_chain == [(detail + "#sign-form", 303)]
    assert "That password is not correct; the report was not signed." in wrong.content.decode()
    assert "not it" not in wrong.content.decode()
    assert report.revisions.count() == 1
    right = client.post(reverse("reports:sign", args=[report.pk]), {"password": PASSWORD})
    assert right.status_code == 302
    assert report.revisions.count() == 2
    after = client.get(reverse("reports:detail", args=[report.pk])).content.decode()
    assert "signed in revision 2" in after
    assert 'id="sign-form"' not in after


def test_a_non_signatory_posting_the_form_is_told_why(
    audit: PredictionAudit, member_dave: User, member_fay: User
) -> None:
    report = services.report_generate(context=decided_context(audit, None, [member_dave]))
    response = client_for(member_fay).post(
        reverse("reports:sign", args=[report.pk]), {"password": PASSWORD}, follow=True
    )
    assert response.redirect_chain[-1][1] == 303
    assert f"fay is not among the signatories of report #{report.pk}." in response.content.decode()
    assert report.revisions.count() == 1


def test_the_verify_page_names_a_missing_file(carol: User) -> None:
    response = client_for(carol).post(reverse("reports:verify"), {})
    assert response.status_code == 400
    assert "This field is required." in response.content.decode()
