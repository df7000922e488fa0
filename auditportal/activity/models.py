from __future__ import annotations

from django.conf import settings
from django.db import models


class Verb(models.TextChoices):
    """Every kind of event the trail records; services write one of these, never a bare string."""

    USER_CREATED = "user.created", "user created"
    USER_PASSWORD_CHANGED = "user.password_changed", "password changed by its owner"
    USER_PASSWORD_RESET_FORCED = "user.password_reset_forced", "password reset forced by an administrator"
    USER_ACTIVATED = "user.activated", "user activated"
    USER_DEACTIVATED = "user.deactivated", "user deactivated"
    USER_FLAGS_CHANGED = "user.flags_changed", "admin-site access changed"
    USER_EMAIL_CHANGED = "user.email_changed", "e-mail address changed"
    ROLE_GRANTED = "role.granted", "role granted"
    ROLE_REVOKED = "role.revoked", "role revoked"
    ROLE_GRANT_PROPOSED = "role_grant.proposed", "grant of a deciding role proposed"
    ROLE_GRANT_PROPOSAL_CONFIRMED = (
        "role_grant.proposal_confirmed",
        "grant of a deciding role confirmed by a second administrator",
    )
    ROLE_GRANT_PROPOSAL_WITHDRAWN = "role_grant.proposal_withdrawn", "grant of a deciding role withdrawn"
    DATASET_CREATED = "dataset.created", "dataset created"
    DATASET_STEWARD_ADDED = "dataset.steward_added", "dataset steward added"
    DATASET_STEWARD_REMOVED = "dataset.steward_removed", "dataset steward removed"
    DATASET_VERSION_REGISTERED = "dataset_version.registered", "dataset version registered"
    PREDICTION_AUDIT_CREATED = "prediction_audit.created", "prediction audit created"
    EXPERIMENT_LAUNCHED = "experiment.launched", "experiment launched"
    EXPERIMENT_STARTED = "experiment.started", "experiment started"
    EXPERIMENT_LAUNCH_FAILED = "experiment.launch_failed", "experiment launch failed"
    EXPERIMENT_FINISHED = "experiment.finished", "experiment finished"
    EXPERIMENT_FAILED = "experiment.failed", "experiment failed"
    EXPERIMENT_CANCELLED = "experiment.cancelled", "experiment cancelled"
    TRIAL_EARLY_STOPPED = "trial.early_stopped", "trial stopped early by the search"
    TRIAL_VERDICT_CHANGED = "trial_verdict.changed", "trial verdict changed"
    FAIRNESS_POLICY_CREATED = "fairness_policy.created", "fairness policy version created"
    FAIRNESS_POLICY_PROPOSED = "fairness_policy.proposed", "fairness policy loosening proposed"
    FAIRNESS_POLICY_PROPOSAL_CONFIRMED = (
        "fairness_policy.proposal_confirmed",
        "fairness policy loosening confirmed by a second administrator",
    )
    FAIRNESS_POLICY_PROPOSAL_WITHDRAWN = "fairness_policy.proposal_withdrawn", "fairness policy proposal withdrawn"
    VERDICT_DOCUMENT_FROZEN = "verdict_document.frozen", "verdict document frozen"
    DATASET_VERSION_INTEGRITY_FAILED = "dataset_version.integrity_failed", "dataset version failed its integrity check"
    DATASET_VERSION_RETIRED = "dataset_version.retired", "dataset version retired"
    PREDICTION_AUDIT_RETIRED = "prediction_audit.retired", "prediction audit retired"
    PREDICTION_AUDIT_QUEUED = "prediction_audit.queued", "prediction file queued for a worker's audit"
    WHATIF_STARTED = "whatif.started", "what-if thresholds started from a scored file"
    WHATIF_FROZEN = "whatif.frozen", "what-if thresholds frozen as a prediction audit"
    REVIEW_REQUEST_CREATED = "review_request.created", "review request created"
    REVIEW_REQUEST_REVISED = "review_request.revised", "review request revised"
    REVIEW_REQUEST_SUBMITTED = "review_request.submitted", "review request submitted"
    REVIEW_REQUEST_REVIEW_STARTED = "review_request.review_started", "review of a request started"
    REVIEW_REQUEST_CHANGES_REQUESTED = "review_request.changes_requested", "changes requested on a review request"
    REVIEW_REQUEST_WITHDRAWN = "review_request.withdrawn", "review request withdrawn"
    REVIEW_REQUEST_APPROVED = "review_request.approved", "review request approved"
    REVIEW_REQUEST_REJECTED = "review_request.rejected", "review request rejected"
    REVIEW_REQUEST_REVOKED = "review_request.revoked", "approval revoked"
    REVIEW_REQUEST_RECOMMENDED = "review_request.recommended", "reviewer recommendation recorded"
    REVIEW_REQUEST_PAUSED = "review_request.paused", "review round paused: a voter's role changed"
    REVIEW_REQUEST_RESUMED = "review_request.resumed", "review round resumed"
    REVIEW_REQUEST_SUSPENDED = "review_request.suspended", "review request suspended"
    REVIEW_REQUEST_CHECKPOINT_TAGGED = "review_request.checkpoint_tagged", "approval written to the checkpoint"
    REVIEW_REQUEST_MAIL_SENT = "review_request.mail_sent", "mail about a review request sent"
    REVIEW_COMMENT_ADDED = "review_comment.added", "comment added to a review request"
    REVIEW_VOTE_CAST = "review_vote.cast", "committee vote cast"
    REVIEW_VOTE_REAUTH_FAILED = "review_vote.reauthentication_failed", "vote refused: wrong password"
    WAIVER_PROPOSED = "waiver.proposed", "waiver proposed"
    WAIVER_VOTE_CAST = "waiver_vote.cast", "committee vote on a waiver cast"
    WAIVER_APPROVED = "waiver.approved", "waiver approved"
    WAIVER_REJECTED = "waiver.rejected", "waiver rejected"
    DEPLOYMENT_CREATED = "deployment.created", "deployment created"
    DEPLOYMENT_PROMOTED = "deployment.promoted", "model promoted into a deployment"
    DEPLOYMENT_ROLLED_BACK = "deployment.rolled_back", "deployment rolled back to an earlier approved model"
    DEPLOYMENT_SUSPENDED = "deployment.suspended", "deployment suspended: no approved model to fall back to"
    MONITOR_POLICY_CREATED = "monitor_policy.created", "monitor policy version created"
    MONITOR_POLICY_PROPOSED = "monitor_policy.proposed", "monitor policy loosening proposed"
    MONITOR_POLICY_PROPOSAL_CONFIRMED = (
        "monitor_policy.proposal_confirmed",
        "monitor policy loosening confirmed by a second administrator",
    )
    MONITOR_POLICY_PROPOSAL_WITHDRAWN = "monitor_policy.proposal_withdrawn", "monitor policy proposal withdrawn"
    INCIDENT_OPENED = "incident.opened", "monitor breach confirmed: incident opened, model suspended"
    WEBHOOK_REGISTERED = "webhook.registered", "webhook endpoint registered for a deployment"
    WEBHOOK_DEACTIVATED = "webhook.deactivated", "webhook endpoint deactivated"
    API_TOKEN_CREATED = "api_token.created", "API token created"
    API_TOKEN_REVOKED = "api_token.revoked", "API token revoked"
    CERTIFICATE_AUTHORITY_CREATED = "certificate_authority.created", "report certificate authority created"
    SIGNING_CERTIFICATE_ISSUED = "signing_certificate.issued", "report signing certificate issued"
    REPORT_CREATED = "report.created", "signed report created"
    REPORT_SIGNED = "report.signed", "report signed by a member"
    MONITORING_REPORT_CREATED = "report.monitoring_created", "monitoring report of a deployment's period created"
    REPORT_SIGN_REAUTH_FAILED = "report.reauthentication_failed", "report signature refused: wrong password"
    ACTIVITY_LOG_HEAD_EXPORTED = "activity_log.head_exported", "activity log's signed head exported"
    ACTIVITY_LOG_VERIFIED = "activity_log.verified", "activity log's hash chain verified"
    DATABASE_APP_ROLE_GRANTED = "database.app_role_granted", "database privileges set for the application role"
    PAIRED_COMPARISON_CREATED = "paired_comparison.created", "paired comparison of two models created"
    PAIRED_COMPARISON_QUEUED = "paired_comparison.queued", "paired comparison of two trials queued for a worker"
    PAIRED_COMPARISON_FAILED = "paired_comparison.failed", "paired comparison of two trials failed"
    TRIAL_ATTRIBUTION_QUEUED = "trial_attribution.queued", "attributions of a trial's checkpoint queued for a worker"
    TRIAL_ATTRIBUTION_COMPUTED = "trial_attribution.computed", "attributions of a trial's checkpoint computed"
    TRIAL_ATTRIBUTION_FAILED = "trial_attribution.failed", "attributions of a trial's checkpoint failed"


