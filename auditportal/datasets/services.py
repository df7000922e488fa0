from __future__ import annotations

import json
import logging
import re
import shutil
import uuid
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import models, transaction
from django.db.models import Max
from django.utils import timezone

from auditportal.accounts.models import Role, User
from auditportal.accounts.permissions import require_role
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.datasets.models import (
    Dataset,
    DatasetSteward,
    DatasetVersion,
    GroupSummary,
    IntegrityCheck,
    IntegrityPurpose,
    SensitiveAttribute,
    StagedStatus,
    StagedUpload,
)
from auditportal.fairness import sharding, tabular
from auditportal.fairness.errors import UserError
from auditportal.fairness.tabular import DatasetError, DatasetSpec, FeatureInfo, Inspection
from auditportal.fairness.text.sizes import human_size
from auditportal.lib import uploads
from auditportal.lib.files import FILE_MODE, private_dir
from auditportal.lib.transactions import inside_atomic_block

logger = logging.getLogger(__name__)

_DATASET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._()+-]{0,119}$")


def dataset_name_check(name: str) -> str:
    cleaned = name.strip()
    if not _DATASET_NAME.fullmatch(cleaned):
        raise UserError(
            f"Dataset name {name!r} is not allowed: use 1-120 letters, digits, spaces and . _ ( ) + -, "
            "starting with a letter or digit.",
            field="name",
        )
    return cleaned


def _storage_root() -> Path:
    return private_dir(settings.DATASET_STORAGE_DIR)


def dataset_read_limits() -> tabular.ReadLimits:
    """What reading an uploaded file may cost besides its size (DATASET_MAX_ROWS,
    DATASET_MAX_DECOMPRESSED_SIZE): a Parquet file is checked against its metadata before any of its
    data is read."""
    return tabular.ReadLimits(
        rows=settings.DATASET_MAX_ROWS, decompressed_bytes=settings.DATASET_MAX_DECOMPRESSED_BYTES
    )


def _check_size(path: Path, display_name: str) -> int:
    size = path.stat().st_size
    limit = settings.DATASET_MAX_UPLOAD_BYTES
    if size > limit:
        raise DatasetError(
            f"the file is {human_size(size)}, over the {human_size(limit)} limit (DATASET_MAX_UPLOAD_SIZE)",
            file=display_name,
        )
    return size


def _place(source: Path, target: Path, *, move: bool) -> None:
    """Put a file into the store without ever exposing a half-written file under its final name."""
    private_dir(target.parent)
    partial = target.with_name(f".{target.name}.partial")
    if move:
        try:
            source.rename(partial)
        except OSError:
            shutil.copyfile(source, partial)
            source.unlink()
    else:
        shutil.copyfile(source, partial)
    # A moved file keeps its mode: the store's files are 0600 whatever their source was.
    partial.chmod(FILE_MODE)
    partial.rename(target)


def _remove_tree(directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)


def dataset_version_register(
    *,
    user: User,
    source: Path,
    original_name: str,
    name: str,
    spec: DatasetSpec,
    move_source: bool = False,
    progress: Callable[[str], object] | None = None,
    on_created: Callable[[DatasetVersion], None] | None = None,
) -> DatasetVersion:
    """Validate a CSV/Parquet file and register it as the next version of the dataset ``name``.

    The file is copied into the store first and everything is computed from that copy, so what is
    hashed is exactly what is kept. Either the file and all rows exist afterwards, or neither does.
    ``progress`` hears each step as it starts; ``on_created`` runs inside the transaction that
    creates the version (so what it writes commits with the version, or not at all).
    """
    say = progress or (lambda step: None)
    require_role(user, Role.DATA_STEWARD, action="register datasets")
    clean_name = dataset_name_check(name)
    dataset_name_check_owner(user=user, name=clean_name)
    tabular.check_file_name(original_name)
    if not source.is_file():
        raise DatasetError("the file does not exist or is not a regular file", file=original_name)
    _check_size(source, original_name)

    directory = _storage_root() / uuid.uuid4().hex
    stored = directory / original_name
    max_bytes = settings.DATASET_MAX_UPLOAD_BYTES
    limits = dataset_read_limits()
    if move_source:
        # The source already lives in our store (a staged upload): check it where it is, so a
        # rejected declaration leaves the staged file in place for the steward to try again.
        say(REGISTER_STEP_INSPECT)
        inspection = tabular.inspect_file(source, spec, display_name=original_name, max_bytes=max_bytes, limits=limits)
        try:
            _place(source, stored, move=True)
        except BaseException:
            _remove_tree(directory)
            raise
    else:
        try:
            _place(source, stored, move=False)
            say(REGISTER_STEP_INSPECT)
            inspection = tabular.inspect_file(
                stored, spec, display_name=original_name, max_bytes=max_bytes, limits=limits
            )
        except BaseException:
            _remove_tree(directory)
            raise
    say(REGISTER_STEP_SAVE)
    try:
        with transaction.atomic():
            version = _version_create(
                user=user,
                name=clean_name,
                spec=spec,
                inspection=inspection,
                storage_path=str(stored.relative_to(_storage_root())),
                original_name=original_name,
            )
            if on_created is not None:
                on_created(version)
    except BaseException:
        if move_source:
            stored.rename(source)
        _remove_tree(directory)
        raise
    logger.info("registered %s (%d rows, sha256 %s)", version, version.num_rows, version.sha256)
    return version


