"""Who may read, run and retire prediction audits.

One source for the services, which raise the refusal, and for the selectors, pages, API and command,
which scope what a user reads and offer the actions.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from auditportal.accounts.models import Role, User
from auditportal.accounts.rules import AUTHOR_ROLES
from auditportal.audits.models import PredictionAudit

# Those who make evidence (accounts.rules): they also freeze documents and request reviews.
AUDITOR_ROLES = AUTHOR_ROLES


class AuditorRequired(PermissionDenied):
    def __init__(self) -> None:
        super().__init__("Only an ML engineer or a reviewer can run prediction audits.")


class RetireForbidden(PermissionDenied):
    def __init__(self) -> None:
        super().__init__("Only the audit's author, a reviewer or an administrator can retire a prediction audit.")


def can_read(user: User) -> bool:
    """Every member reads every audit; an account without a role reads none (and learns of none: 404)."""
    return user.is_authenticated and user.is_member


def can_run(user: User) -> bool:
    return user.is_authenticated and any(user.has_role(role) for role in AUDITOR_ROLES)


def check_run(user: User) -> None:
    if not can_run(user):
        raise AuditorRequired


def can_retire(user: User, audit: PredictionAudit) -> bool:
    """Whether ``user`` is one of those who may retire ``audit`` (retired already or not)."""
    if not user.is_authenticated or not user.is_active:
        return False
    return audit.created_by_id == user.pk or user.has_role(Role.REVIEWER) or user.has_role(Role.ADMIN)


def check_retire(user: User, audit: PredictionAudit) -> None:
    if not can_retire(user, audit):
        raise RetireForbidden
