from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from auditportal.fairness.statistics import stats

# A larger committee quorum than this is a typing mistake, not a policy.
MAX_APPROVAL_QUORUM = 20
# The largest value of min_group_size's column (a positive integer column on PostgreSQL and SQLite alike).
MAX_MIN_GROUP_SIZE = 2**31 - 1


class ReferenceRule(models.TextChoices):
    LARGEST = "largest", "The largest group (most rows) of each attribute"


class FairnessPolicy(models.Model):
    """One version of the rules verdicts are judged by. Immutable: a change is a new version.

    The active policy is the one with the highest version; going back to earlier values is a new
    version with those values, so the history only ever grows.
    """

    version = models.PositiveIntegerField(unique=True)
    tolerance = models.FloatField(help_text="δ: the largest acceptable gap between a group and the reference.")
    alpha = models.FloatField(help_text="Familywise error rate per metric and attribute.")
    # The comparisons that count towards a verdict (a subset of fairness.statistics.stats.COMPARED).
    metrics = models.JSONField(default=list)
    reference_rule = models.CharField(max_length=32, choices=ReferenceRule.choices, default=ReferenceRule.LARGEST)
    # A group smaller than this cannot PASS (it can still FAIL); null: no minimum.
    min_group_size = models.PositiveIntegerField(null=True, blank=True)
    # How many distinct ethics-committee members must approve a review request, or a waiver
    # (docs/approvals.md); not part of what a verdict is judged by, so not in as_document().
    approval_quorum = models.PositiveSmallIntegerField(
        default=2, help_text="Distinct committee members whose approval a review request or a waiver needs."
    )
    reason = models.TextField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-version"]
        verbose_name_plural = "fairness policies"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(tolerance__gte=0, tolerance__lt=1), name="policies_tolerance_range"
            ),
            models.CheckConstraint(condition=models.Q(alpha__gt=0, alpha__lte=0.5), name="policies_alpha_range"),
            models.CheckConstraint(condition=models.Q(version__gte=1), name="policies_version_positive"),
            models.CheckConstraint(
                condition=models.Q(approval_quorum__gte=1, approval_quorum__lte=MAX_APPROVAL_QUORUM),
                name="policies_approval_quorum_range",
            ),
        ]

    def __str__(self) -> str:
        return f"Fairness policy v{self.version} (δ={self.tolerance:g}, α={self.alpha:g})"

    def as_document(self) -> dict[str, Any]:
        """The policy as verdict documents and the JSON APIs carry it (no wall-clock time inside)."""
        return {
            "version": self.version,
            "tolerance": self.tolerance,
            "alpha": self.alpha,
            "metrics": list(self.metrics),
            "reference_rule": self.reference_rule,
            "min_group_size": self.min_group_size,
        }

    def as_json(self) -> dict[str, Any]:
        """Every value of the version: what verdicts are judged by, and the approval quorum."""
        return {**self.as_document(), "approval_quorum": self.approval_quorum}


DEFAULT_METRICS: tuple[str, ...] = tuple(stats.COMPARED)
