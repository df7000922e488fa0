"""Registration in the browser: staged uploads, profiled and registered by a worker."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import models, transaction
from django.utils import timezone

from auditportal.accounts.models import User
from auditportal.datasets import rules
from auditportal.datasets.models import DatasetVersion, StagedStatus, StagedUpload
from auditportal.datasets.services.files import check_size, dataset_read_limits, place, remove_tree, storage_root
from auditportal.datasets.services.registration import (
    REGISTER_STEP_INSPECT,
    dataset_name_check,
    dataset_version_register,
)
from auditportal.fairness.errors import UserError
from auditportal.fairness.files import tabular
from auditportal.fairness.files.tabular import DatasetSpec
from auditportal.lib import uploads
from auditportal.outbox.services import task_enqueue

logger = logging.getLogger(__name__)

# Step 1, upload: the web request keeps the file after the checks that read no data (name, size,
# kind, a CSV header line, a Parquet file's metadata against the row and decompressed-size bounds)
# and queues the profile of its columns for a worker (staged_upload_profile). Step 2, declare: the
# request checks the form against that profile and queues the registration (staged_upload_declare,
# then staged_upload_register_queued in the worker). The page polls the upload's status meanwhile.

STAGED_UPLOAD_LIFETIME = timedelta(hours=24)
# A worker that has reported nothing on an upload for this long is taken for dead: its upload may
# expire like any other.
STAGED_WORK_STALE = timedelta(hours=1)
WAITING_FOR_WORKER = "Waiting for a worker to start"
PROFILE_STEP = "Reading the file and counting each column's values"


class StagedUploadBusy(UserError):
    """The upload is not waiting for a declaration (it is being read or registered, or is done)."""


def staged_uploads_expire(*, now: datetime | None = None) -> int:
    """Delete uploads whose steward never finished step 2 (they hold possibly large files), and the
    temporary files of uploads a killed web process left behind. Runs on beat's schedule
    (``datasets.expire_staged_uploads``) and before each new upload."""
    moment = now or timezone.now()
    cutoff = moment - STAGED_UPLOAD_LIFETIME
    busy = models.Q(status__in=[StagedStatus.PROFILING, StagedStatus.REGISTERING]) & models.Q(
        progress_at__gte=moment - STAGED_WORK_STALE
    )
    expired = list(StagedUpload.objects.filter(created_at__lt=cutoff).exclude(busy))
    for staged in expired:
        _staged_delete(staged)
    leftovers = uploads.stale_temporary_files_remove(older_than=STAGED_UPLOAD_LIFETIME, now=moment)
    if expired or leftovers:
        logger.info("expired %d staged uploads and %d left-over temporary upload files", len(expired), leftovers)
    return len(expired)


def staged_upload_create(*, user: User, source: Path, original_name: str, dataset_name: str) -> StagedUpload:
    """Step 1 of the browser flow: keep the uploaded file and queue the profile of its columns.

    Nothing of the file's data is read here (see above); a file refused by these checks is not kept.
    """
    rules.check_register(user)
    staged_uploads_expire()
    clean_name = dataset_name_check(dataset_name)
    # Before the file is kept or read: a name someone else owns is refused at once.
    rules.check_register_name(user, clean_name)
    tabular.check_file_name(original_name)
    size = check_size(source, original_name)
    tabular.check_file(
        source,
        display_name=original_name,
        max_bytes=settings.DATASET_MAX_UPLOAD_BYTES,
        limits=dataset_read_limits(),
    )
    directory = storage_root() / "staging" / uuid.uuid4().hex
    stored = directory / original_name
    try:
        place(source, stored, move=True)
        with transaction.atomic():
            staged = StagedUpload.objects.create(
                owner=user,
                dataset_name=clean_name,
                original_name=original_name,
                storage_path=str(stored.relative_to(storage_root())),
                size_bytes=size,
                status=StagedStatus.PROFILING,
                progress=WAITING_FOR_WORKER,
                progress_at=timezone.now(),
            )
            task_enqueue(name="datasets.profile_staged_upload", args=[str(staged.pk)])
        return staged
    except BaseException:
        remove_tree(directory)
        raise


def staged_upload_profile(*, staged_id: uuid.UUID | str) -> StagedUpload | None:
    """The worker's half of step 1: profile the staged file's columns for the declaration form.

    Claims the upload (it must still be ``profiling``); a file that cannot be read ends ``failed``
    with the reason, and its file is removed. None when there is nothing to do (discarded, done).
    """
    if not _progress(staged_id, StagedStatus.PROFILING, PROFILE_STEP):
        return None
    staged = StagedUpload.objects.get(pk=staged_id)
    try:
        profile = tabular.profile_file(
            staged.path,
            display_name=staged.original_name,
            max_bytes=settings.DATASET_MAX_UPLOAD_BYTES,
            max_values=settings.DATASET_MAX_GROUPS,
            limits=dataset_read_limits(),
        )
    except UserError as exc:
        remove_tree(staged.path.parent)
        _finish(staged_id, StagedStatus.PROFILING, status=StagedStatus.FAILED, error=str(exc), error_field="")
        return StagedUpload.objects.filter(pk=staged_id).first()
    except FileNotFoundError:
        if not StagedUpload.objects.filter(pk=staged_id).exists():
            return None  # discarded while it was being read
        raise
    except BaseException:
        remove_tree(staged.path.parent)
        _finish(staged_id, StagedStatus.PROFILING, status=StagedStatus.FAILED, error=_INTERNAL_ERROR, error_field="")
        raise
    _finish(staged_id, StagedStatus.PROFILING, status=StagedStatus.READY, profile=_profile_as_json(profile))
    return StagedUpload.objects.filter(pk=staged_id).first()


_INTERNAL_ERROR = (
    "The worker failed on this file with an internal error (it is in the worker's log); "
    "try again, or tell an administrator."
)


def _progress(staged_id: uuid.UUID | str, status: StagedStatus, step: str) -> bool:
    """Say what the worker does now; False when the upload is not (or no longer) in ``status``."""
    return bool(
        StagedUpload.objects.filter(pk=staged_id, status=status).update(progress=step, progress_at=timezone.now())
    )


def _finish(staged_id: uuid.UUID | str, expected: StagedStatus, **fields: object) -> bool:
    return bool(
        StagedUpload.objects.filter(pk=staged_id, status=expected).update(
            progress="", progress_at=timezone.now(), **fields
        )
    )


def _profile_as_json(profile: tabular.Profile) -> dict[str, object]:
    return {
        "file_format": profile.file_format,
        "num_rows": profile.num_rows,
        "columns": [
            {
                "name": column.name,
                "dtype": column.dtype,
                "distinct": column.distinct,
                "nulls": column.nulls,
                "values": [list(pair) for pair in column.values] if column.values is not None else None,
            }
            for column in profile.columns
        ],
        "identical": list(profile.identical),
    }


def declaration_as_json(spec: DatasetSpec) -> dict[str, object]:
    return {
        "label": spec.label,
        "positive": spec.positive,
        "attributes": list(spec.attributes),
        "unknown_tokens": list(spec.unknown_tokens),
        "features": None if spec.features is None else list(spec.features),
    }


def declaration_spec(declaration: dict[str, Any]) -> DatasetSpec:
    features = declaration.get("features")
    return DatasetSpec(
        label=str(declaration["label"]),
        positive=str(declaration["positive"]),
        attributes=tuple(str(name) for name in declaration["attributes"]),
        unknown_tokens=tuple(str(token) for token in declaration["unknown_tokens"]),
        features=None if features is None else tuple(str(name) for name in features),
        max_groups=settings.DATASET_MAX_GROUPS,
    )


def staged_upload_declare(*, user: User, staged: StagedUpload, spec: DatasetSpec) -> StagedUpload:
    """Step 2 of the browser flow: queue the registration of the staged file with ``spec``.

    Only an upload that waits for its declaration takes one: a second submission of the form (a
    double click, the back button) raises StagedUploadBusy and queues nothing.
    """
    rules.check_register(user)
    rules.check_staged_owner(user, staged)
    rules.check_register_name(user, staged.dataset_name)
    with transaction.atomic():
        claimed = StagedUpload.objects.filter(pk=staged.pk, owner=user, status=StagedStatus.READY).update(
            status=StagedStatus.REGISTERING,
            declaration=declaration_as_json(spec),
            error="",
            error_field="",
            progress=WAITING_FOR_WORKER,
            progress_at=timezone.now(),
        )
        if not claimed:
            current = StagedUpload.objects.filter(pk=staged.pk).values_list("status", flat=True).first()
            label = StagedStatus(current).label.lower() if current else "discarded"
            raise StagedUploadBusy(f"{staged.original_name} is not waiting for a declaration ({label}).")
        task_enqueue(name="datasets.register_staged_upload", args=[str(staged.pk)])
    staged.refresh_from_db()
    return staged


def staged_upload_register_queued(*, staged_id: uuid.UUID | str) -> DatasetVersion | None:
    """The worker's half of step 2: register an upload whose declaration was queued.

    A declaration the checks refuse (a DatasetError naming file, row and column, or the steward's
    lost role) puts the upload back to ``ready`` with the reason, for the form to show. None when
    there is nothing to do (not ``registering``: discarded, or registered already by a first run).
    """
    if not _progress(staged_id, StagedStatus.REGISTERING, REGISTER_STEP_INSPECT):
        return None
    staged = StagedUpload.objects.select_related("owner").get(pk=staged_id)
    assert staged.declaration is not None
    try:
        return staged_upload_register(
            user=staged.owner,
            staged=staged,
            spec=declaration_spec(staged.declaration),
            progress=lambda step: _progress(staged_id, StagedStatus.REGISTERING, step),
        )
    except (UserError, PermissionDenied) as exc:
        field = exc.field if isinstance(exc, UserError) else None
        _finish(staged_id, StagedStatus.REGISTERING, status=StagedStatus.READY, error=str(exc), error_field=field or "")
        return None
    except BaseException:
        _finish(staged_id, StagedStatus.REGISTERING, status=StagedStatus.READY, error=_INTERNAL_ERROR, error_field="")
        raise


def staged_upload_register(
    *,
    user: User,
    staged: StagedUpload,
    spec: DatasetSpec,
    progress: Callable[[str], object] | None = None,
) -> DatasetVersion:
    """Register the staged file with the declared label and attributes; the upload then names the
    version (``registered``), in the same transaction that creates it."""
    rules.check_staged_owner(user, staged)

    def mark_registered(version: DatasetVersion) -> None:
        StagedUpload.objects.filter(pk=staged.pk).update(
            status=StagedStatus.REGISTERED,
            version=version,
            declaration=declaration_as_json(spec),
            error="",
            error_field="",
            progress="",
            progress_at=timezone.now(),
        )

    version = dataset_version_register(
        user=user,
        source=staged.path,
        original_name=staged.original_name,
        name=staged.dataset_name,
        spec=spec,
        move_source=True,
        progress=progress,
        on_created=mark_registered,
    )
    # The file moved into the store; its staging folder is empty.
    remove_tree(staged.path.parent)
    staged.refresh_from_db()
    return version


def staged_upload_discard(*, staged: StagedUpload) -> None:
    """Delete an upload and its file, at its steward's request; not while a worker registers it."""
    if staged.status == StagedStatus.REGISTERING:
        raise StagedUploadBusy(
            f"{staged.original_name} is being registered; wait for the result, then register another file."
        )
    _staged_delete(staged)


def _staged_delete(staged: StagedUpload) -> None:
    if staged.status != StagedStatus.REGISTERED:
        remove_tree(staged.path.parent)
    staged.delete()
