"""Review requests, the committee's votes, waivers and comments (docs/approvals.md). The gate's API
tokens are accounts.ApiToken.

Evidence here is append-only: votes, waiver votes, acknowledgements, recommendations and comments are
written once by approvals.services and never updated or deleted; a changed vote is a new row (the
current vote of a member is their latest in the request's current round). A request's ``state`` and a
waiver's ``state`` are kept on their rows for reading; every change of either is an activity event
written in the same transaction, which is where their history lives.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from auditportal.accounts.models import Role
from auditportal.audits.models import PredictionAudit
from auditportal.comparisons.models import PairedComparison
from auditportal.evidence.models import VerdictDocument
from auditportal.experiments.models import Trial
from auditportal.policies.models import FairnessPolicy


class RequestState(models.TextChoices):
    DRAFT = "draft", "Draft"
    SUBMITTED = "submitted", "Submitted"
    IN_REVIEW = "in_review", "In review"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    WITHDRAWN = "withdrawn", "Withdrawn"
    REVOKED = "revoked", "Revoked"
    # The evidence it rests on was retired (or, later, monitoring found a problem): final; the model
    # comes back through a new request (services.approval_suspend, ApprovalSuspension).
    SUSPENDED = "suspended", "Suspended"


# A model identifier has at most one request in these states: the gate's answer is never ambiguous.
OPEN_STATES = (RequestState.DRAFT, RequestState.SUBMITTED, RequestState.IN_REVIEW, RequestState.APPROVED)
FINAL_STATES = (RequestState.REJECTED, RequestState.WITHDRAWN, RequestState.REVOKED, RequestState.SUSPENDED)


class SubjectKind(models.TextChoices):
    PREDICTION_AUDIT = "prediction_audit", "Prediction audit"
    TRIAL = "trial", "Trial (with its checkpoint)"
    # "Challenger B replaces champion A": the model approved is the challenger.
    PAIRED_COMPARISON = "paired_comparison", "Paired comparison (challenger replaces champion)"


class ReviewRequest(models.Model):
    """A request to approve one model: its subject, the frozen verdict documents that judge it and the
    fairness policy version they were judged under."""

    title = models.CharField(max_length=200)
    intended_use = models.TextField()
    # What a deployment pipeline asks the gate about: a Determined checkpoint UUID, ``name:version``...
    model_identifier = models.CharField(max_length=255, db_index=True)
    subject_kind = models.CharField(max_length=32, choices=SubjectKind.choices)
    prediction_audit = models.ForeignKey(
        PredictionAudit, on_delete=models.PROTECT, null=True, blank=True, related_name="review_requests"
    )
    trial = models.ForeignKey(Trial, on_delete=models.PROTECT, null=True, blank=True, related_name="review_requests")
    paired_comparison = models.ForeignKey(
        PairedComparison, on_delete=models.PROTECT, null=True, blank=True, related_name="review_requests"
    )
    # The trial's checkpoint when the request was made (a UUID on Determined, a folder locally).
    checkpoint = models.CharField(max_length=500, blank=True)
    documents = models.ManyToManyField(VerdictDocument, related_name="review_requests")
    policy = models.ForeignKey(FairnessPolicy, on_delete=models.PROTECT, related_name="+")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    state = models.CharField(max_length=16, choices=RequestState.choices, default=RequestState.DRAFT)
    # How many times it was submitted: votes, waivers and recommendations belong to one round, and
    # only the current round's count (a request sent back to draft and resubmitted starts afresh).
    round = models.PositiveIntegerField(default=0)
    state_changed_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(
                        subject_kind=SubjectKind.PREDICTION_AUDIT,
                        prediction_audit__isnull=False,
                        trial__isnull=True,
                        paired_comparison__isnull=True,
                    )
                    | models.Q(
                        subject_kind=SubjectKind.TRIAL,
                        prediction_audit__isnull=True,
                        trial__isnull=False,
                        paired_comparison__isnull=True,
                    )
                    | models.Q(
                        subject_kind=SubjectKind.PAIRED_COMPARISON,
                        prediction_audit__isnull=True,
                        trial__isnull=True,
                        paired_comparison__isnull=False,
                    )
                ),
                name="approvals_request_exactly_one_subject",
            ),
            models.CheckConstraint(
                condition=models.Q(state__in=RequestState.values), name="approvals_request_state_valid"
            ),
            models.UniqueConstraint(
                fields=["model_identifier"],
                condition=models.Q(state__in=[state.value for state in OPEN_STATES]),
                name="approvals_request_one_open_per_model",
            ),
            models.CheckConstraint(
                condition=~models.Q(state=RequestState.REVOKED) | ~models.Q(revoked_reason=""),
                name="approvals_request_revoked_with_reason",
            ),
        ]

    def __str__(self) -> str:
        return f"Review request #{self.pk}: {self.title}"

    def get_absolute_url(self) -> str:
        # The request page (approvals/views.py); emails link to it.
        return reverse("approvals:request", kwargs={"request_id": self.pk})

    @property
    def claim(self) -> str:
        """What the committee votes on, in words: for a paired comparison "challenger B replaces
        champion A"; empty for other subjects (the model identifier says it)."""
        comparison = self.paired_comparison
        if comparison is None:
            return ""
        return f"challenger {comparison.challenger} replaces champion {comparison.champion}"

    @property
    def subject_label(self) -> str:
        if self.prediction_audit_id is not None:
            return f"prediction audit #{self.prediction_audit_id}"
        if self.paired_comparison_id is not None:
            return f"paired comparison #{self.paired_comparison_id}"
        assert self.trial is not None
        return f"trial {self.trial.number} of experiment {self.trial.experiment_id}"


