"""Who reads the activity log, and which of an event's details each reader sees.

activity sits below accounts and experiments (docs/architecture.md), so it cannot import their rules;
it reads the roles a user holds by their names (accounts.models.Role's values). Each predicate here is
held equal to the rule it mirrors, for every role, by tests/activity/test_log_rules.py:

- ``can_read_log``: accounts.rules.can_view (every member reads the portal's records; an account
  without a role reads none);
- ``sees_run_internals``: experiments.rules.can_see_run_internals (a checkpoint's path);
- ``sees_account_details``: accounts.rules.can_manage_users (e-mail addresses, API tokens' keys).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import PermissionDenied

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser
    from django.contrib.auth.models import _User as User

# accounts.models.Role's values, as stored in RoleGrant.role.
ADMIN = "admin"
ML_ENGINEER = "ml_engineer"

# accounts.rules.NO_ROLE, the words every refused account without a role reads.
NO_ROLE = "Your account has no role yet. Ask an administrator to grant you one."


def _roles(user: User | AnonymousUser) -> frozenset[str]:
    if not user.is_authenticated:
        return frozenset()
    return frozenset(getattr(user, "roles", frozenset()))


def can_read_log(user: User | AnonymousUser) -> bool:
    """Every member (an account holding a role) reads the log; an account without one reads nothing."""
    return bool(_roles(user))


def check_read_log(user: User | AnonymousUser) -> None:
    if not can_read_log(user):
        raise PermissionDenied(NO_ROLE)


def sees_run_internals(user: User | AnonymousUser) -> bool:
    """ML engineers and administrators see how runs are made: a checkpoint's path in an event's data."""
    return bool(_roles(user) & {ML_ENGINEER, ADMIN})


def sees_account_details(user: User | AnonymousUser) -> bool:
    """Active administrators see accounts' e-mail addresses and API tokens' keys in events; a member
    sees their own address."""
    return ADMIN in _roles(user) and user.is_active
