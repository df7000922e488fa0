from __future__ import annotations

from django.contrib import admin

from auditportal.lib.admin import EvidenceAdmin
from auditportal.reports.models import CertificateAuthority, Report, ReportRevision, SigningCertificate

# Encrypted private keys are not shown: they are of no use to a reader and need not travel to a browser.


@admin.register(CertificateAuthority)
class CertificateAuthorityAdmin(EvidenceAdmin[CertificateAuthority]):
    list_display = ["id", "common_name", "fingerprint", "not_after", "created_at", "created_by"]
    exclude = ["encrypted_key_pem"]


@admin.register(SigningCertificate)
class SigningCertificateAdmin(EvidenceAdmin[SigningCertificate]):
    list_display = ["id", "kind", "common_name", "title", "holder", "authority", "fingerprint", "created_at"]
    list_filter = ["kind"]
    exclude = ["encrypted_key_pem"]


@admin.register(Report)
class ReportAdmin(EvidenceAdmin[Report]):
    list_display = ["id", "title", "subject_label", "pages", "context_sha256", "created_at"]
    search_fields = ["context_sha256", "title"]


@admin.register(ReportRevision)
class ReportRevisionAdmin(EvidenceAdmin[ReportRevision]):
    list_display = ["id", "report", "number", "kind", "signer", "sha256", "size_bytes", "created_at"]
    search_fields = ["sha256"]
