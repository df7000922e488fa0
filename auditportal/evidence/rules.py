"""Who may read and who may freeze verdict documents.

One source for the selectors (which documents a user sees), the services that freeze a trial's
validation on request (experiments.services) and the pages that offer the freeze form.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from auditportal.accounts.models import User
from auditportal.accounts.rules import AUTHOR_ROLES

# Those who make evidence (accounts.rules): they also run audits and request reviews.
FREEZER_ROLES = AUTHOR_ROLES


class FreezerRequired(PermissionDenied):
    def __init__(self) -> None:
        super().__init__("Only an ML engineer or a reviewer can freeze a verdict document.")


def can_read(user: User) -> bool:
    """Whoever may see a document's subject may see the document: every member sees every prediction
    audit and every experiment (audits.rules, experiments.rules), so every document; an account
    without a role sees none."""
    return user.is_authenticated and user.is_member


def can_freeze(user: User) -> bool:
    return user.is_authenticated and any(user.has_role(role) for role in FREEZER_ROLES)


def check_freeze(user: User) -> None:
    if not can_freeze(user):
        raise FreezerRequired
