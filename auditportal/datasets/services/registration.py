"""Registration: a checked CSV/Parquet file becomes the next immutable version of a dataset, with
its declared label and sensitive attributes and its per-group counts."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.datasets import rules
from auditportal.datasets.models import Dataset, DatasetSteward, DatasetVersion, GroupSummary, SensitiveAttribute
from auditportal.datasets.services.files import check_size, dataset_read_limits, place, remove_tree, storage_root
from auditportal.fairness.errors import UserError
from auditportal.fairness.files import tabular
from auditportal.fairness.files.tabular import DatasetError, DatasetSpec, Inspection

logger = logging.getLogger(__name__)

# The steps a registration reports through ``progress`` (the upload's page shows them).
REGISTER_STEP_INSPECT = "Reading every row: checking the label and the sensitive attributes, hashing the file"
REGISTER_STEP_SAVE = "Saving the version and its group counts"

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
    rules.check_register(user)
    clean_name = dataset_name_check(name)
    rules.check_register_name(user, clean_name)
    tabular.check_file_name(original_name)
    if not source.is_file():
        raise DatasetError("the file does not exist or is not a regular file", file=original_name)
    check_size(source, original_name)

    directory = storage_root() / uuid.uuid4().hex
    stored = directory / original_name
    max_bytes = settings.DATASET_MAX_UPLOAD_BYTES
    limits = dataset_read_limits()
    if move_source:
        # The source already lives in our store (a staged upload): check it where it is, so a
        # rejected declaration leaves the staged file in place for the steward to try again.
        say(REGISTER_STEP_INSPECT)
        inspection = tabular.inspect_file(source, spec, display_name=original_name, max_bytes=max_bytes, limits=limits)
        try:
            place(source, stored, move=True)
        except BaseException:
            remove_tree(directory)
            raise
    else:
        try:
            place(source, stored, move=False)
            say(REGISTER_STEP_INSPECT)
            inspection = tabular.inspect_file(
                stored, spec, display_name=original_name, max_bytes=max_bytes, limits=limits
            )
        except BaseException:
            remove_tree(directory)
            raise
    say(REGISTER_STEP_SAVE)
    try:
        with transaction.atomic():
            version = _version_create(
                user=user,
                name=clean_name,
                spec=spec,
                inspection=inspection,
                storage_path=str(stored.relative_to(storage_root())),
                original_name=original_name,
            )
            if on_created is not None:
                on_created(version)
    except BaseException:
        if move_source:
            stored.rename(source)
        remove_tree(directory)
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
        rules.check_add_version(user, dataset)
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
