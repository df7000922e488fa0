"""Deployments, their history, their monitor policies, and incidents (docs/monitoring.md).

Evidence here is append-only: DeploymentChange, Incident, MonitorPolicy, MonitorPolicyProposal and its
closure are written once by monitoring.services and never updated or deleted (the admin shows them
read-only). A deployment's current state is cached on its row for reading; services change it only
under the row's lock, with a DeploymentChange and an event in the same transaction, which is where
its history lives.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.urls import reverse

from auditportal.approvals.models import ReviewRequest
from auditportal.monitoring.names import MAX_NAME
from auditportal.monitoring.spec import MonitorSpec
from auditportal.policies.models import ProposalOutcome

__all__ = [
    "BatchFormat",
    "BatchLabels",
    "BatchState",
    "ChangeKind",
    "Deployment",
    "DeploymentChange",
    "DeploymentState",
    "Incident",
    "Look",
    "MonitorPolicy",
    "MonitorPolicyProposal",
    "MonitorPolicyProposalClosure",
    "PredictionBatch",
    "ProposalOutcome",
    "WebhookDelivery",
    "WebhookDeliveryStatus",
    "WebhookEndpoint",
]


class DeploymentState(models.TextChoices):
    # Nothing promoted yet.
    EMPTY = "empty", "Empty"
    # The model promoted last serves.
    SERVING = "serving", "Serving"
    # An earlier approved model serves: the one promoted last lost its approval or breached.
    ROLLED_BACK = "rolled_back", "Rolled back"
    # No model may serve: none in the history is still approved.
    SUSPENDED = "suspended", "Suspended"


class Deployment(models.Model):
    """A named slot a pipeline deploys to (``credit-scoring/prod``) and what should serve in it now.

    ``state``, ``model_identifier``, ``review_request``, ``since`` and ``reason`` are the latest
    DeploymentChange's, cached (services.deployments writes both under the row's lock).
    """

    name = models.CharField(max_length=MAX_NAME, unique=True)
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    state = models.CharField(max_length=16, choices=DeploymentState.choices, default=DeploymentState.EMPTY)
    # What should serve now; blank when nothing may (empty, suspended).
    model_identifier = models.CharField(max_length=255, blank=True)
    # The approved request the serving model rests on (the gate's answer when it was promoted or fallen
    # back to); null when nothing serves.
    review_request = models.ForeignKey(ReviewRequest, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    since = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=DeploymentState.values), name="monitoring_deployment_state_valid"
            ),
            # A model serves exactly when the state says one does.
            models.CheckConstraint(
                condition=(
                    models.Q(state__in=[DeploymentState.SERVING, DeploymentState.ROLLED_BACK])
                    & ~models.Q(model_identifier="")
                    & models.Q(review_request__isnull=False)
                )
                | (
                    models.Q(state__in=[DeploymentState.EMPTY, DeploymentState.SUSPENDED])
                    & models.Q(model_identifier="")
                    & models.Q(review_request__isnull=True)
                ),
                name="monitoring_deployment_model_iff_serving",
            ),
        ]

    def __str__(self) -> str:
        return f"Deployment {self.name}"

    def get_absolute_url(self) -> str:
        return reverse("monitoring:deployment", kwargs={"name": self.name})

    @property
    def serves(self) -> bool:
        return self.state in (DeploymentState.SERVING, DeploymentState.ROLLED_BACK)


class ChangeKind(models.TextChoices):
    PROMOTED = "promoted", "Promoted"
    ROLLED_BACK = "rolled_back", "Rolled back"
    SUSPENDED = "suspended", "Suspended"


class Incident(models.Model):
    """A confirmed breach of a deployment's monitor: which model, why, and the evidence.

    Minimal here (deployments roll back naming one); the judgement that opens incidents fills its
    evidence as a frozen document, once, when it writes the row: ``document`` (canonical JSON of the
    batches, counts, intervals and the boundary used) and its ``document_sha256``.
    """

    deployment = models.ForeignKey(Deployment, on_delete=models.PROTECT, related_name="incidents")
    model_identifier = models.CharField(max_length=255)
    review_request = models.ForeignKey(ReviewRequest, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    reason = models.TextField()
    # What happened, as data: ``kind`` and the ids involved.
    cause = models.JSONField(default=dict)
    document = models.JSONField(null=True, blank=True)
    document_sha256 = models.CharField(max_length=64, blank=True)
    opened_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-opened_at", "-id"]
        constraints = [models.CheckConstraint(condition=~models.Q(reason=""), name="monitoring_incident_has_reason")]

    def __str__(self) -> str:
        return f"Incident #{self.pk} of {self.model_identifier} in {self.deployment_id}"


class DeploymentChange(models.Model):
    """One change of what serves in a deployment: a promotion, a rollback or a suspension. Written once,
    with the deployment's cached state, by monitoring.services."""

    deployment = models.ForeignKey(Deployment, on_delete=models.PROTECT, related_name="changes")
    # 1, 2, 3, ... per deployment: the history's order without ties on the clock.
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=ChangeKind.choices)
    # What serves after the change (blank: nothing, a suspension) and what served before (blank: nothing).
    model_identifier = models.CharField(max_length=255, blank=True)
    from_model = models.CharField(max_length=255, blank=True)
    # The approved request the model serving after rests on (the gate's answer at the change).
    review_request = models.ForeignKey(ReviewRequest, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    reason = models.TextField()
    # What caused a rollback or suspension, as data (``kind`` and ids); {} for a promotion.
    cause = models.JSONField(default=dict, blank=True)
    incident = models.ForeignKey(
        Incident, on_delete=models.PROTECT, null=True, blank=True, related_name="deployment_changes"
    )
    # Null: the system (a monitor's breach, a task).
    by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["deployment", "-seq"]
        constraints = [
            models.UniqueConstraint(fields=["deployment", "seq"], name="monitoring_change_seq_unique"),
            models.CheckConstraint(condition=models.Q(kind__in=ChangeKind.values), name="monitoring_change_kind_valid"),
            models.CheckConstraint(condition=~models.Q(reason=""), name="monitoring_change_has_reason"),
            models.CheckConstraint(
                condition=(
                    models.Q(kind=ChangeKind.SUSPENDED, model_identifier="", review_request__isnull=True)
                    | (
                        models.Q(kind__in=[ChangeKind.PROMOTED, ChangeKind.ROLLED_BACK], review_request__isnull=False)
                        & ~models.Q(model_identifier="")
                    )
                ),
                name="monitoring_change_model_iff_serving",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.deployment_id}#{self.seq} {self.kind} {self.model_identifier or '-'}"


class MonitorPolicy(models.Model):
    """One version of a deployment's monitor policy (``spec``: monitoring/spec.py's JSON). Immutable: a
    change is a new version; the active one is the highest. Version 1 is the defaults, made with the
    deployment."""

    deployment = models.ForeignKey(Deployment, on_delete=models.PROTECT, related_name="monitor_policies")
    version = models.PositiveIntegerField()
    spec = models.JSONField()
    reason = models.TextField()
    # For a loosening: its proposer, and the different administrator who confirmed it (two-person rule);
    # confirmed_by is null for a version that loosens nothing.
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    confirmed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    proposal = models.OneToOneField(
        "MonitorPolicyProposal", on_delete=models.PROTECT, null=True, blank=True, related_name="policy"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["deployment", "-version"]
        verbose_name_plural = "monitor policies"
        constraints = [
            models.UniqueConstraint(fields=["deployment", "version"], name="monitoring_policy_version_unique"),
            models.CheckConstraint(condition=models.Q(version__gte=1), name="monitoring_policy_version_positive"),
        ]

    def __str__(self) -> str:
        return f"Monitor policy v{self.version} of {self.deployment_id}"

    @property
    def monitor_spec(self) -> MonitorSpec:
        return MonitorSpec.from_json(self.spec)

    def as_json(self) -> dict[str, Any]:
        return {"version": self.version, "spec": self.spec}


class MonitorPolicyProposal(models.Model):
    """A next version that loosens a deployment's monitor (spec.spec_loosenings), waiting for a
    different administrator's confirmation. Append-only; its confirmation or withdrawal is a
    MonitorPolicyProposalClosure. Stale, and only withdrawable, once another version is active."""

    deployment = models.ForeignKey(Deployment, on_delete=models.PROTECT, related_name="monitor_policy_proposals")
    base = models.ForeignKey(MonitorPolicy, on_delete=models.PROTECT, related_name="+")
    spec = models.JSONField()
    loosens = models.JSONField(default=list)
    reason = models.TextField()
    proposed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    proposed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-pk"]

    def __str__(self) -> str:
        return f"Monitor policy proposal #{self.pk} for {self.deployment_id}"


class MonitorPolicyProposalClosure(models.Model):
    """How a proposal ended: confirmed (the version links back through MonitorPolicy.proposal) or
    withdrawn. One per proposal."""

    proposal = models.OneToOneField(MonitorPolicyProposal, on_delete=models.PROTECT, related_name="closure")
    outcome = models.CharField(max_length=16, choices=ProposalOutcome.choices)
    closed_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    closed_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"Monitor policy proposal #{self.proposal_id} {self.outcome}"


class WebhookEndpoint(models.Model):
    """A URL told of a deployment's changes (docs/monitoring.md, "Webhooks"), registered by an
    administrator. ``secret`` signs every delivery (HMAC-SHA256), so it is kept as it was generated:
    shown once to whoever registers it, never again by the API or the admin. Deactivated, never
    deleted (its deliveries point at it)."""

    deployment = models.ForeignKey(Deployment, on_delete=models.PROTECT, related_name="webhooks")
    url = models.URLField(max_length=2000)
    secret = models.CharField(max_length=128)
    description = models.CharField(max_length=200, blank=True)
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    deactivated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    deactivated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["deployment", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(url__startswith="http://") | models.Q(url__startswith="https://"),
                name="monitoring_webhook_url_http",
            ),
            models.CheckConstraint(
                condition=models.Q(active=True, deactivated_at__isnull=True)
                | models.Q(active=False, deactivated_at__isnull=False),
                name="monitoring_webhook_active_iff_not_deactivated",
            ),
        ]

    def __str__(self) -> str:
        return f"Webhook #{self.pk} of {self.deployment_id}"


class WebhookDeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"  # queued, or failed and waiting for its next attempt
    DELIVERED = "delivered", "Delivered"  # a 2xx answer
    FAILED = "failed", "Failed"  # every attempt failed, or the receiver refused it for good (4xx)


class WebhookDelivery(models.Model):
    """One event for one endpoint: the exact body sent (``body``, canonical JSON, the bytes signed) and
    how its delivery went. Written with the change it tells of; never deleted. Only the delivery task
    writes after that, and only the outcome (attempts, status, the last answer)."""

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.PROTECT, related_name="deliveries")
    event = models.CharField(max_length=64)
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    attempts = models.PositiveIntegerField(default=0)
    status = models.CharField(
        max_length=16, choices=WebhookDeliveryStatus.choices, default=WebhookDeliveryStatus.PENDING
    )
    # The last attempt's answer: its HTTP status (null: no answer, see ``error``), the first bytes of
    # its body as text (untrusted: escaped wherever shown), or what went wrong.
    response_code = models.PositiveIntegerField(null=True, blank=True)
    response_body_head = models.TextField(blank=True)
    error = models.TextField(blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=WebhookDeliveryStatus.values), name="monitoring_delivery_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"Webhook delivery #{self.pk} {self.event} ({self.status})"


# --------------------------------------------------------------------------- production batches


class BatchFormat(models.TextChoices):
    CSV = "csv", "CSV"
    PARQUET = "parquet", "Parquet"
    COUNTS = "counts", "Pre-aggregated counts (JSON)"


class BatchState(models.TextChoices):
    # Kept (its file in the store until a worker counts it), queued.
    RECEIVED = "received", "Received"
    # Its counts are stored (and, when large enough, judged); the file is gone.
    COUNTED = "counted", "Counted"
    # The worker could not count it: ``error`` says why; nothing of it is in any window.
    FAILED = "failed", "Failed"


class PredictionBatch(models.Model):
    """One batch of production predictions a serving pipeline posted (docs/monitoring.md, "Production
    batches"). Evidence: ``counts`` (per attribute, per group: tp, fn, fp, tn, unlabelled,
    unlabelled_selected) are written once, when a worker counts the batch, and never changed; labels
    that arrive later are BatchLabels rows. The rows themselves are not kept."""

    deployment = models.ForeignKey(Deployment, on_delete=models.PROTECT, related_name="batches")
    batch_id = models.CharField(max_length=100)
    # The model whose predictions these are: the deployment's serving model or one it served before.
    model_identifier = models.CharField(max_length=255)
    sha256 = models.CharField(max_length=64)
    format = models.CharField(max_length=16, choices=BatchFormat.choices)
    size_bytes = models.BigIntegerField()
    # How to read the file (columns, threshold, positive value) and the attributes counted.
    parameters = models.JSONField(default=dict)
    received_at = models.DateTimeField(auto_now_add=True)
    received_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    state = models.CharField(max_length=16, choices=BatchState.choices, default=BatchState.RECEIVED)
    error = models.TextField(blank=True)
    error_field = models.CharField(max_length=255, blank=True)
    # The file until it is counted (relative to DATASET_STORAGE_DIR); blank for counts and after counting.
    storage_path = models.CharField(max_length=500, blank=True)
    # A batch posted with a row key: its unlabelled rows until their labels arrive (key, group per
    # attribute, selected), as a Parquet side file relative to DATASET_STORAGE_DIR (not as database
    # rows: a batch may leave a million); blank when none is pending. Not evidence (the counts are).
    pending_path = models.CharField(max_length=500, blank=True)
    pending_rows = models.BigIntegerField(default=0)
    rows = models.BigIntegerField(null=True, blank=True)
    counts = models.JSONField(null=True, blank=True)
    # 1, 2, 3... in the order counted among the batches of the same model since it last began serving
    # (the look's window is taken from it); null for a batch of a model that no longer serves.
    position = models.PositiveIntegerField(null=True, blank=True)
    # The change since which its model served when the batch was counted (the window's era); null for a
    # batch of a model that no longer served.
    serving_change = models.ForeignKey(
        DeploymentChange, on_delete=models.PROTECT, null=True, blank=True, related_name="batches"
    )
    counted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["deployment", "-received_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["deployment", "batch_id"], name="monitoring_batch_id_unique"),
            models.CheckConstraint(
                condition=models.Q(state__in=BatchState.values), name="monitoring_batch_state_valid"
            ),
            models.CheckConstraint(
                condition=~models.Q(state=BatchState.COUNTED) | models.Q(counts__isnull=False, rows__isnull=False),
                name="monitoring_batch_counted_has_counts",
            ),
        ]

    def __str__(self) -> str:
        return f"Batch {self.batch_id} of {self.deployment_id}"


class BatchLabels(models.Model):
    """Labels posted for an earlier batch's rows by row key. Evidence, append-only: ``counts`` is the
    delta it made (per attribute and group: the rows moved out of ``unlabelled`` into tp/fn/fp/tn), the
    batch's own counts are never changed."""

    batch = models.ForeignKey(PredictionBatch, on_delete=models.PROTECT, related_name="labels")
    sha256 = models.CharField(max_length=64)
    size_bytes = models.BigIntegerField()
    parameters = models.JSONField(default=dict)
    received_at = models.DateTimeField(auto_now_add=True)
    received_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    state = models.CharField(max_length=16, choices=BatchState.choices, default=BatchState.RECEIVED)
    error = models.TextField(blank=True)
    error_field = models.CharField(max_length=255, blank=True)
    storage_path = models.CharField(max_length=500, blank=True)
    counts = models.JSONField(null=True, blank=True)
    # Rows of the file with a label that matched a pending row, and those that matched none.
    labelled = models.BigIntegerField(null=True, blank=True)
    unmatched = models.BigIntegerField(null=True, blank=True)
    counted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["batch", "id"]
        verbose_name_plural = "batch labels"
        constraints = [
            models.UniqueConstraint(fields=["batch", "sha256"], name="monitoring_batch_labels_unique"),
            models.CheckConstraint(
                condition=models.Q(state__in=BatchState.values), name="monitoring_batch_labels_state_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"Labels #{self.pk} of {self.batch}"


class Look(models.Model):
    """One judgement of a deployment's monitor: after a batch was counted, or labels arrived. Written
    once, under the deployment's row lock. ``judgements``: per sensitive attribute, the statistics'
    LookJudgement.as_json(); ``breached``: any of them confirms a breach."""

    deployment = models.ForeignKey(Deployment, on_delete=models.PROTECT, related_name="looks")
    seq = models.PositiveIntegerField()
    model_identifier = models.CharField(max_length=255)
    policy = models.ForeignKey(MonitorPolicy, on_delete=models.PROTECT, related_name="+")
    # None: counted since the model began serving; k: the k-th tumbling window (MONITORING_WINDOW_BATCHES).
    window = models.PositiveIntegerField(null=True, blank=True)
    batch = models.ForeignKey(PredictionBatch, on_delete=models.PROTECT, related_name="looks")
    labels = models.ForeignKey(BatchLabels, on_delete=models.PROTECT, null=True, blank=True, related_name="looks")
    # The batch ids whose counts (with their labels so far) the window summed.
    batches = models.JSONField(default=list)
    rows = models.BigIntegerField()
    judgements = models.JSONField()
    status = models.CharField(max_length=16, blank=True)
    breached = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # What the deployment page's charts draw of ``judgements``, as fairness/figures/lookpoints.look_points
    # gives it (the layout's JSON, float64 values): the page reads a year of looks without parsing JSON.
    points_layout = models.TextField(blank=True, default="", editable=False)
    points = models.BinaryField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["deployment", "-seq"]
        constraints = [
            models.UniqueConstraint(fields=["deployment", "seq"], name="monitoring_look_seq_unique"),
            # One look per counted batch and one per labels arrival: a retried task writes none twice.
            models.UniqueConstraint(
                fields=["batch"], condition=models.Q(labels__isnull=True), name="monitoring_look_one_per_batch"
            ),
            models.UniqueConstraint(
                fields=["labels"], condition=models.Q(labels__isnull=False), name="monitoring_look_one_per_labels"
            ),
        ]

    def __str__(self) -> str:
        return f"Look {self.seq} of {self.deployment_id}"
