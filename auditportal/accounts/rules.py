"""Who may do what by the roles they hold: the predicates every app's rules.py builds on.

The naming of every app's rules (approvals/rules.py is the model): ``can_<action>(user, ...)`` answers
yes or no, for pages deciding what to offer and selectors deciding what to show; ``check_<action>(user,
...)`` raises the refusal the user sees (a PermissionDenied: 403, its message shown as it is).

Outsiders (accounts without any role) must not learn that an object exists: selectors return nothing
for them, so detail routes answer 404. Members without the needed role get 403.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from auditportal.accounts.models import Role, RoleGrantProposal, User

# What an account without a role is told wherever it is refused.
NO_ROLE = "Your account has no role yet. Ask an administrator to grant you one."

# Who make evidence and ask for its review: run prediction audits, freeze verdict documents, request
# reviews. One list for the apps that check it (approvals.rules; audits and evidence).
AUTHOR_ROLES = (Role.ML_ENGINEER, Role.REVIEWER)

# The roles that decide (the committee's votes) or change who decides (administrators grant roles and
# change the policy): granting one is a proposal a different administrator confirms, the proposer and
# the grantee excluded (docs/governance.md, "Roles that decide: the two-person rule"). Revoking them,
# and granting any other role, applies at once.
DECIDING_ROLES = frozenset({Role.ETHICS_COMMITTEE, Role.ADMIN})


class RoleRequired(PermissionDenied):
    def __init__(self, role: Role, action: str) -> None:
        self.role = role
        self.action = action
        super().__init__(f"Only {role.with_article} can {action}.")


def has_any_role(user: User, *roles: Role) -> bool:
    """Whether ``user`` is logged in and holds one of ``roles`` (an anonymous user holds none)."""
    return user.is_authenticated and any(user.has_role(role) for role in roles)


def can_view(user: User) -> bool:
    """Every member (an account with at least one role) reads the portal's records; others read none."""
    return user.is_authenticated and user.is_member


def check_view(user: User) -> None:
    if not can_view(user):
        raise PermissionDenied(NO_ROLE)


def check_role(user: User, role: Role, *, action: str) -> None:
    """Refuse ``action`` (worded to follow "can") to anyone who does not hold ``role``."""
    if not has_any_role(user, role):
        raise RoleRequired(role, action)


def can_author(user: User) -> bool:
    return has_any_role(user, *AUTHOR_ROLES)


def can_manage_roles(user: User) -> bool:
    """Administrators grant and revoke roles (the user admin's actions, ``manage.py grant_role``)."""
    return has_any_role(user, Role.ADMIN)


def check_manage_roles(user: User | None) -> None:
    if user is None or not (can_manage_roles(user) and user.is_active):
        raise PermissionDenied("Only an administrator can grant or revoke roles.")


def needs_second_administrator(role: Role | str) -> bool:
    return str(role) in DECIDING_ROLES


class OwnRoleProposal(PermissionDenied):
    def __init__(self, proposal: RoleGrantProposal, who: str) -> None:
        super().__init__(
            f"You {who} role proposal #{proposal.pk}: an administrator who is neither its proposer nor its "
            "grantee must confirm it (two-person rule)."
        )


def can_confirm_role_proposal(user: User, proposal: RoleGrantProposal) -> bool:
    """An active administrator other than the proposer and the grantee (whether the proposal is still
    open is the service's)."""
    return (
        can_manage_roles(user) and user.is_active and user.pk != proposal.proposed_by_id and user.pk != proposal.user_id
    )


def check_confirm_role_proposal(user: User, proposal: RoleGrantProposal) -> None:
    check_manage_roles(user)
    if user.pk == proposal.proposed_by_id:
        raise OwnRoleProposal(proposal, "proposed")
    if user.pk == proposal.user_id:
        raise OwnRoleProposal(proposal, "are the grantee of")


def check_withdraw_role_proposal(user: User, proposal: RoleGrantProposal) -> None:
    """Any administrator, the proposer included: withdrawing grants nothing."""
    check_manage_roles(user)


def can_manage_tokens(user: User) -> bool:
    """Administrators make and revoke machine accounts' API tokens."""
    return has_any_role(user, Role.ADMIN)


def check_manage_tokens(user: User) -> None:
    if not can_manage_tokens(user):
        raise PermissionDenied("Only an administrator can create or revoke API tokens.")


def can_manage_users(user: User) -> bool:
    """Administrators create accounts, force password resets, (de)activate accounts and give admin-site
    access: never set a password (accounts.services, docs/governance.md "Accounts and passwords")."""
    return has_any_role(user, Role.ADMIN) and user.is_active


def check_manage_users(user: User | None, *, action: str) -> None:
    if user is None or not can_manage_users(user):
        raise PermissionDenied(f"Only an administrator can {action}.")
