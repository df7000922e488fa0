"""Signed audit reports and the keys that sign them (docs/reports.md).

All four models are append-only: services create rows and never update or delete them. A rotation
is a new authority or certificate beside the old ones, which stay (earlier reports' chains are
served from them); a member's signature is a new revision beside the one it was added to.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import models


class CertificateAuthority(models.Model):
    """A root of the portal's internal certificate authority. The newest one issues new certificates;
    every one stays trusted for verifying what it issued."""

    common_name = models.CharField(max_length=200)
    organisation = models.CharField(max_length=200)
    certificate_pem = models.TextField()
    # SHA-256 of the certificate's DER bytes (hex), as `openssl x509 -fingerprint -sha256` shows it.
    fingerprint = models.CharField(max_length=64, unique=True)
    # PKCS #8, encrypted with REPORT_KEY_PASSPHRASE; never stored in clear.
    encrypted_key_pem = models.TextField()
    not_before = models.DateTimeField()
    not_after = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "certificate authorities"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(encrypted_key_pem__startswith="-----BEGIN ENCRYPTED PRIVATE KEY-----"),
                name="reports_authority_key_encrypted",
            ),
        ]

    def __str__(self) -> str:
        return f"CA #{self.pk} {self.common_name} ({self.fingerprint[:16]})"


class CertificateKind(models.TextChoices):
    ORGANISATION = "organisation", "Organisation (certifies reports)"
    MEMBER = "member", "Committee member"


class SigningCertificate(models.Model):
    """A signing key and its certificate, issued by one authority: the organisation's (newest one
    certifies new reports) or a committee member's (issued when they first sign)."""

    kind = models.CharField(max_length=16, choices=CertificateKind.choices)
    authority = models.ForeignKey(CertificateAuthority, on_delete=models.PROTECT, related_name="certificates")
    holder = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    common_name = models.CharField(max_length=200)
    title = models.CharField(max_length=200)
    certificate_pem = models.TextField()
    fingerprint = models.CharField(max_length=64, unique=True)
    serial = models.CharField(max_length=64)
    encrypted_key_pem = models.TextField()
    not_before = models.DateTimeField()
    not_after = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind=CertificateKind.ORGANISATION, holder__isnull=True)
                | models.Q(kind=CertificateKind.MEMBER, holder__isnull=False),
                name="reports_certificate_holder_matches_kind",
            ),
            models.CheckConstraint(
                condition=models.Q(encrypted_key_pem__startswith="-----BEGIN ENCRYPTED PRIVATE KEY-----"),
                name="reports_certificate_key_encrypted",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} certificate #{self.pk} {self.common_name} ({self.fingerprint[:16]})"


class Report(models.Model):
    """A signed audit report: what it says (its context, as canonical JSON) and, in its revisions, the
    PDF files. Generated once per context (the context's SHA-256 is unique) and never regenerated."""

    title = models.CharField(max_length=300)
    subject_label = models.CharField(max_length=300)
    # The report context (auditportal/fairness/documents/report_context.py) as canonical JSON, and its SHA-256.
    context_json = models.TextField()
    context_sha256 = models.CharField(max_length=64, unique=True)
    pages = models.PositiveIntegerField()
    # How many people the context names to sign (its signatories), beside it as the title is, so that
    # the API filters reports by their signing state without reading every context.
    signatory_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    # The review request whose decision this report records (none for reports made from code before
    # the approvals wiring), and that decision: approved, rejected, or revoked (a revoked approval
    # adds a new report; the approved one stays). One report per request and outcome.
    review_request = models.ForeignKey(
        "approvals.ReviewRequest", on_delete=models.PROTECT, null=True, blank=True, related_name="reports"
    )
    request_outcome = models.CharField(max_length=16, blank=True)
    # A monitoring report (docs/monitoring.md, "Monitoring reports"): the deployment and the period
    # [period_start, period_end) it covers; one report per deployment and period. Null for the report
    # of a review request's decision.
    deployment = models.ForeignKey(
        "monitoring.Deployment", on_delete=models.PROTECT, null=True, blank=True, related_name="reports"
    )
    period_start = models.DateTimeField(null=True, blank=True)
    period_end = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["review_request", "request_outcome"],
                condition=models.Q(review_request__isnull=False),
                name="reports_report_one_per_request_outcome",
            ),
            models.CheckConstraint(
                condition=models.Q(review_request__isnull=True, request_outcome="")
                | models.Q(review_request__isnull=False, request_outcome__in=["approved", "rejected", "revoked"]),
                name="reports_report_outcome_with_request",
            ),
            models.UniqueConstraint(
                fields=["deployment", "period_start", "period_end"],
                condition=models.Q(deployment__isnull=False),
                name="reports_report_one_per_deployment_period",
            ),
            models.CheckConstraint(
                condition=models.Q(deployment__isnull=True, period_start__isnull=True, period_end__isnull=True)
                | models.Q(
                    deployment__isnull=False,
                    review_request__isnull=True,
                    period_start__lt=models.F("period_end"),
                ),
                name="reports_report_period_with_deployment",
            ),
        ]

    def __str__(self) -> str:
        return f"Report #{self.pk}: {self.title}"

    @property
    def is_monitoring(self) -> bool:
        return self.deployment_id is not None

    @property
    def context(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.context_json)
        return value


class RevisionKind(models.TextChoices):
    CERTIFIED = "certified", "Certified by the organisation"
    MEMBER_SIGNED = "member_signed", "Signed by a committee member"


class ReportRevision(models.Model):
    """One stored PDF of a report: number 1 is the certified file, each later one adds one member's
    signature to the one before as an incremental revision. The file is written once, never again."""

    report = models.ForeignKey(Report, on_delete=models.PROTECT, related_name="revisions")
    number = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=RevisionKind.choices)
    # The signature field this revision signed (the organisation's, or the member's).
    field_name = models.CharField(max_length=64)
    signer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    certificate = models.ForeignKey(SigningCertificate, on_delete=models.PROTECT, related_name="+")
    sha256 = models.CharField(max_length=64, unique=True)
    size_bytes = models.PositiveBigIntegerField()
    # Relative to REPORT_STORAGE_DIR.
    file_name = models.CharField(max_length=255, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["report", "number"]
        constraints = [
            models.UniqueConstraint(fields=["report", "number"], name="reports_revision_unique_number"),
            models.UniqueConstraint(fields=["report", "field_name"], name="reports_revision_unique_field"),
            models.CheckConstraint(condition=models.Q(number__gte=1), name="reports_revision_number_positive"),
            models.CheckConstraint(
                condition=models.Q(number=1, kind=RevisionKind.CERTIFIED, signer__isnull=True)
                | models.Q(number__gt=1, kind=RevisionKind.MEMBER_SIGNED, signer__isnull=False),
                name="reports_revision_kind_matches_number",
            ),
        ]

    def __str__(self) -> str:
        return f"Report #{self.report_id} revision {self.number} ({self.sha256[:12]})"

    @property
    def path(self) -> Path:
        return Path(settings.REPORT_STORAGE_DIR) / self.file_name
