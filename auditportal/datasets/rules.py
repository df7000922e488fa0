"""Who may do what to datasets, their versions and staged uploads (docs/architecture.md).

One source for the services, which raise the refusal, and for the selectors and views, which tell a
page what to offer. ``can_<action>`` answers yes or no; ``check_<action>`` raises the refusal (403).

A dataset's stewards (DatasetSteward rows) own it: only they, or an administrator, add versions to it
and retire them. The steward who created it is the first; administrators add and remove others
(manage.py dataset_stewards), each change an event.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from auditportal.accounts.models import Role, User
from auditportal.accounts.rules import check_role
from auditportal.datasets.models import Dataset, DatasetSteward, StagedUpload

# Data stewards register datasets, and only they (beside administrators) can own one.
STEWARD_ROLE = Role.DATA_STEWARD
# Administrators add and remove a dataset's stewards.
STEWARD_MANAGER_ROLE = Role.ADMIN
# Asking for an integrity check changes nothing (the file is hashed again), so any of these may.
INTEGRITY_CHECK_ROLES = (Role.DATA_STEWARD, Role.ADMIN)


class DatasetOwnerRequired(PermissionDenied):
    """The user is neither a steward of the dataset nor an administrator; the message names its stewards."""

    def __init__(self, dataset: Dataset, action: str) -> None:
        self.dataset = dataset
        names = ", ".join(dataset.steward_names()) or "none"
        super().__init__(f"Only the stewards of dataset {dataset.name!r} ({names}) or an administrator can {action}.")


def can_view(user: User) -> bool:
    """Every member sees every dataset; an account without a role sees none."""
    return user.is_authenticated and user.is_member


def can_register(user: User) -> bool:
    return user.is_authenticated and user.has_role(STEWARD_ROLE)


def check_register(user: User) -> None:
    check_role(user, STEWARD_ROLE, action="register datasets")


def is_owner(user: User, dataset: Dataset) -> bool:
    if not user.is_authenticated:
        return False
    if user.has_role(Role.ADMIN):
        return True
    return user.has_role(STEWARD_ROLE) and DatasetSteward.objects.filter(dataset=dataset, user=user).exists()


def check_add_version(user: User, dataset: Dataset) -> None:
    if not is_owner(user, dataset):
        raise DatasetOwnerRequired(dataset, "add a version to it")


def check_register_name(user: User, name: str) -> None:
    """Refuse a registration under the name of an existing dataset that ``user`` does not own."""
    dataset = Dataset.objects.filter(name=name).first()
    if dataset is not None:
        check_add_version(user, dataset)


def check_staged_owner(user: User, staged: StagedUpload) -> None:
    # Selectors fetch an upload for its owner alone (anyone else gets 404); this guards a caller
    # that skipped them, such as a queued declaration.
    if staged.owner_id != user.pk:
        raise PermissionDenied("A staged upload can only be registered by the steward who uploaded it.")


def can_retire(user: User, dataset: Dataset) -> bool:
    return is_owner(user, dataset)


def check_retire(user: User, dataset: Dataset) -> None:
    if not can_retire(user, dataset):
        raise DatasetOwnerRequired(dataset, "retire its versions")


def can_check_integrity(user: User) -> bool:
    return user.is_authenticated and any(user.has_role(role) for role in INTEGRITY_CHECK_ROLES)


def check_check_integrity(user: User) -> None:
    if not can_check_integrity(user):
        raise PermissionDenied("Only a data steward or an administrator can check a version's integrity.")


def can_manage_stewards(user: User) -> bool:
    return user.is_authenticated and user.has_role(STEWARD_MANAGER_ROLE)


def check_manage_stewards(user: User) -> None:
    if not can_manage_stewards(user):
        raise PermissionDenied("Only an administrator can change a dataset's stewards.")
