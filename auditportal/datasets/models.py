from __future__ import annotations

import uuid
from pathlib import Path

from django.conf import settings
from django.db import models

from auditportal.fairness.files import tabular


class Dataset(models.Model):
    name = models.CharField(max_length=120, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def steward_names(self) -> list[str]:
        """Its stewards' usernames, the first steward first."""
        return list(self.stewardships.order_by("added_at", "pk").values_list("user__username", flat=True))


class DatasetSteward(models.Model):
    """A steward who owns a dataset: only its stewards (or an administrator) add versions to it and
    retire them. The steward who created the dataset is the first; each later change is an event
    (services.dataset_steward_add / dataset_steward_remove)."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="stewardships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    added_at = models.DateTimeField(auto_now_add=True)
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["dataset", "added_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "user"], name="datasets_steward_unique_user"),
        ]

    def __str__(self) -> str:
        return f"{self.user} stewards {self.dataset}"


class FileFormat(models.TextChoices):
    CSV = "csv", "CSV"
    PARQUET = "parquet", "Parquet"


class DatasetVersion(models.Model):
    """One registered file of a dataset. Immutable but for its retirement: registering again creates a
    new version."""

    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    # Relative to settings.DATASET_STORAGE_DIR; never derived from user input beyond a checked file name.
    storage_path = models.CharField(max_length=500, unique=True)
    original_name = models.CharField(max_length=255)
    file_format = models.CharField(max_length=16, choices=FileFormat.choices)
    sha256 = models.CharField(max_length=64)
    size_bytes = models.BigIntegerField()
    num_rows = models.BigIntegerField()
    positives = models.BigIntegerField()
    negatives = models.BigIntegerField()
    label_column = models.CharField(max_length=255)
    positive_value = models.CharField(max_length=255)
    unknown_tokens = models.JSONField(default=list)
    columns = models.JSONField(default=list)
    # [{"name": ..., "kind": "numeric" | "categorical"}]
    features = models.JSONField(default=list)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    # Retirement is the only change a version undergoes (services.dataset_version_retire): a retired
    # version stays for the evidence that cites it but is offered to no new experiment.
    retired_at = models.DateTimeField(null=True, blank=True)
    retired_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    retired_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["dataset__name", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "number"], name="datasets_version_unique_number"),
            models.CheckConstraint(condition=models.Q(num_rows__gt=0), name="datasets_version_rows_positive"),
            models.CheckConstraint(
                condition=models.Q(positives__gte=0, negatives__gte=0), name="datasets_version_counts_nonnegative"
            ),
            models.CheckConstraint(
                condition=models.Q(retired_at__isnull=True, retired_by__isnull=True, retired_reason="")
                | (models.Q(retired_at__isnull=False, retired_by__isnull=False) & ~models.Q(retired_reason="")),
                name="datasets_version_retired_with_who_and_why",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dataset.name} v{self.number}"

    @property
    def path(self) -> Path:
        return Path(settings.DATASET_STORAGE_DIR) / self.storage_path

    @property
    def positive_rate(self) -> float:
        return self.positives / self.num_rows if self.num_rows else 0.0

    @property
    def is_retired(self) -> bool:
        return self.retired_at is not None

    @property
    def warnings(self) -> list[str]:
        """What registration warned about the file: each repeated column name it used (its columns
        were identical, or registration would have refused it), and those it left out."""
        if len(set(self.columns)) == len(self.columns):
            return []
        used = {self.label_column, *(f["name"] for f in self.features)}
        used.update(self.attributes.values_list("name", flat=True))
        return tabular.repeated_columns_warnings(self.columns, used)


class IntegrityPurpose(models.TextChoices):
    SHARD = "shard", "before sharding"
    LAUNCH = "launch", "before launching"
    FREEZE = "freeze", "before freezing a verdict document"
    MANUAL = "manual", "on request"


class IntegrityCheck(models.Model):
    """One re-hash of a version's stored file (services.dataset_version_check_integrity).

    Append-only: written once, in its own transaction, so a failed check is kept even though the
    action it guarded is refused.
    """

    version = models.ForeignKey(DatasetVersion, on_delete=models.PROTECT, related_name="integrity_checks")
    checked_at = models.DateTimeField(auto_now_add=True)
    ok = models.BooleanField()
    # Empty when the stored file is missing (Django's one empty value for text).
    observed_sha256 = models.CharField(max_length=64, blank=True)
    purpose = models.CharField(max_length=16, choices=IntegrityPurpose.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["-checked_at", "-pk"]
        indexes = [models.Index(fields=["version", "-checked_at"], name="datasets_integrity_latest")]

    def __str__(self) -> str:
        return f"{self.version} {'ok' if self.ok else 'FAILED'} ({self.purpose})"

    @property
    def file_missing(self) -> bool:
        return not self.observed_sha256


class SensitiveAttribute(models.Model):
    version = models.ForeignKey(DatasetVersion, on_delete=models.CASCADE, related_name="attributes")
    name = models.CharField(max_length=255)
    position = models.PositiveSmallIntegerField()
    groups = models.JSONField(default=list)
    unknown_count = models.BigIntegerField()

    class Meta:
        ordering = ["version", "position"]
        constraints = [
            models.UniqueConstraint(fields=["version", "name"], name="datasets_attribute_unique_name"),
            models.UniqueConstraint(fields=["version", "position"], name="datasets_attribute_unique_position"),
        ]

    def __str__(self) -> str:
        return self.name


class GroupSummary(models.Model):
    """Rows, positives and negatives of one group (or the unknown bucket) of one attribute, or of
    the intersection of the first two attributes.

    ``attribute`` and ``group`` are keys (auditportal/fairness/files/intersections.py): ``attribute`` is
    the attribute's name or ``"<a>&<b>"`` for the intersection, each name with "%" and "&"
    percent-encoded; ``group`` is a declared attribute's value as it is, or the intersection's
    values encoded and joined the same way. So two different groups never share a row of the unique
    constraint, as ("a", "b&c") and ("a&b", "c") did when joined as "a&b&c". ``values`` holds the
    group's values themselves, one per attribute (empty for the unknown bucket).
    """

    version = models.ForeignKey(DatasetVersion, on_delete=models.CASCADE, related_name="group_summaries")
    attribute = models.CharField(max_length=511)
    is_intersection = models.BooleanField(default=False)
    group = models.CharField(max_length=511, blank=True)
    values = models.JSONField(default=list)
    is_unknown = models.BooleanField(default=False)
    rows = models.BigIntegerField()
    positives = models.BigIntegerField()
    negatives = models.BigIntegerField()
    share = models.FloatField()

    class Meta:
        ordering = ["version", "is_intersection", "attribute", "is_unknown", "group"]
        constraints = [
            models.UniqueConstraint(
                fields=["version", "attribute", "group", "is_unknown"], name="datasets_groupsummary_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(is_unknown=False) | models.Q(group=""), name="datasets_groupsummary_unknown_blank"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.attribute}={self.group if not self.is_unknown else '(unknown)'}"

    @property
    def positive_rate(self) -> float | None:
        return self.positives / self.rows if self.rows else None


class StagedStatus(models.TextChoices):
    PROFILING = "profiling", "Reading the file"
    READY = "ready", "Waiting for the declaration"
    REGISTERING = "registering", "Registering"
    REGISTERED = "registered", "Registered"
    FAILED = "failed", "Could not be read"


class StagedUpload(models.Model):
    """An uploaded file on its way to registration (services, "The browser flow").

    The web request only keeps the file; a worker profiles its columns (``profiling``), the steward
    declares label and attributes (``ready``), a worker registers it (``registering``) and the row
    then names the new version (``registered``) until it expires. A file that cannot be read ends
    ``failed``, with the reason and without its file; a declaration the worker refuses returns to
    ``ready`` with the reason and the declaration, for the form to show again.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    dataset_name = models.CharField(max_length=120)
    original_name = models.CharField(max_length=255)
    storage_path = models.CharField(max_length=500)
    size_bytes = models.BigIntegerField()
    profile = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    status = models.CharField(max_length=16, choices=StagedStatus.choices, default=StagedStatus.PROFILING)
    # What the worker is doing now, and since when (the page shows both while it waits).
    progress = models.CharField(max_length=200, blank=True)
    progress_at = models.DateTimeField(null=True, blank=True)
    # The declaration being (or last) registered: label, positive, attributes, unknown_tokens, features.
    declaration = models.JSONField(null=True, blank=True)
    # Why the file could not be read, or why the worker refused the declaration, and the form field.
    error = models.TextField(blank=True)
    error_field = models.CharField(max_length=255, blank=True)
    version = models.ForeignKey(DatasetVersion, on_delete=models.CASCADE, null=True, blank=True, related_name="+")

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=StagedStatus.values), name="datasets_staged_status_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(status=StagedStatus.REGISTERED, version__isnull=False)
                | (~models.Q(status=StagedStatus.REGISTERED) & models.Q(version__isnull=True)),
                name="datasets_staged_version_iff_registered",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.original_name} (staged)"

    @property
    def path(self) -> Path:
        return Path(settings.DATASET_STORAGE_DIR) / self.storage_path

    @property
    def is_working(self) -> bool:
        """A worker has (or will have) this upload in hand."""
        return self.status in (StagedStatus.PROFILING, StagedStatus.REGISTERING)
