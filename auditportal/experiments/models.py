from __future__ import annotations

from django.conf import settings
from django.db import models

from auditportal.datasets.models import DatasetVersion
from auditportal.fairness.statistics.stats import Verdict
from auditportal.policies.models import FairnessPolicy


class Template(models.TextChoices):
    SINGLE = "single", "Single trial"
    RANDOM = "random", "Random search"
    ASHA = "asha", "Adaptive ASHA search"


class Backend(models.TextChoices):
    LOCAL = "local", "Local (Determined local training mode)"
    DETERMINED = "determined", "Determined cluster"


class ExperimentStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    LAUNCHING = "launching", "Launching"
    RUNNING = "running", "Running"
    # Cancelled by a user; a worker is stopping the trials (the web process never signals them).
    CANCELLING = "cancelling", "Cancelling"
    COMPLETED = "completed", "Completed"
    ERRORED = "errored", "Finished with errors"
    CANCELLED = "cancelled", "Cancelled"
    LAUNCH_FAILED = "launch_failed", "Launch failed"


ACTIVE_STATUSES = (
    ExperimentStatus.QUEUED,
    ExperimentStatus.LAUNCHING,
    ExperimentStatus.RUNNING,
    ExperimentStatus.CANCELLING,
)


class TrialState(models.TextChoices):
    # Determined's names, so the two backends and the CLI's JSON speak the same language.
    QUEUED = "QUEUED", "Queued"
    STARTING = "STARTING", "Starting"
    RUNNING = "RUNNING", "Running"
    COMPLETED = "COMPLETED", "Completed"
    ERRORED = "ERRORED", "Errored"
    CANCELED = "CANCELED", "Cancelled"


TERMINAL_TRIAL_STATES = (TrialState.COMPLETED, TrialState.ERRORED, TrialState.CANCELED)


class StopReason(models.TextChoices):
    """Why the portal asked a running trial to stop."""

    CANCEL = "cancel", "experiment cancelled"
    EARLY_STOP = "early_stop", "stopped early by ASHA"


