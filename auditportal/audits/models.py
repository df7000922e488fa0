from __future__ import annotations

import uuid
from pathlib import Path

from django.conf import settings
from django.db import models

from auditportal.fairness.statistics.stats import Verdict
from auditportal.policies.models import FairnessPolicy


class PredictionAudit(models.Model):
    """One audit of an existing model's predictions. Immutable; the uploaded file is not kept."""

    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    original_name = models.CharField(max_length=255)
    file_format = models.CharField(max_length=16)
    sha256 = models.CharField(max_length=64)
    size_bytes = models.BigIntegerField()
    num_rows = models.BigIntegerField()
    # The parameters as given (label, prediction or score + threshold, attributes, tolerance, alpha...).
    parameters = models.JSONField(default=dict)
    # The full audit document (docs/audit-json.md), exactly as the API and the CLI return it.
    result = models.JSONField(default=dict)
    # Worst verdict over all attributes; blank when nothing could be compared (a single group).
    verdict = models.CharField(max_length=16, choices=Verdict.choices(), blank=True)
    # The policy version it was judged under; null only for audits made before policies were data
    # (their tolerance and alpha are in ``parameters``).
    policy = models.ForeignKey(FairnessPolicy, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    # Evidence is never deleted: an audit that should no longer be relied on is retired, with who,
    # when and why (audits.services.prediction_audit_retire).
    retired_at = models.DateTimeField(null=True, blank=True)
    retired_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    retired_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=models.Q(num_rows__gt=0), name="audits_prediction_rows_positive"),
            models.CheckConstraint(
                condition=models.Q(verdict__in=["", *(verdict.value for verdict in Verdict)]),
                name="audits_prediction_verdict_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(retired_at__isnull=True, retired_by__isnull=True, retired_reason="")
                | (models.Q(retired_at__isnull=False) & ~models.Q(retired_reason="")),
                name="audits_prediction_retirement_complete",
            ),
        ]

    def __str__(self) -> str:
        return f"Prediction audit #{self.pk} of {self.original_name}"

    @property
    def is_retired(self) -> bool:
        return self.retired_at is not None

    @property
    def attribute_names(self) -> list[str]:
        return list(self.result.get("attributes", {}))


class QueuedStatus(models.TextChoices):
    QUEUED = "queued", "Waiting for a worker"
    RUNNING = "running", "Auditing"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class QueuedPredictionAudit(models.Model):
    """A prediction audit of a large file, run by a worker (audits.services, "Large files").

    The web request keeps the uploaded file and the parameters given (``queued``); a worker audits
    it (``running``) and, in the transaction that stores the audit, names it here (``done``), or
    records why it could not (``failed``). The file is removed either way: the audit keeps only its
    SHA-256, as an audit made in the web request does.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    original_name = models.CharField(max_length=255)
    storage_path = models.CharField(max_length=500)
    size_bytes = models.BigIntegerField()
    # The SHA-256 taken while the upload streamed in (blank: the worker hashes the file).
    sha256 = models.CharField(max_length=64, blank=True)
    # AuditSpec.parameters() of what was given; the policy in force when the worker runs it decides
    # tolerance, alpha, metrics and minimum group size, as for an audit in the web request.
    parameters = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=QueuedStatus.choices, default=QueuedStatus.QUEUED)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    audit = models.OneToOneField(
        PredictionAudit, on_delete=models.PROTECT, null=True, blank=True, related_name="queued_from"
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=QueuedStatus.values), name="audits_queued_status_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(status=QueuedStatus.DONE, audit__isnull=False)
                | (~models.Q(status=QueuedStatus.DONE) & models.Q(audit__isnull=True)),
                name="audits_queued_audit_iff_done",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.original_name} (queued audit)"

    @property
    def path(self) -> Path:
        return Path(settings.DATASET_STORAGE_DIR) / self.storage_path

    @property
    def is_working(self) -> bool:
        return self.status in (QueuedStatus.QUEUED, QueuedStatus.RUNNING)


class WhatIf(models.Model):
    """A scored prediction file prepared once for what-if thresholds (docs/whatif.md).

    The file itself is not kept, as for an audit: only its SHA-256 and, in the private store, its
    scores sorted per cell and label (``scores_path``, a .npy file whose SHA-256 is
    ``prepared_sha256``), with what is needed to read them (``prepared``: fairness/statistics/whatif
    ``Prepared.meta()``). Immutable once ``done``. A large file is prepared by a worker (``queued``,
    ``running``); its upload is kept at ``upload_path`` meanwhile and removed either way.
    """

    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    original_name = models.CharField(max_length=255)
    # The SHA-256 of the scored file (taken as the upload streamed in, or when it was read).
    sha256 = models.CharField(max_length=64, blank=True)
    size_bytes = models.BigIntegerField()
    num_rows = models.BigIntegerField(null=True, blank=True)
    file_format = models.CharField(max_length=16, blank=True)
    # AuditSpec.parameters() of what was given; the threshold is where the what-if starts.
    parameters = models.JSONField(default=dict)
    policy = models.ForeignKey(FairnessPolicy, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=16, choices=QueuedStatus.choices, default=QueuedStatus.QUEUED)
    error = models.TextField(blank=True)
    upload_path = models.CharField(max_length=500, blank=True)
    prepared = models.JSONField(default=dict, blank=True)
    scores_path = models.CharField(max_length=500, blank=True)
    prepared_sha256 = models.CharField(max_length=64, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=QueuedStatus.values), name="audits_whatif_status_valid"
            ),
            models.CheckConstraint(
                condition=~models.Q(status=QueuedStatus.DONE) | ~models.Q(prepared_sha256=""),
                name="audits_whatif_done_is_prepared",
            ),
        ]

    def __str__(self) -> str:
        return f"What-if #{self.pk} of {self.original_name}"

    @property
    def is_ready(self) -> bool:
        return self.status == QueuedStatus.DONE

    @property
    def scores_file(self) -> Path:
        return Path(settings.DATASET_STORAGE_DIR) / self.scores_path

    @property
    def upload_file(self) -> Path:
        return Path(settings.DATASET_STORAGE_DIR) / self.upload_path