class Event(models.Model):
    """One row per state-changing action, written in the same transaction as the change.

    This is the governance trail an ethics committee reads: who did what to which object, when.
    Append-only and hash-chained (activity/chain.py): each row stores the previous row's hash and
    its own hash over its content, so an edited, deleted or inserted row breaks the chain, which
    ``manage.py verify_audit_log`` reports. Rows are written only by services.event_record, never
    updated or deleted; on PostgreSQL triggers refuse UPDATE, DELETE and TRUNCATE.
    """

    # Position in the chain: 1, 2, 3, ... without gaps.
    seq = models.PositiveBigIntegerField()
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)
    # Set by event_record before hashing (not auto_now_add: the hash covers it).
    at = models.DateTimeField(db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
    # The actor's username when the event was written: the hash covers it, and a later rename
    # must neither break the chain nor rewrite who the log says acted.
    actor_username = models.CharField(max_length=150, blank=True)
    verb = models.CharField(max_length=64, choices=Verb.choices)
    target_type = models.CharField(max_length=64)
    target_id = models.CharField(max_length=64)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-seq"]
        indexes = [models.Index(fields=["target_type", "target_id"], name="activity_event_target_idx")]
        constraints = [
            # One successor per event: two writers cannot fork the chain.
            models.UniqueConstraint(fields=["seq"], name="activity_event_seq_unique"),
            models.UniqueConstraint(fields=["prev_hash"], name="activity_event_prev_hash_unique"),
            models.UniqueConstraint(fields=["hash"], name="activity_event_hash_unique"),
            models.CheckConstraint(condition=models.Q(seq__gte=1), name="activity_event_seq_positive"),
        ]

    def __str__(self) -> str:
        actor = self.actor_username or "system"
        return f"#{self.seq} {self.at:%Y-%m-%d %H:%M} {actor} {self.verb} {self.target_type}#{self.target_id}"