class Experiment(models.Model):
    dataset_version = models.ForeignKey(DatasetVersion, on_delete=models.PROTECT, related_name="experiments")
    name = models.CharField(max_length=128)
    template = models.CharField(max_length=16, choices=Template.choices)
    # The full Determined experiment config as submitted (YAML), and the hyperparameter space in
    # Determined's format ({"lr": {"type": "log", ...}, "dropout": 0.1}).
    config_yaml = models.TextField()
    hparam_space = models.JSONField(default=dict)
    max_trials = models.PositiveIntegerField(default=1)
    # Processes per trial (Determined's resources.slots_per_trial); range: configs.SLOTS_PER_TRIAL_*.
    slots_per_trial = models.PositiveSmallIntegerField(default=1)
    # Determined's searcher.max_concurrent_trials: how many of a search's trials train at once (ASHA
    # splits it over its brackets); 0 is the searcher's own default. The local backend starts a trial
    # only when one of its search (its bracket, for ASHA) has ended.
    max_concurrent_trials = models.PositiveIntegerField(default=0)
    batches = models.PositiveIntegerField()
    validation_period = models.PositiveIntegerField()
    backend = models.CharField(max_length=16, choices=Backend.choices)
    det_experiment_id = models.BigIntegerField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=ExperimentStatus.choices, default=ExperimentStatus.QUEUED)
    error = models.TextField(blank=True)
    shard_dir = models.CharField(max_length=500, blank=True)
    launched_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    # Claimed by one poller at a time (conditional UPDATE); expires so a killed worker's claim lapses.
    poll_lease_until = models.DateTimeField(null=True, blank=True)
    # The launch: when its task was last queued (through the outbox, with the experiment; again by the
    # periodic poll when no worker claimed it; null for experiments queued before the outbox whose task
    # never reached the broker), when a worker claimed it, and that worker's latest sign of life.
    launch_queued_at = models.DateTimeField(null=True, blank=True)
    launch_claimed_at = models.DateTimeField(null=True, blank=True)
    launch_heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Cancelling: when a user asked, and when a worker passed it on to the backend.
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    cancel_sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=models.Q(max_trials__gte=1), name="experiments_max_trials_positive"),
            models.CheckConstraint(condition=models.Q(batches__gte=1), name="experiments_batches_positive"),
            models.CheckConstraint(
                condition=models.Q(slots_per_trial__gte=1), name="experiments_slots_per_trial_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"Experiment {self.pk} ({self.get_template_display()} on {self.dataset_version})"

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_STATUSES


class Trial(models.Model):
    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="trials")
    # Position within the experiment (1-based); with Determined, trials are numbered as they appear.
    number = models.PositiveIntegerField()
    det_trial_id = models.BigIntegerField(null=True, blank=True)
    hparams = models.JSONField(default=dict)
    state = models.CharField(max_length=16, choices=TrialState.choices, default=TrialState.QUEUED)
    steps_done = models.PositiveIntegerField(default=0)
    steps_planned = models.PositiveIntegerField(default=0)
    checkpoint = models.CharField(max_length=500, blank=True)
    error = models.TextField(blank=True)
    log_tail = models.TextField(blank=True)
    # Local backend: the trainer's process group and how far its metrics file has been ingested
    # (bytes, only ever up to the end of a complete line).
    pid = models.IntegerField(null=True, blank=True)
    metrics_offset = models.BigIntegerField(default=0)
    # The latest validation, kept here for the live page (no scan of the metric points).
    latest_step = models.PositiveIntegerField(null=True, blank=True)
    latest_eod = models.FloatField(null=True, blank=True)
    # The trainer's eod_beyond_noise: the largest recall gap less its sampling noise, which
    # fair_objective searches on (trainer/README.md); null for trials from before it was reported.
    latest_eod_beyond_noise = models.FloatField(null=True, blank=True)
    latest_fair_objective = models.FloatField(null=True, blank=True)
    latest_accuracy = models.FloatField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # When the trial actually ended (locally: when its processes were gone), not when it was asked to.
    ended_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Local ASHA: the bracket the trial belongs to (asha.py); null outside an ASHA search.
    asha_bracket = models.PositiveSmallIntegerField(null=True, blank=True)
    # When and why the portal asked the trial's runner to stop it.
    stop_requested_at = models.DateTimeField(null=True, blank=True)
    stop_reason = models.CharField(max_length=16, choices=StopReason.choices, blank=True)

    class Meta:
        ordering = ["experiment", "number"]
        constraints = [
            models.UniqueConstraint(fields=["experiment", "number"], name="experiments_trial_unique_number"),
            models.UniqueConstraint(
                fields=["experiment", "det_trial_id"],
                condition=models.Q(det_trial_id__isnull=False),
                name="experiments_trial_unique_det_id",
            ),
        ]

    def __str__(self) -> str:
        return f"Trial {self.number} of experiment {self.experiment_id}"

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_TRIAL_STATES

    @property
    def progress_percent(self) -> int:
        if not self.steps_planned:
            return 0
        return min(100, round(100 * self.steps_done / self.steps_planned))


class RungOutcome(models.TextChoices):
    CONTINUED = "continued", "continued"
    STOPPED = "stopped", "stopped early"
    COMPLETED = "completed", "completed (top rung)"
    EXITED = "exited", "exited before the rung"


