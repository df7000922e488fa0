from __future__ import annotations

from django.conf import settings
from django.db import models

from auditportal.audits.models import PredictionAudit
from auditportal.experiments.models import Trial
from auditportal.policies.models import FairnessPolicy


class ComparisonSource(models.TextChoices):
    FILE = "file", "one file with both models' outputs"
    TRIALS = "trials", "two trials' checkpoints on their shared validation rows"
    AUDITS = "audits", "two prediction audits of the same file, the file given again"


class ComparisonState(models.TextChoices):
    # A file is compared in the request; two trials' checkpoints are run by a worker (pending until then).
    DONE = "done", "done"
    PENDING = "pending", "pending"
    FAILED = "failed", "failed"


class PairedComparison(models.Model):
    """Two models' predictions on the same rows, compared per group (docs/comparisons.md).

    Immutable, like a prediction audit: the file is not kept, only its SHA-256, the names of the two
    models (their columns), the parameters as given and the result (fairness/statistics/paired).
    """

    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    original_name = models.CharField(max_length=255)
    file_format = models.CharField(max_length=16)
    sha256 = models.CharField(max_length=64)
    size_bytes = models.BigIntegerField()
    num_rows = models.BigIntegerField()
    # The model in production (A) and the one that would replace it (B).
    champion = models.CharField(max_length=255)
    challenger = models.CharField(max_length=255)
    parameters = models.JSONField(default=dict)
    result = models.JSONField(default=dict)
    # Worst per-group verdict over the comparison (better / equivalent / inconclusive / worse).
    verdict = models.CharField(max_length=16, blank=True)
    policy = models.ForeignKey(FairnessPolicy, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    source = models.CharField(max_length=8, choices=ComparisonSource.choices, default=ComparisonSource.FILE)
    state = models.CharField(max_length=8, choices=ComparisonState.choices, default=ComparisonState.DONE)
    # Why a pending comparison failed (two trials whose rows could not be paired, a checkpoint unreadable).
    error = models.TextField(blank=True)
    # Two trials validated on the same dataset version (source "trials"); the file is the version's.
    champion_trial = models.ForeignKey(Trial, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    challenger_trial = models.ForeignKey(Trial, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    # Two prediction audits of the same file (source "audits"): each model's predictions taken as its
    # audit took them, from the file given again (its SHA-256 is both audits').
    champion_audit = models.ForeignKey(
        PredictionAudit, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    challenger_audit = models.ForeignKey(
        PredictionAudit, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(num_rows__gt=0) | ~models.Q(state="done"), name="comparisons_paired_rows_positive"
            ),
            models.CheckConstraint(
                condition=~models.Q(champion=models.F("challenger")), name="comparisons_paired_two_models"
            ),
            models.CheckConstraint(
                condition=models.Q(champion_audit__isnull=True, challenger_audit__isnull=True)
                | (
                    models.Q(champion_audit__isnull=False, challenger_audit__isnull=False)
                    & ~models.Q(champion_audit=models.F("challenger_audit"))
                ),
                name="comparisons_paired_two_audits",
            ),
        ]

    def __str__(self) -> str:
        return f"Paired comparison #{self.pk}: {self.challenger} against {self.champion}"
