"""Who may ask why a trial's model has its gaps, and who reads the answers.

Read as the trial is read (experiments.rules.can_read: every member). Asked by those who make evidence
(accounts.rules.AUTHOR_ROLES: ML engineers and reviewers), as they freeze a trial's validation and
compare two trials' checkpoints: an attribution runs the checkpoint on a worker and is stored for good.
The checkpoint's path is shown only to those who see how runs are made (experiments.rules).
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from auditportal.accounts.models import User
from auditportal.accounts.rules import AUTHOR_ROLES
from auditportal.experiments import rules as experiment_rules

REQUESTER_ROLES = AUTHOR_ROLES


class RequesterRequired(PermissionDenied):
    def __init__(self) -> None:
        super().__init__("Only an ML engineer or a reviewer can ask for a trial's attributions.")


def can_read(user: User) -> bool:
    """Whoever reads the trial reads its attributions (an account without a role: none, and 404)."""
    return experiment_rules.can_read(user)


def can_request(user: User) -> bool:
    return user.is_authenticated and any(user.has_role(role) for role in REQUESTER_ROLES)


def check_request(user: User) -> None:
    if not can_request(user):
        raise RequesterRequired


def can_see_checkpoint_path(user: User) -> bool:
    return experiment_rules.can_see_run_internals(user)
