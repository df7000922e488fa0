"""Who may read the fairness policy and who may change it (docs/architecture.md).

Named as every app's rules (accounts/rules.py): ``can_<action>`` answers, ``check_<action>`` raises the
refusal (403). Every member reads the active policy and its history; administrators make the next
version.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from auditportal.accounts import rules as account_rules
from auditportal.accounts.models import Role, User


class AdministratorRequired(PermissionDenied):
    def __init__(self) -> None:
        super().__init__("Only an administrator can change the fairness policy.")


def can_view(user: User) -> bool:
    return account_rules.can_view(user)


def check_view(user: User) -> None:
    account_rules.check_view(user)


def can_change(user: User) -> bool:
    return account_rules.has_any_role(user, Role.ADMIN)


def check_change(user: User) -> None:
    if not can_change(user):
        raise AdministratorRequired
