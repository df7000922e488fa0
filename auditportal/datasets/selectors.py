from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from django.db.models import Count, Max, QuerySet
from django.http import Http404

from auditportal.accounts.models import User
from auditportal.datasets import rules
from auditportal.datasets.models import (
    Dataset,
    DatasetVersion,
    GroupSummary,
    IntegrityCheck,
    StagedStatus,
    StagedUpload,
)
from auditportal.fairness.files.intersections import split_key
from auditportal.fairness.statistics import stats
from auditportal.fairness.text import numbers

# The positive rates' intervals on the version page (the figure's too): Wilson at 95%.
POSITIVE_RATE_ALPHA = stats.DEFAULT_ALPHA


def dataset_list(*, user: User) -> QuerySet[Dataset]:
    if not rules.can_view(user):
        return Dataset.objects.none()
    return Dataset.objects.annotate(version_count=Count("versions"), latest_number=Max("versions__number")).order_by(
        "name"
    )


def dataset_version_list(*, user: User, dataset: Dataset | None = None) -> QuerySet[DatasetVersion]:
    if not rules.can_view(user):
        return DatasetVersion.objects.none()
    versions = DatasetVersion.objects.select_related("dataset", "created_by")
    if dataset is not None:
        versions = versions.filter(dataset=dataset)
    return versions.order_by("dataset__name", "-number")


def dataset_version_launch_choices(*, user: User) -> QuerySet[DatasetVersion]:
    """The versions a new experiment may use: every visible one that is not retired."""
    return dataset_version_list(user=user).filter(retired_at__isnull=True)


def dataset_version_integrity_latest(*, version: DatasetVersion) -> IntegrityCheck | None:
    return version.integrity_checks.select_related("actor").order_by("-checked_at", "-pk").first()


def dataset_get(*, user: User, dataset_id: int) -> Dataset:
    try:
        return dataset_list(user=user).get(pk=dataset_id)
    except Dataset.DoesNotExist:
        raise Http404("No such dataset.") from None


def dataset_version_get(*, user: User, version_id: int) -> DatasetVersion:
    try:
        return dataset_version_list(user=user).get(pk=version_id)
    except DatasetVersion.DoesNotExist:
        raise Http404("No such dataset version.") from None


def staged_upload_list(*, user: User) -> QuerySet[StagedUpload]:
    """The user's own uploads that are not registered yet (the home page lists them)."""
    if not user.is_authenticated:
        return StagedUpload.objects.none()
    return StagedUpload.objects.filter(owner_id=user.pk).exclude(status=StagedStatus.REGISTERED).order_by("-created_at")


def staged_upload_get(*, user: User, staged_id: str) -> StagedUpload:
    # A staged file is private to its uploader until it is registered.
    try:
        return StagedUpload.objects.select_related("version__dataset").get(pk=staged_id, owner_id=user.pk)
    except (StagedUpload.DoesNotExist, ValueError):
        raise Http404("No such upload.") from None


@dataclass(frozen=True)
class GroupRow:
    group: str  # the key
    values: tuple[str, ...]  # its value in each of the table's columns; empty for the unknown bucket
    is_unknown: bool
    rows: int
    positives: int
    negatives: int
    share: float
    positive_rate: float | None
    positive_interval: tuple[float, float] | None  # Wilson, at 1 - POSITIVE_RATE_ALPHA; None without rows

    @property
    def share_percent(self) -> str:
        return numbers.percent(self.share)

    @property
    def positive_interval_text(self) -> str:
        if self.positive_interval is None:
            return ""
        low, high = self.positive_interval
        return numbers.interval(low, high, signed=False)


@dataclass(frozen=True)
class GroupTable:
    attribute: str  # the key
    columns: tuple[str, ...]  # the attribute, or the intersected attributes
    is_intersection: bool
    rows: list[GroupRow]

    @property
    def unknown(self) -> int:
        return sum(row.rows for row in self.rows if row.is_unknown)

    @property
    def unknown_percent(self) -> str:
        """The unknown bucket's share of the version's rows (every row is in one group or unknown)."""
        total = sum(row.rows for row in self.rows)
        return numbers.percent(self.unknown / total if total else 0.0)


def dataset_version_group_tables(*, version: DatasetVersion) -> list[GroupTable]:
    """The per-group summary, one table per attribute (declared order), the intersection last."""
    order = {name: position for position, name in enumerate(version.attributes.values_list("name", flat=True))}
    tables: dict[str, GroupTable] = {}
    summaries: QuerySet[GroupSummary] = version.group_summaries.order_by("attribute", "is_unknown", "-rows", "group")
    for summary in summaries:
        table = tables.setdefault(
            summary.attribute,
            GroupTable(
                attribute=summary.attribute,
                columns=split_key(summary.attribute),
                is_intersection=summary.is_intersection,
                rows=[],
            ),
        )
        table.rows.append(
            GroupRow(
                group=summary.group,
                values=tuple(summary.values),
                is_unknown=summary.is_unknown,
                rows=summary.rows,
                positives=summary.positives,
                negatives=summary.negatives,
                share=summary.share,
                positive_rate=summary.positive_rate,
                positive_interval=_wilson(summary.positives, summary.rows),
            )
        )
    return sorted(tables.values(), key=lambda table: (table.is_intersection, order.get(table.columns[0], 1_000)))


def _wilson(positives: int, rows: int) -> tuple[float, float] | None:
    if rows <= 0:
        return None
    low, high = stats.wilson_interval(np.array([positives]), np.array([rows]), POSITIVE_RATE_ALPHA)
    return (float(low[0]), float(high[0]))
