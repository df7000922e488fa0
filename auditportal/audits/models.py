from __future__ import annotations

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
