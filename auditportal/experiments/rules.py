"""Who may read, launch and cancel experiments, and who sees how their runs are made.

One source for the services, which raise the refusal, and for the selectors and pages, which scope
what a user reads and offer the actions.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from auditportal.accounts.models import Role, User
from auditportal.accounts.rules import check_role
from auditportal.experiments.models import Experiment


class CancelForbidden(PermissionDenied):
    def __init__(self, experiment: Experiment) -> None:
        super().__init__(
            f"Only the engineer who launched experiment {experiment.pk} ({experiment.launched_by.username}) "
            "or an administrator can cancel it."
        )


def can_read(user: User) -> bool:
    """Every member reads every experiment, its trials and their metrics; an account without a role
    reads none (and learns of none: 404)."""
    return user.is_authenticated and user.is_member


def can_see_run_internals(user: User) -> bool:
    """Whether ``user`` sees how runs are made: trial log tails (absolute paths, tracebacks),
    checkpoint paths and the full experiment config. ML engineers and administrators do; reviewers,
    committee members and stewards see the metrics and verdicts without them (least privilege)."""
    return user.is_authenticated and (user.has_role(Role.ML_ENGINEER) or user.has_role(Role.ADMIN))


def can_launch(user: User) -> bool:
    return user.is_authenticated and user.has_role(Role.ML_ENGINEER)


def check_launch(user: User) -> None:
    check_role(user, Role.ML_ENGINEER, action="launch experiments")


def can_cancel(user: User, experiment: Experiment) -> bool:
    """Its launcher (still an ML engineer) or an administrator cancels an experiment."""
    if not user.is_authenticated:
        return False
    if user.has_role(Role.ADMIN):
        return True
    return experiment.launched_by_id == user.pk and user.has_role(Role.ML_ENGINEER)


def check_cancel(user: User, experiment: Experiment) -> None:
    if not can_cancel(user, experiment):
        raise CancelForbidden(experiment)
