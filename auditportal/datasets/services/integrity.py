"""Integrity: a stored file is hashed again against the SHA-256 it was registered with, and each
check is recorded."""

from __future__ import annotations

import logging

from django.db import transaction

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.datasets.models import DatasetVersion, IntegrityCheck, IntegrityPurpose
from auditportal.fairness.errors import UserError
from auditportal.fairness.files import tabular
from auditportal.lib.transactions import inside_atomic_block

logger = logging.getLogger(__name__)


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
    return integrity_record(version=version, actor=actor, purpose=purpose, observed=observed)


def integrity_record(
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
