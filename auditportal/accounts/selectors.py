"""Reads of the accounts app for the members pages: administrators only (rules.can_manage_users)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Prefetch, Q, QuerySet
from django.http import Http404

from auditportal.accounts.models import Role, RoleGrant, RoleGrantProposal, User
from auditportal.accounts.rules import can_confirm_role_proposal, check_manage_users
from auditportal.activity.models import Event
from auditportal.activity.selectors import event_list

# "No role": accounts that hold none (new, or machine accounts: gate tokens' and portal-cli).
NO_ROLE_FILTER = "none"


def member_list(*, viewer: User, role: str = "", active: bool | None = None, search: str = "") -> QuerySet[User]:
    """Every account, by username, with its grants, narrowed by ``role`` (a Role value, or
    NO_ROLE_FILTER), by whether it is ``active``, and by ``search``: part of its username, first or last
    name or e-mail address."""
    check_manage_users(viewer, action="list the members")
    users = User.objects.prefetch_related(Prefetch("role_grants", queryset=RoleGrant.objects.order_by("role")))
    if role == NO_ROLE_FILTER:
        users = users.filter(role_grants__isnull=True)
    elif role:
        users = users.filter(role_grants__role=role)
    if active is not None:
        users = users.filter(is_active=active)
    for word in search.split():
        users = users.filter(
            Q(username__icontains=word)
            | Q(first_name__icontains=word)
            | Q(last_name__icontains=word)
            | Q(email__icontains=word)
        )
    return users.order_by("username").distinct()


def member_get(*, viewer: User, user_id: int) -> User:
    check_manage_users(viewer, action="see members' accounts")
    user = User.objects.filter(pk=user_id).prefetch_related("role_grants").first()
    if user is None:
        raise Http404("No such account.")
    return user


@dataclass(frozen=True)
class OpenProposal:
    """A grant of a deciding role that waits for a second administrator."""

    proposal: RoleGrantProposal
    # Active administrators other than its proposer and its grantee (rules.can_confirm_role_proposal).
    confirmers: list[str]
    viewer_may_confirm: bool


def role_proposals_open(*, viewer: User, user: User | None = None) -> list[OpenProposal]:
    """The open role proposals (of ``user``, or everyone's), oldest first, each with who may confirm it."""
    check_manage_users(viewer, action="see role proposals")
    proposals = RoleGrantProposal.objects.filter(closure__isnull=True).select_related("proposed_by", "user")
    if user is not None:
        proposals = proposals.filter(user=user)
    admins = list(User.objects.filter(role_grants__role=Role.ADMIN, is_active=True).order_by("username"))
    found = []
    for proposal in proposals.order_by("pk"):
        confirmers = [admin.username for admin in admins if can_confirm_role_proposal(admin, proposal)]
        found.append(OpenProposal(proposal, confirmers, can_confirm_role_proposal(viewer, proposal)))
    return found


def member_events(*, viewer: User, user: User, limit: int = 20) -> list[Event]:
    """The newest events about ``user``'s account (its roles, password, address, activation and role
    proposals) and those they wrote, newest first."""
    check_manage_users(viewer, action="see members' accounts")
    # What the log page shows ``viewer`` (another account's queued audit is left out there too).
    events = event_list(viewer=viewer)
    about = Q(target_type=User._meta.label_lower, target_id=str(user.pk)) | Q(actor=user)
    proposals = [str(pk) for pk in RoleGrantProposal.objects.filter(user=user).values_list("pk", flat=True)]
    if proposals:
        about |= Q(target_type=RoleGrantProposal._meta.label_lower, target_id__in=proposals)
    return list(events.filter(about)[:limit])
