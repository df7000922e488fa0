"""Who may compare models and read comparisons.

The same people who audit predictions (accounts.rules.AUTHOR_ROLES) compare two models' predictions;
every member reads every comparison, as every member reads every audit.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from auditportal.accounts.models import User
from auditportal.accounts.rules import AUTHOR_ROLES

COMPARER_ROLES = AUTHOR_ROLES


class ComparerRequired(PermissionDenied):
    def __init__(self) -> None:
        super().__init__("Only an ML engineer or a reviewer can compare models.")


def can_read(user: User) -> bool:
    """Every member reads every comparison; an account without a role reads none (and learns of none: 404)."""
    return user.is_authenticated and user.is_member


def can_create(user: User) -> bool:
    return user.is_authenticated and any(user.has_role(role) for role in COMPARER_ROLES)


def check_create(user: User) -> None:
    if not can_create(user):
        raise ComparerRequired
