"""Retirement: a version is taken out of use for new experiments and kept for the evidence that
cites it."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.datasets import rules
from auditportal.datasets.models import DatasetVersion
from auditportal.datasets.signals import dataset_version_retired
from auditportal.fairness.errors import UserError


def dataset_version_retire(*, user: User, version: DatasetVersion, reason: str) -> DatasetVersion:
    """Take a version out of use for new experiments; it stays, with everything that cites it."""
    rules.check_retire(user, version.dataset)
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
        dataset_version_retired.send(sender=DatasetVersion, version=locked, by=user, reason=cleaned)
    return locked