def _version_create(
    *,
    user: User,
    name: str,
    spec: DatasetSpec,
    inspection: Inspection,
    storage_path: str,
    original_name: str,
) -> DatasetVersion:
    dataset, created = Dataset.objects.get_or_create(name=name, defaults={"created_by": user})
    if created:
        DatasetSteward.objects.create(dataset=dataset, user=user, added_by=user)
        event_record(
            actor=user, verb=Verb.DATASET_CREATED, target=dataset, data={"name": name, "stewards": [user.username]}
        )
    # Lock the dataset row so two registrations cannot both take the same version number.
    dataset = Dataset.objects.select_for_update().get(pk=dataset.pk)
    if not created:
        # Checked again under the lock: the dataset may have been created by another steward since
        # the request's early check, or this user removed from its stewards.
        _require_dataset_owner(user=user, dataset=dataset, action="add a version to it")
    number = (dataset.versions.aggregate(top=Max("number"))["top"] or 0) + 1
    version = DatasetVersion.objects.create(
        dataset=dataset,
        number=number,
        storage_path=storage_path,
        original_name=original_name,
        file_format=inspection.file_format,
        sha256=inspection.sha256,
        size_bytes=inspection.size_bytes,
        num_rows=inspection.num_rows,
        positives=inspection.positives,
        negatives=inspection.negatives,
        label_column=spec.label,
        positive_value=spec.positive.strip(),
        unknown_tokens=list(spec.unknown_tokens),
        columns=list(inspection.columns),
        features=[asdict(feature) for feature in inspection.features],
        created_by=user,
    )
    SensitiveAttribute.objects.bulk_create(
        SensitiveAttribute(
            version=version,
            name=attribute.name,
            position=position,
            groups=list(attribute.groups),
            unknown_count=attribute.unknown_count,
        )
        for position, attribute in enumerate(inspection.attributes)
    )
    GroupSummary.objects.bulk_create(
        GroupSummary(
            version=version,
            attribute=stat.attribute,
            is_intersection=stat.is_intersection,
            group=stat.group or "",
            values=list(stat.values or ()),
            is_unknown=stat.values is None,
            rows=stat.rows,
            positives=stat.positives,
            negatives=stat.negatives,
            share=stat.share,
        )
        for stat in inspection.groups
    )
    event_record(
        actor=user,
        verb=Verb.DATASET_VERSION_REGISTERED,
        target=version,
        data={
            "dataset": name,
            "number": number,
            "sha256": inspection.sha256,
            "rows": inspection.num_rows,
            "file": original_name,
        },
    )
    return version


