from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.db import models

from auditportal.fairness.documents.verdict_documents import PAIRED_COMPARISON, PREDICTION_AUDIT, TRIAL_VALIDATION
from auditportal.policies.models import FairnessPolicy


class DocumentKind(models.TextChoices):
    PREDICTION_AUDIT = PREDICTION_AUDIT, "Prediction audit"
    TRIAL_VALIDATION = TRIAL_VALIDATION, "Trial validation"
    PAIRED_COMPARISON = PAIRED_COMPARISON, "Paired comparison (challenger against champion)"


class FreezeTrigger(models.TextChoices):
    CREATED = "created", "Frozen when the audit or comparison was made"
    TRIAL_COMPLETED = "trial_completed", "Frozen when the trial completed"
    REQUESTED = "requested", "Frozen on request"


class VerdictDocument(models.Model):
    """The canonical JSON of one judged subject and its SHA-256 (docs/verdict-documents.md).

    Written once by evidence.services and never changed: there is no update or delete path, and the
    admin is read-only. A subject may have several documents (a validation frozen again under a newer
    policy is a new document); the same bytes for the same subject are stored once.

    The apps whose subjects are judged (audits, experiments, comparisons) build their documents and store
    them here; evidence sits below them, so it names their models by label rather than importing them.
    """

    kind = models.CharField(max_length=32, choices=DocumentKind.choices)
    prediction_audit = models.ForeignKey(
        "audits.PredictionAudit", on_delete=models.PROTECT, null=True, blank=True, related_name="verdict_documents"
    )
    trial = models.ForeignKey(
        "experiments.Trial", on_delete=models.PROTECT, null=True, blank=True, related_name="verdict_documents"
    )
    paired_comparison = models.ForeignKey(
        "comparisons.PairedComparison",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="verdict_documents",
    )
    # The validation step of a trial document; null for prediction audits.
    step = models.PositiveIntegerField(null=True, blank=True)
    schema_version = models.PositiveIntegerField()
    # The exact canonical JSON (UTF-8 text); its bytes hash to ``sha256``.
    canonical = models.TextField()
    sha256 = models.CharField(max_length=64, db_index=True)
    policy = models.ForeignKey(FairnessPolicy, on_delete=models.PROTECT, related_name="+")
    # Null when frozen automatically (the audit's creation, a trial's completion).
    frozen_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    frozen_at = models.DateTimeField(auto_now_add=True)
    trigger = models.CharField(max_length=16, choices=FreezeTrigger.choices)

    class Meta:
        ordering = ["-frozen_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(
                        kind=DocumentKind.PREDICTION_AUDIT,
                        prediction_audit__isnull=False,
                        trial__isnull=True,
                        paired_comparison__isnull=True,
                        step__isnull=True,
                    )
                    | models.Q(
                        kind=DocumentKind.TRIAL_VALIDATION,
                        prediction_audit__isnull=True,
                        trial__isnull=False,
                        paired_comparison__isnull=True,
                        step__isnull=False,
                    )
                    | models.Q(
                        kind=DocumentKind.PAIRED_COMPARISON,
                        prediction_audit__isnull=True,
                        trial__isnull=True,
                        paired_comparison__isnull=False,
                        step__isnull=True,
                    )
                ),
                name="evidence_document_exactly_one_subject",
            ),
            models.CheckConstraint(
                condition=models.Q(trigger__in=FreezeTrigger.values), name="evidence_document_trigger_valid"
            ),
            models.UniqueConstraint(
                fields=["prediction_audit", "sha256"],
                condition=models.Q(prediction_audit__isnull=False),
                name="evidence_document_unique_audit_content",
            ),
            models.UniqueConstraint(
                fields=["trial", "step", "sha256"],
                condition=models.Q(trial__isnull=False),
                name="evidence_document_unique_trial_content",
            ),
            models.UniqueConstraint(
                fields=["paired_comparison", "sha256"],
                condition=models.Q(paired_comparison__isnull=False),
                name="evidence_document_unique_comparison_content",
            ),
        ]

    def __str__(self) -> str:
        return f"Verdict document #{self.pk} ({self.get_kind_display()}, {self.short_hash})"

    @property
    def short_hash(self) -> str:
        return self.sha256[:12]

    @property
    def document(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.canonical)
        return value

    @property
    def headline(self) -> dict[str, Any] | None:
        """The document's headline (its verdict held at alpha over all judged families); None in
        documents of schema version 1, whose verdict is the worst over the families."""
        value = self.document.get("headline")
        return value if isinstance(value, dict) else None

    @property
    def canonical_bytes(self) -> bytes:
        return self.canonical.encode()
