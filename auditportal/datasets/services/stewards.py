"""Stewards: who owns a dataset, and the administrators' changes to its stewards."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import transaction

from auditportal.accounts.models import Role, User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.datasets.models import Dataset, DatasetSteward
from auditportal.fairness.errors import UserError

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