# -- The browser flow ------------------------------------------------------------------------------
#
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
REGISTER_STEP_INSPECT = "Reading every row: checking the label and the sensitive attributes, hashing the file"
REGISTER_STEP_SAVE = "Saving the version and its group counts"


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
    require_role(user, Role.DATA_STEWARD, action="register datasets")
    staged_uploads_expire()
    clean_name = dataset_name_check(dataset_name)
    # Before the file is kept or read: a name someone else owns is refused at once.
    dataset_name_check_owner(user=user, name=clean_name)
    tabular.check_file_name(original_name)
    size = _check_size(source, original_name)
    tabular.check_file(
        source,
        display_name=original_name,
        max_bytes=settings.DATASET_MAX_UPLOAD_BYTES,
        limits=dataset_read_limits(),
    )
    directory = _storage_root() / "staging" / uuid.uuid4().hex
    stored = directory / original_name
    try:
        _place(source, stored, move=True)
        with transaction.atomic():
            staged = StagedUpload.objects.create(
                owner=user,
                dataset_name=clean_name,
                original_name=original_name,
                storage_path=str(stored.relative_to(_storage_root())),
                size_bytes=size,
                status=StagedStatus.PROFILING,
                progress=WAITING_FOR_WORKER,
                progress_at=timezone.now(),
            )
            pk = staged.pk
            transaction.on_commit(lambda: _queue("datasets.profile_staged_upload", pk))
        return staged
    except BaseException:
        _remove_tree(directory)
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
        _remove_tree(staged.path.parent)
        _finish(staged_id, StagedStatus.PROFILING, status=StagedStatus.FAILED, error=str(exc), error_field="")
        return StagedUpload.objects.filter(pk=staged_id).first()
    except FileNotFoundError:
        if not StagedUpload.objects.filter(pk=staged_id).exists():
            return None  # discarded while it was being read
        raise
    except BaseException:
        _remove_tree(staged.path.parent)
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
    require_role(user, Role.DATA_STEWARD, action="register datasets")
    if staged.owner_id != user.pk:
        raise PermissionDenied("A staged upload can only be registered by the steward who uploaded it.")
    dataset_name_check_owner(user=user, name=staged.dataset_name)
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
        pk = staged.pk
        transaction.on_commit(lambda: _queue("datasets.register_staged_upload", pk))
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
    if staged.owner_id != user.pk:
        # Callers fetch the upload with selectors.staged_upload_get, which already answers 404 to
        # everyone but its owner; this guards a caller that skipped it.
        raise PermissionDenied("A staged upload can only be registered by the steward who uploaded it.")

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
    _remove_tree(staged.path.parent)
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
        _remove_tree(staged.path.parent)
    staged.delete()


def _queue(task_name: str, staged_id: uuid.UUID) -> None:
    # tasks.py imports this module; importing it here keeps the dependency one-way at import time.
    from auditportal.datasets import tasks

    task = {
        "datasets.profile_staged_upload": tasks.staged_upload_profile_task,
        "datasets.register_staged_upload": tasks.staged_upload_register_task,
    }[task_name]
    task.delay(str(staged_id))


class DatasetIntegrityError(UserError):
    """The stored file no longer has the SHA-256 it was registered with (or is gone)."""


def integrity_failure_message(version: DatasetVersion, observed_sha256: str | None) -> str:
    if observed_sha256 is None:
        found = f"the stored file {version.original_name} is missing (registered SHA-256 {version.sha256})"
        advice = "Restore it, or register the file again as a new version."
    else:
        found = f"the stored file's SHA-256 is {observed_sha256}, registered {version.sha256}"
        advice = "The file changed after registration; register the correct file as a new version."
    return f"Dataset version {version.dataset.name} v{version.number} failed its integrity check: {found}. {advice}"


def dataset_version_check_integrity(
    *,
    version: DatasetVersion,
    actor: User | None,
    purpose: IntegrityPurpose | str = IntegrityPurpose.MANUAL,
) -> IntegrityCheck:
    """Hash the stored file again, record the check, and raise DatasetIntegrityError on a mismatch.

    Called before sharding, launching and freezing a verdict document. The record (and, on a
    mismatch, the DATASET_VERSION_INTEGRITY_FAILED event) commits in its own transaction although
    the guarded action is refused, so callers run it before opening theirs.
    """
    if inside_atomic_block():
        raise RuntimeError(
            "dataset_version_check_integrity must not run inside an atomic block: a failed check's record "
            "and event must commit although the action is refused; call it before opening the transaction"
        )
    path = version.path
    observed = tabular.file_sha256(path) if path.is_file() else None
    return _integrity_record(version=version, actor=actor, purpose=purpose, observed=observed)


def _integrity_record(
    *, version: DatasetVersion, actor: User | None, purpose: IntegrityPurpose | str, observed: str | None
) -> IntegrityCheck:
    ok = observed == version.sha256
    with transaction.atomic(durable=True):
        check = IntegrityCheck.objects.create(
            version=version, ok=ok, observed_sha256=observed or "", purpose=IntegrityPurpose(purpose), actor=actor
        )
        if not ok:
            event_record(
                actor=actor,
                verb=Verb.DATASET_VERSION_INTEGRITY_FAILED,
                target=version,
                data={
                    "dataset": version.dataset.name,
                    "number": version.number,
                    "purpose": check.purpose,
                    "registered_sha256": version.sha256,
                    "observed_sha256": observed,
                    "check": check.pk,
                },
            )
    if not ok:
        logger.warning("integrity check of %s failed (%s): observed %s", version, check.purpose, observed)
        raise DatasetIntegrityError(integrity_failure_message(version, observed))
    return check