class VoteChoice(models.TextChoices):
    APPROVE = "approve", "Approve"
    REJECT = "reject", "Reject"


class ReviewVote(models.Model):
    """A committee member's signed vote on a request: cast after re-entering their password, over the
    exact documents listed. Never changed; a new vote by the same member supersedes it."""

    request = models.ForeignKey(ReviewRequest, on_delete=models.PROTECT, related_name="votes")
    round = models.PositiveIntegerField()
    voter = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    # The role through which the vote was cast (checked as it was cast): a vote counts as cast, so
    # revoking the role later does not drop it (docs/approvals.md, "Votes, roles and evidence").
    voter_role = models.CharField(max_length=32, choices=Role.choices)
    choice = models.CharField(max_length=8, choices=VoteChoice.choices)
    reason = models.TextField()
    # The SHA-256s of the verdict documents the voter approved or rejected, sorted.
    document_sha256 = models.JSONField(default=list)
    supersedes = models.OneToOneField(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="superseded_by"
    )
    cast_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["request", "round", "cast_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(choice__in=VoteChoice.values), name="approvals_vote_choice_valid"
            ),
            models.CheckConstraint(condition=~models.Q(reason=""), name="approvals_vote_has_reason"),
        ]

    def __str__(self) -> str:
        return f"{self.voter} votes {self.choice} on request #{self.request_id} (round {self.round})"


class Acknowledgement(models.Model):
    """An approving vote's explicit acknowledgement of one INCONCLUSIVE comparison, with what the
    document said it would take to decide it."""

    vote = models.ForeignKey(ReviewVote, on_delete=models.PROTECT, related_name="acknowledgements")
    finding_key = models.CharField(max_length=32)
    document = models.ForeignKey(VerdictDocument, on_delete=models.PROTECT, related_name="+")
    attribute = models.CharField(max_length=511)
    metric = models.CharField(max_length=32)
    group = models.CharField(max_length=511)
    positives_needed = models.BigIntegerField(null=True, blank=True)
    needed_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["vote", "id"]
        constraints = [
            models.UniqueConstraint(fields=["vote", "finding_key"], name="approvals_acknowledgement_once_per_vote")
        ]

    def __str__(self) -> str:
        return f"{self.attribute}: {self.metric} of {self.group} acknowledged by vote #{self.vote_id}"


class Recommendation(models.Model):
    """A reviewer's advice to the committee; the latest per reviewer and round is their current one."""

    request = models.ForeignKey(ReviewRequest, on_delete=models.PROTECT, related_name="recommendations")
    round = models.PositiveIntegerField()
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    choice = models.CharField(max_length=8, choices=VoteChoice.choices)
    reason = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["request", "created_at", "id"]
        constraints = [
            models.CheckConstraint(condition=~models.Q(reason=""), name="approvals_recommendation_has_reason")
        ]

    def __str__(self) -> str:
        return f"{self.reviewer} recommends {self.choice} on request #{self.request_id}"


