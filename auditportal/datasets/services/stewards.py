"""Stewards: administrators add and remove the stewards who own a dataset (who may do what:
datasets/rules.py)."""

from __future__ import annotations

from django.db import transaction

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.datasets import rules
from auditportal.datasets.models import Dataset, DatasetSteward
from auditportal.fairness.errors import UserError


def dataset_steward_add(*, dataset: Dataset, user: User, actor: User | None) -> DatasetSteward:
    """Make ``user`` (a data steward) a steward of ``dataset``; the actor is an administrator (None:
    the system)."""
    if actor is not None:
        rules.check_manage_stewards(actor)
    if not user.is_active:
        raise UserError(f"{user.username} is not an active account.", field="user")
    if not user.has_role(rules.STEWARD_ROLE):
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
    if actor is not None:
        rules.check_manage_stewards(actor)
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