def dataset_version_retire(*, user: User, version: DatasetVersion, reason: str) -> DatasetVersion:
    """Take a version out of use for new experiments; it stays, with everything that cites it."""
    _require_dataset_owner(user=user, dataset=version.dataset, action="retire its versions")
    cleaned = reason.strip()
    if not cleaned:
        raise UserError("Say why this version is retired.", field="reason")
    with transaction.atomic():
        locked = DatasetVersion.objects.select_for_update().get(pk=version.pk)
        if locked.retired_at is not None:
            assert locked.retired_by is not None
            raise UserError(
                f"{locked} was already retired on {locked.retired_at:%Y-%m-%d %H:%M} UTC "
                f"by {locked.retired_by.username}."
            )
        locked.retired_at = timezone.now()
        locked.retired_by = user
        locked.retired_reason = cleaned
        locked.save(update_fields=["retired_at", "retired_by", "retired_reason"])
        version.retired_at, version.retired_by, version.retired_reason = locked.retired_at, user, cleaned
        event_record(
            actor=user,
            verb=Verb.DATASET_VERSION_RETIRED,
            target=locked,
            data={"dataset": locked.dataset.name, "number": locked.number, "reason": cleaned},
        )
    return locked


def dataset_version_can_retire(*, user: User, dataset: Dataset) -> bool:
    """The dataset's stewards and administrators retire its versions."""
    return dataset_is_owner(user=user, dataset=dataset)


def dataset_version_can_check(*, user: User) -> bool:
    """Data stewards and administrators ask for integrity checks (a re-hash changes nothing)."""
    return user.has_role(Role.DATA_STEWARD) or user.has_role(Role.ADMIN)


# -- Ownership -------------------------------------------------------------------------------------
#
# A dataset's stewards (DatasetSteward rows) own it: only they, or an administrator, add versions to
# it and retire them. The steward who created it is the first; administrators add and remove others
# (manage.py dataset_stewards), each change an event.


class DatasetOwnerRequired(PermissionDenied):
    def __init__(self, dataset: Dataset, action: str) -> None:
        self.dataset = dataset
        names = ", ".join(dataset_steward_names(dataset=dataset)) or "none"
        super().__init__(f"Only the stewards of dataset {dataset.name!r} ({names}) or an administrator can {action}.")


def dataset_steward_names(*, dataset: Dataset) -> list[str]:
    stewards = DatasetSteward.objects.filter(dataset=dataset).order_by("added_at", "pk")
    return list(stewards.values_list("user__username", flat=True))


def dataset_is_owner(*, user: User, dataset: Dataset) -> bool:
    if not user.is_authenticated:
        return False
    if user.has_role(Role.ADMIN):
        return True
    return user.has_role(Role.DATA_STEWARD) and DatasetSteward.objects.filter(dataset=dataset, user=user).exists()


def _require_dataset_owner(*, user: User, dataset: Dataset, action: str) -> None:
    if not dataset_is_owner(user=user, dataset=dataset):
        raise DatasetOwnerRequired(dataset, action)


def dataset_name_check_owner(*, user: User, name: str) -> None:
    """Refuse a registration under the name of an existing dataset that ``user`` does not own."""
    dataset = Dataset.objects.filter(name=name).first()
    if dataset is not None:
        _require_dataset_owner(user=user, dataset=dataset, action="add a version to it")


def dataset_can_manage_stewards(*, user: User) -> bool:
    return user.is_authenticated and user.has_role(Role.ADMIN)


def _require_steward_manager(actor: User | None) -> None:
    if actor is not None and not dataset_can_manage_stewards(user=actor):
        raise PermissionDenied("Only an administrator can change a dataset's stewards.")