class Comment(models.Model):
    """One comment on a request, possibly a reply (``parent``); never edited."""

    request = models.ForeignKey(ReviewRequest, on_delete=models.PROTECT, related_name="comments")
    parent = models.ForeignKey("self", on_delete=models.PROTECT, null=True, blank=True, related_name="replies")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    body = models.TextField()
    round = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["request", "created_at", "id"]
        constraints = [models.CheckConstraint(condition=~models.Q(body=""), name="approvals_comment_has_body")]

    def __str__(self) -> str:
        return f"Comment #{self.pk} by {self.author} on request #{self.request_id}"


class WaiverState(models.TextChoices):
    PROPOSED = "proposed", "Proposed"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"


class Waiver(models.Model):
    """Permission to approve despite a set of FAIL comparisons (its scope), until ``expires_at``; one
    reason, one compensating-measures text, one expiry and one quorum vote for the whole set.

    The scope is stored comparison by comparison in ``WaivedComparison`` rows (``comparisons``), written
    with the waiver and never changed. The fields below name the scope's first comparison, as every
    waiver did when a waiver covered exactly one (older readers and the admin list keep working); the
    one live waiver per comparison and round is the services' rule (approvals.services.waivers), checked
    under the request's row lock against every comparison of every live waiver.
    """

    request = models.ForeignKey(ReviewRequest, on_delete=models.PROTECT, related_name="waivers")
    round = models.PositiveIntegerField()
    # The scope's first comparison (the whole scope: ``comparisons``).
    finding_key = models.CharField(max_length=32)
    document = models.ForeignKey(VerdictDocument, on_delete=models.PROTECT, related_name="+")
    attribute = models.CharField(max_length=511)
    metric = models.CharField(max_length=32)
    group = models.CharField(max_length=511)
    reference = models.CharField(max_length=511)
    reason = models.TextField()
    compensating_measures = models.TextField()
    # The waiver holds until this moment (00:00 UTC of the expiry date given).
    expires_at = models.DateTimeField()
    proposed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    proposed_at = models.DateTimeField(auto_now_add=True)
    state = models.CharField(max_length=16, choices=WaiverState.choices, default=WaiverState.PROPOSED)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["request", "proposed_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=WaiverState.values), name="approvals_waiver_state_valid"
            ),
            models.CheckConstraint(
                condition=~models.Q(reason="") & ~models.Q(compensating_measures=""),
                name="approvals_waiver_reason_and_measures",
            ),
        ]

    def __str__(self) -> str:
        return f"Waiver #{self.pk} of {self.label} ({self.get_state_display()})"

    def scope(self) -> list[WaivedComparison]:
        """The comparisons it covers, in the order they were proposed (prefetched ``comparisons``,
        with their documents, are used as they are)."""
        if "comparisons" in getattr(self, "_prefetched_objects_cache", {}):
            return sorted(self.comparisons.all(), key=lambda comparison: comparison.pk)
        return list(self.comparisons.select_related("document").order_by("id"))

    @property
    def label(self) -> str:
        """How people read the scope: ``gender: tpr of female against male`` for one comparison;
        ``gender: tpr of female, nonbinary against male`` for a family's; families joined by "; "."""
        return scope_label(self.scope())


class WaivedComparison(models.Model):
    """One comparison of a waiver's scope: which document, attribute, metric and group against which
    reference, under its finding key (fairness/documents/findings.py). Written once, with its waiver."""

    waiver = models.ForeignKey(Waiver, on_delete=models.PROTECT, related_name="comparisons")
    finding_key = models.CharField(max_length=32)
    document = models.ForeignKey(VerdictDocument, on_delete=models.PROTECT, related_name="+")
    attribute = models.CharField(max_length=511)
    metric = models.CharField(max_length=32)
    group = models.CharField(max_length=511)
    reference = models.CharField(max_length=511)

    class Meta:
        ordering = ["waiver", "id"]
        constraints = [
            models.UniqueConstraint(fields=["waiver", "finding_key"], name="approvals_waived_comparison_once")
        ]

    def __str__(self) -> str:
        return f"{self.label} (waiver #{self.waiver_id})"

    @property
    def label(self) -> str:
        return f"{self.attribute}: {self.metric} of {self.group} against {self.reference}"