class TrialRung(models.Model):
    """A trial's entry into one rung of the local ASHA search, and what was decided (asha.py): its
    searcher metric ranked ``position`` of the ``entered`` trials of its bracket that had reached the
    rung; the first ``continuing`` go on. Written once; the rung's later entries never change it."""

    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="rungs")
    rung = models.PositiveSmallIntegerField()  # 0-based
    units = models.PositiveIntegerField()  # batches a trial must have trained to enter it
    # The validation that entered the rung; null for a trial that exited before reaching it.
    step = models.PositiveIntegerField(null=True, blank=True)
    # The searcher metric (smaller is better); null when the trial exited or did not report it,
    # which ranks as the worst.
    metric = models.FloatField(null=True, blank=True)
    position = models.PositiveIntegerField()
    entered = models.PositiveIntegerField()
    continuing = models.PositiveIntegerField()
    outcome = models.CharField(max_length=16, choices=RungOutcome.choices)
    decided_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["trial", "rung"]
        constraints = [
            models.UniqueConstraint(fields=["trial", "rung"], name="experiments_trialrung_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.trial} rung {self.rung + 1}: {self.outcome}"


class MetricKind(models.TextChoices):
    TRAINING = "training", "Training"
    VALIDATION = "validation", "Validation"


class MetricPoint(models.Model):
    """One reported value. Per-group metrics (``count/<attribute>/<group>/tp``, ``recall/<a>/<g>``)
    also carry their attribute and group, so they can be filtered without parsing names."""

    # No index of its own: the unique constraint's index starts with trial_id and serves lookups, and
    # every extra index is paid on each of millions of inserted points.
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="metric_points", db_index=False)
    kind = models.CharField(max_length=10, choices=MetricKind.choices)
    step = models.PositiveIntegerField()
    name = models.CharField(max_length=255)
    # Null where the trainer reported a non-finite number.
    value = models.FloatField(null=True)
    attribute = models.CharField(max_length=255, blank=True)
    group = models.CharField(max_length=255, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["trial", "kind", "step", "name"], name="experiments_metricpoint_unique"),
        ]
        # No separate (trial, attribute, group) index: per-group queries are per trial, and the
        # unique index's trial_id prefix narrows them to one trial's points; a second index cost
        # about a fifth of the ingestion rate (bench/ingest.py).
        indexes = [
            # The series without a group (eod, accuracy, fair_objective, eod/<attr>, ...), a few names
            # per report out of hundreds: the experiment page's charts read them for every trial
            # from this small index alone (value is in the key, so PostgreSQL never visits the
            # table), instead of scanning every point of the trials (bench/dashboard.py).
            models.Index(
                fields=["trial", "kind", "name", "step", "value"],
                condition=models.Q(attribute=""),
                name="experiments_point_series_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.name}@{self.step} = {self.value}"


class TrialVerdict(models.Model):
    """The sample-size-aware equal-opportunity verdict on one attribute at a trial's latest validation.

    Recomputed whenever a newer validation arrives; ``document`` is the judged attribute section of
    docs/audit-json.md (every metric, group and comparison), ``verdict`` and the interval summarise
    its recall (TPR) comparisons, the gap the trainer's ``eod`` measures.
    """

    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="verdicts")
    attribute = models.CharField(max_length=511)
    step = models.PositiveIntegerField()
    tolerance = models.FloatField()
    alpha = models.FloatField()
    reference = models.CharField(max_length=511, blank=True)
    # Blank when no recall comparison is defined (one group, or no positives anywhere).
    verdict = models.CharField(max_length=16, choices=Verdict.choices(), blank=True)
    group = models.CharField(max_length=511, blank=True)
    difference = models.FloatField(null=True, blank=True)
    ci_low = models.FloatField(null=True, blank=True)
    ci_high = models.FloatField(null=True, blank=True)
    positives_needed = models.BigIntegerField(null=True, blank=True)
    # The largest two-sample noise floor among the attribute's defined recall comparisons (the
    # document's ``noise_floor``): a gap below it may be sampling alone. Kept beside the document so
    # that the experiment page's charts need not read every document (docs/dashboard.md).
    noise_floor = models.FloatField(null=True, blank=True)
    # The policy version this verdict was judged under; null only for verdicts from before policies
    # were data.
    policy = models.ForeignKey(FairnessPolicy, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    document = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["trial", "attribute"]
        constraints = [
            models.UniqueConstraint(fields=["trial", "attribute"], name="experiments_trialverdict_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.attribute}: {self.verdict or 'undecided'} (trial {self.trial_id}, step {self.step})"