def dataset_steward_add(*, dataset: Dataset, user: User, actor: User | None) -> DatasetSteward:
    """Make ``user`` (a data steward) a steward of ``dataset``; the actor is an administrator (None:
    the system)."""
    _require_steward_manager(actor)
    if not user.is_active:
        raise UserError(f"{user.username} is not an active account.", field="user")
    if not user.has_role(Role.DATA_STEWARD):
        raise UserError(
            f"{user.username} is not a data steward: grant the role first, then make them a steward of "
            f"{dataset.name!r}.",
            field="user",
        )
    with transaction.atomic():
        Dataset.objects.select_for_update().get(pk=dataset.pk)
        if DatasetSteward.objects.filter(dataset=dataset, user=user).exists():
            raise UserError(f"{user.username} is already a steward of {dataset.name!r}.", field="user")
        steward = DatasetSteward.objects.create(dataset=dataset, user=user, added_by=actor)
        event_record(
            actor=actor,
            verb=Verb.DATASET_STEWARD_ADDED,
            target=dataset,
            data={"dataset": dataset.name, "steward": user.username},
        )
    return steward


def dataset_steward_remove(*, dataset: Dataset, user: User, actor: User | None) -> None:
    """Take ``user`` off the stewards of ``dataset``; its last steward stays (add another first)."""
    _require_steward_manager(actor)
    with transaction.atomic():
        Dataset.objects.select_for_update().get(pk=dataset.pk)
        stewards = list(DatasetSteward.objects.filter(dataset=dataset).select_related("user"))
        mine = [steward for steward in stewards if steward.user_id == user.pk]
        if not mine:
            raise UserError(f"{user.username} is not a steward of {dataset.name!r}.", field="user")
        if len(stewards) == 1:
            raise UserError(
                f"{user.username} is the last steward of {dataset.name!r}: add another steward first.", field="user"
            )
        mine[0].delete()
        event_record(
            actor=actor,
            verb=Verb.DATASET_STEWARD_REMOVED,
            target=dataset,
            data={"dataset": dataset.name, "steward": user.username},
        )


def dataset_version_shard(
    *,
    version: DatasetVersion,
    parts: int,
    out_dir: Path | None = None,
    seed: int = 0,
    overwrite: bool = False,
    actor: User | None = None,
) -> tuple[Path, dict[str, object]]:
    """Write the version's stored file as ``parts`` shards whose manifest carries its SHA-256.

    Refused with DatasetIntegrityError when the stored file no longer has its registered hash: it
    is checked before reading, and hashed again beside the read, so the manifest's hash is the
    hash of the bytes the shards came from. Must run outside any transaction (it records checks).
    """
    dataset_version_check_integrity(version=version, actor=actor, purpose=IntegrityPurpose.SHARD)
    spec = dataset_spec_for(version)
    table, read_sha256 = tabular.load_normalized_hashed(version.path, spec, display_name=version.original_name)
    if read_sha256 != version.sha256:
        # Changed between the check and the read.
        _integrity_record(version=version, actor=actor, purpose=IntegrityPurpose.SHARD, observed=read_sha256)
    target = out_dir or shard_dir_default(version=version, parts=parts, seed=seed)
    shard_spec = sharding.ShardSpec(
        label_column=version.label_column,
        positive=version.positive_value,
        features=tuple(FeatureInfo(name=f["name"], kind=f["kind"]) for f in version.features),
        attributes=tuple(
            sharding.AttributeSpec(
                name=attribute.name,
                groups=tuple(attribute.groups),
                unknown_tokens=tuple(version.unknown_tokens),
            )
            for attribute in version.attributes.all()
        ),
        dataset={"version_id": version.pk, "name": version.dataset.name, "sha256": read_sha256},
    )
    manifest = sharding.write_shards(table, shard_spec, parts=parts, out_dir=target, seed=seed, overwrite=overwrite)
    return target, manifest


def shards_match_version(*, out_dir: Path, version: DatasetVersion) -> bool:
    """Whether ``out_dir`` holds complete, consistent shards written from this version's registered bytes."""
    try:
        manifest = json.loads((out_dir / sharding.MANIFEST_NAME).read_text(encoding="utf-8"))
        dataset = manifest["dataset"]
        if dataset["sha256"] != version.sha256 or dataset["version_id"] != version.pk:
            return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return not sharding.check_shards(out_dir)


def shard_dir_default(*, version: DatasetVersion, parts: int, seed: int) -> Path:
    return Path(settings.SHARD_DIR) / f"version-{version.pk}-k{parts}-seed{seed}"


def dataset_spec_for(version: DatasetVersion) -> DatasetSpec:
    return DatasetSpec(
        label=version.label_column,
        positive=version.positive_value,
        attributes=tuple(version.attributes.order_by("position").values_list("name", flat=True)),
        unknown_tokens=tuple(version.unknown_tokens),
        features=tuple(f["name"] for f in version.features),
        max_groups=settings.DATASET_MAX_GROUPS,
    )