def scope_label(comparisons: list[WaivedComparison]) -> str:
    """The comparisons as people read them, one phrase per attribute, metric and reference (in the
    order first met): ``gender: tpr of female, nonbinary against male; age: tpr of 60+ against 30-45``;
    each phrase names its document when the comparisons come from more than one."""
    several = len({comparison.document_id for comparison in comparisons}) > 1
    families: dict[tuple[str, str, str, str], list[str]] = {}
    for comparison in comparisons:
        document = f" (document {comparison.document.sha256[:12]})" if several else ""
        key = (comparison.attribute, comparison.metric, comparison.reference, document)
        families.setdefault(key, []).append(comparison.group)
    return "; ".join(
        f"{attribute}: {metric} of {', '.join(groups)} against {reference}{document}"
        for (attribute, metric, reference, document), groups in families.items()
    )


class WaiverVote(models.Model):
    """A committee member's signed vote on a waiver; superseded, never changed."""

    waiver = models.ForeignKey(Waiver, on_delete=models.PROTECT, related_name="votes")
    voter = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    # The role through which the vote was cast (checked as it was cast): a vote counts as cast, so
    # revoking the role later does not drop it (docs/approvals.md, "Votes, roles and evidence").
    voter_role = models.CharField(max_length=32, choices=Role.choices)
    choice = models.CharField(max_length=8, choices=VoteChoice.choices)
    reason = models.TextField()
    document_sha256 = models.JSONField(default=list)
    supersedes = models.OneToOneField(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="superseded_by"
    )
    cast_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["waiver", "cast_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(choice__in=VoteChoice.values), name="approvals_waiver_vote_choice_valid"
            ),
            models.CheckConstraint(condition=~models.Q(reason=""), name="approvals_waiver_vote_has_reason"),
        ]

    def __str__(self) -> str:
        return f"{self.voter} votes {self.choice} on waiver #{self.waiver_id}"


class RoleChange(models.TextChoices):
    GRANTED = "granted", "granted"
    REVOKED = "revoked", "revoked"


class RoundPause(models.Model):
    """A round paused because the committee or reviewer role of someone who voted or could vote in it
    changed (accounts.signals.role_changed). No decision is reached while a pause of the request's
    current round has no resumption. Written once."""

    request = models.ForeignKey(ReviewRequest, on_delete=models.PROTECT, related_name="pauses")
    round = models.PositiveIntegerField()
    # Whose role changed, which role, and how.
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    role = models.CharField(max_length=32, choices=Role.choices)
    change = models.CharField(max_length=8, choices=RoleChange.choices)
    # Who changed it (null: a command run without naming an administrator).
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    paused_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["request", "paused_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(change__in=RoleChange.values), name="approvals_pause_change_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"Round {self.round} of request #{self.request_id} paused: role of {self.user} {self.change}"


class RoundResumption(models.Model):
    """Someone other than whose role changed (and who changed it) reviewed the pauses and resumed the
    round. Written once; the votes cast before stand as cast."""

    request = models.ForeignKey(ReviewRequest, on_delete=models.PROTECT, related_name="resumptions")
    round = models.PositiveIntegerField()
    pauses = models.ManyToManyField(RoundPause, related_name="resumptions")
    resumed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    reason = models.TextField()
    resumed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["request", "resumed_at", "id"]
        constraints = [models.CheckConstraint(condition=~models.Q(reason=""), name="approvals_resumption_has_reason")]

    def __str__(self) -> str:
        return f"Round {self.round} of request #{self.request_id} resumed by {self.resumed_by}"


class ApprovalSuspension(models.Model):
    """Why a request (approved or pending) was suspended: the evidence it rests on was retired, or
    another cause (``cause``: what, as data, e.g. ``{"kind": "prediction_audit_retired", "id": 5}``).
    Written once, with the request's move to ``suspended`` (services.approval_suspend); an approval
    comes back only through a new review request."""

    request = models.OneToOneField(ReviewRequest, on_delete=models.PROTECT, related_name="suspension")
    round = models.PositiveIntegerField()
    state_before = models.CharField(max_length=16, choices=RequestState.choices)
    reason = models.TextField()
    cause = models.JSONField(default=dict)
    # Null: the system (a task, a monitor) suspended it.
    suspended_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    suspended_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-suspended_at", "-id"]
        constraints = [models.CheckConstraint(condition=~models.Q(reason=""), name="approvals_suspension_has_reason")]

    def __str__(self) -> str:
        return f"Request #{self.request_id} suspended: {self.reason[:60]}"
