from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.db import models

from auditportal.datasets.models import DatasetVersion
from auditportal.experiments.models import Trial


class AttributionState(models.TextChoices):
    PENDING = "pending", "pending"
    DONE = "done", "done"
    FAILED = "failed", "failed"


class TrialAttribution(models.Model):
    """Why a trial's model has its gaps: per-group feature attributions and proxy features of its checkpoint
    on a stratified sample of its validation rows (docs/attributions.md).

    Evidence, append-only: written pending by ``services.attribution_request``, completed once (done with
    its summary as canonical JSON and that JSON's SHA-256, or failed with the reason) by
    ``services.attribution_compute``, and never changed or deleted after (on PostgreSQL a trigger refuses
    it, migration 0001; the admin is view only). One per inputs: the checkpoint's weights (the SHA-256 of
    its ``state_dict.pth``), the dataset version, the sample size and the seed; a failed one does not hold
    its inputs, so asking again computes anew (the failure stays, with its reason).
    """

    trial = models.ForeignKey(Trial, on_delete=models.PROTECT, related_name="attributions")
    # The checkpoint as the trial recorded it when asked (a local folder's path: shown to ML engineers and
    # administrators only, as the trial's), its folder's name, and the SHA-256 of its weights.
    checkpoint = models.CharField(max_length=500)
    checkpoint_name = models.CharField(max_length=255)
    checkpoint_sha256 = models.CharField(max_length=64)
    dataset_version = models.ForeignKey(DatasetVersion, on_delete=models.PROTECT, related_name="+")
    dataset_sha256 = models.CharField(max_length=64)
    sample_size = models.PositiveIntegerField()
    seed = models.PositiveIntegerField()
    # The method as the attributions file names it (Integrated Gradients, its library, steps, target).
    method = models.CharField(max_length=255, blank=True)
    state = models.CharField(max_length=8, choices=AttributionState.choices, default=AttributionState.PENDING)
    # Why a pending attribution failed (the checkpoint gone, the trainer's refusal, a time-out).
    error = models.TextField(blank=True)
    # The summary document (fairness/statistics/attributions.summarise, with its inputs) as canonical JSON
    # (fairness/documents/canonical.py), and its SHA-256; empty until done.
    canonical = models.TextField(blank=True)
    sha256 = models.CharField(max_length=64, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["checkpoint_sha256", "dataset_version", "sample_size", "seed"],
                condition=~models.Q(state="failed"),
                name="attributions_one_per_inputs",
            ),
            models.CheckConstraint(condition=models.Q(sample_size__gt=0), name="attributions_sample_positive"),
            models.CheckConstraint(
                condition=models.Q(state__in=["pending", "done", "failed"]), name="attributions_state_valid"
            ),
            models.CheckConstraint(
                condition=~models.Q(state="done") | (~models.Q(canonical="") & ~models.Q(sha256="")),
                name="attributions_done_has_document",
            ),
            models.CheckConstraint(
                condition=~models.Q(state="failed") | ~models.Q(error=""), name="attributions_failed_has_reason"
            ),
        ]

    def __str__(self) -> str:
        return f"Attribution #{self.pk} of trial {self.trial_id} ({self.state})"

    @property
    def document(self) -> dict[str, Any] | None:
        """The stored summary, parsed; None until done."""
        if not self.canonical:
            return None
        value: dict[str, Any] = json.loads(self.canonical)
        return value

    @property
    def short_hash(self) -> str:
        return self.sha256[:12]
