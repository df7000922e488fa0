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
    # Who made the version: for a loosening, the administrator who proposed it ...
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    # ... and the different administrator who confirmed it (two-person rule, docs/governance.md);
    # null for a version that loosens nothing, which applies at once.
    confirmed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    proposal = models.OneToOneField(
        "PolicyProposal", on_delete=models.PROTECT, null=True, blank=True, related_name="policy"
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


# What the seeded version 1 judges: equal opportunity, the TPR (recall) gap, which is the EOD the
# trainer reports and optimises (trainer/bias.py). The other metrics are computed and shown, not judged,
# until an administrator adds them in a new version (adding one tightens, so it applies at once);
# docs/governance.md, "What the default policy judges". Existing databases keep their versions.
DEFAULT_METRICS: tuple[str, ...] = ("tpr",)
# Every metric a policy may judge (a version judging all of them is the strictest choice).
ALL_METRICS: tuple[str, ...] = tuple(stats.COMPARED)

# The values a version holds besides its number: what a proposal proposes.
POLICY_VALUES: tuple[str, ...] = (
    "tolerance",
    "alpha",
    "metrics",
    "reference_rule",
    "min_group_size",
    "approval_quorum",
)


class PolicyProposal(models.Model):
    """A next version that loosens the policy (rules.policy_loosenings), waiting for a different
    administrator's confirmation (the two-person rule, docs/governance.md).

    Append-only: the proposed values are never edited. Its confirmation or withdrawal is a new
    ``PolicyProposalClosure`` row (one per proposal) with its event; a confirmation also makes the
    version. A proposal made against a version that is no longer the active one is stale and cannot
    be confirmed.
    """

    # The active version when it was proposed: what it loosens, and what must still be active.
    base = models.ForeignKey(FairnessPolicy, on_delete=models.PROTECT, related_name="+")
    tolerance = models.FloatField()
    alpha = models.FloatField()
    metrics = models.JSONField(default=list)
    reference_rule = models.CharField(max_length=32, choices=ReferenceRule.choices, default=ReferenceRule.LARGEST)
    min_group_size = models.PositiveIntegerField(null=True, blank=True)
    approval_quorum = models.PositiveSmallIntegerField()
    # The names of the values that loosen (rules.policy_loosenings(base, these values)).
    loosens = models.JSONField(default=list)
    reason = models.TextField()
    proposed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    proposed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-pk"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(tolerance__gte=0, tolerance__lt=1), name="policies_proposal_tolerance_range"
            ),
            models.CheckConstraint(
                condition=models.Q(alpha__gt=0, alpha__lte=0.5), name="policies_proposal_alpha_range"
            ),
            models.CheckConstraint(
                condition=models.Q(approval_quorum__gte=1, approval_quorum__lte=MAX_APPROVAL_QUORUM),
                name="policies_proposal_approval_quorum_range",
            ),
        ]

    def __str__(self) -> str:
        return f"Fairness policy proposal #{self.pk}"

    def values(self) -> dict[str, Any]:
        """The proposed values, as FairnessPolicy.as_json() names them (without the version)."""
        return {name: getattr(self, name) for name in POLICY_VALUES}


class ProposalOutcome(models.TextChoices):
    CONFIRMED = "confirmed", "confirmed"
    WITHDRAWN = "withdrawn", "withdrawn"


class PolicyProposalClosure(models.Model):
    """How a proposal ended: confirmed by a different administrator (the version it made links back
    through FairnessPolicy.proposal), or withdrawn. One per proposal: a second is refused."""

    proposal = models.OneToOneField(PolicyProposal, on_delete=models.PROTECT, related_name="closure")
    outcome = models.CharField(max_length=16, choices=ProposalOutcome.choices)
    closed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    closed_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"Proposal #{self.proposal_id} {self.outcome}"
