"""A member's own password: changing it, and setting it from the one-time link (accounts.services);
and the administrators' members pages: the accounts, their roles, role proposals, activation and
password resets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from auditportal.accounts import selectors, services
from auditportal.accounts.forms import (
    ActiveForm,
    EmailForm,
    MemberCreateForm,
    MemberSearchForm,
    PasswordChangeForm,
    PasswordSetForm,
    RoleForm,
)
from auditportal.accounts.models import Role, RoleGrantProposal, User
from auditportal.accounts.permissions import request_user
from auditportal.accounts.rules import check_manage_roles, check_manage_users, needs_second_administrator
from auditportal.activity.presentation import event_rows
from auditportal.fairness.errors import UserError
from auditportal.lib.forms import add_user_error
from auditportal.lib.http import see_other


@sensitive_post_parameters()
@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def password_change(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    form = PasswordChangeForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            services.user_password_change(
                user=user,
                old_password=form.cleaned_data["old_password"],
                new_password=form.cleaned_data["new_password"],
            )
        except UserError as exc:
            add_user_error(form, exc)
        else:
            update_session_auth_hash(request, user)  # this session goes on; the others end
            messages.success(request, "Your password is changed; your votes are signed with the new one.")
            return redirect("home")
    return render(request, "accounts/password_change.html", {"form": form}, status=400 if form.errors else 200)


@sensitive_post_parameters()
@never_cache
@require_http_methods(["GET", "POST"])
def password_set(request: HttpRequest, uidb64: str, token: str) -> HttpResponse:
    account = services.password_link_user(uidb64=uidb64, token=token)
    if account is None:
        return render(request, "accounts/password_set.html", {"form": None}, status=404)
    form = PasswordSetForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            services.user_password_set_from_link(
                uidb64=uidb64, token=token, new_password=form.cleaned_data["new_password"]
            )
        except UserError as exc:
            add_user_error(form, exc)
        else:
            messages.success(request, "Your password is set: log in with it.")
            return redirect("login")
    return render(
        request,
        "accounts/password_set.html",
        {"form": form, "account": account},
        status=400 if form.errors else 200,
    )


# The members pages: administrators manage accounts here (accounts.services does each change and
# writes its event); docs/governance.md, "Accounts and passwords".

MEMBERS_PER_PAGE = 50
MEMBER_EVENTS = 20


@login_required
@require_GET
def member_list(request: HttpRequest) -> HttpResponse:
    viewer = request_user(request)
    check_manage_users(viewer, action="manage members")
    form = MemberSearchForm(request.GET if request.GET else None)
    wanted: dict[str, Any] = {}
    if form.is_bound:
        form.is_valid()  # a value that is not one is named on its field; the others still narrow the list
        cleaned = form.cleaned_data
        wanted = {
            "role": cleaned.get("role") or "",
            "active": {"yes": True, "no": False}.get(cleaned.get("active") or ""),
            "search": cleaned.get("q") or "",
        }
    members = selectors.member_list(viewer=viewer, **wanted)
    page = Paginator(members, MEMBERS_PER_PAGE).get_page(request.GET.get("page"))
    proposals = selectors.role_proposals_open(viewer=viewer)
    pending: dict[int, list[str]] = {}
    for item in proposals:
        pending.setdefault(item.proposal.user_id, []).append(item.proposal.get_role_display())
    rows = [
        (member, [grant.get_role_display() for grant in member.role_grants.all()], pending.get(member.pk, []))
        for member in page.object_list
    ]
    context = {
        "form": form,
        "searched": any(wanted.values()),
        "page": page,
        "rows": rows,
        "proposals": proposals,
    }
    return render(request, "accounts/members.html", context, status=400 if form.errors else 200)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def member_new(request: HttpRequest) -> HttpResponse:
    viewer = request_user(request)
    check_manage_users(viewer, action="create accounts")
    form = MemberCreateForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            member = services.user_create(
                username=data["username"],
                email=data["email"],
                first_name=data["first_name"],
                last_name=data["last_name"],
                roles=[Role(value) for value in data["roles"]],
                created_by=viewer,
            )
        except UserError as exc:
            add_user_error(form, exc)
        else:
            messages.success(request, _created_message(member))
            return see_other("accounts:member", user_id=member.pk)
    # A refused form is shown again at this page's own address, with what was typed (no password is asked).
    context = {"form": form, "link_hours": settings.PASSWORD_LINK_HOURS}
    return render(request, "accounts/member_new.html", context, status=400 if form.errors else 200)


def _created_message(member: User) -> str:
    held = ", ".join(Role(role).noun for role in sorted(member.roles))
    proposed = ", ".join(Role(proposal.role).noun for proposal in member.role_proposals.filter(closure__isnull=True))
    text = (
        f"Account {member.username} created. A one-time link to set their password is being mailed to "
        f"{member.email}; it works for {settings.PASSWORD_LINK_HOURS} hours."
    )
    if held:
        text += f" Roles granted: {held}."
    if proposed:
        text += f" Proposed, waiting for a second administrator: {proposed}."
    return text


@login_required
@require_GET
def member_detail(request: HttpRequest, user_id: int) -> HttpResponse:
    viewer = request_user(request)
    member = selectors.member_get(viewer=viewer, user_id=user_id)
    grants = list(member.role_grants.select_related("granted_by", "proposal__proposed_by").order_by("role"))
    proposals = selectors.role_proposals_open(viewer=viewer, user=member)
    waiting = {item.proposal.role for item in proposals}
    held = {grant.role for grant in grants}
    grantable = [
        (role.value, role.label, needs_second_administrator(role)) for role in Role if role not in held | waiting
    ]
    context = {
        "member": member,
        "grants": grants,
        "proposals": proposals,
        "grantable": grantable,
        "is_self": member.pk == viewer.pk,
        # An administrator corrects the address only of an account no one has used (services.user_email_change).
        "email_correctable": member.last_login is None and not member.has_usable_password(),
        "events": event_rows(selectors.member_events(viewer=viewer, user=member, limit=MEMBER_EVENTS), viewer=viewer),
        "link_hours": settings.PASSWORD_LINK_HOURS,
    }
    return render(request, "accounts/member.html", context)


Action = Callable[[User, User, dict[str, Any]], str]


def _member_act(request: HttpRequest, user_id: int, form_class: type[forms.Form] | None, act: Action) -> HttpResponse:
    """Validate the posted form, call the service through ``act`` (which returns what to tell), and go
    back to the member's page (303): with the message of what was done, or of why it was refused."""
    viewer = request_user(request)
    member = selectors.member_get(viewer=viewer, user_id=user_id)
    form = form_class(request.POST) if form_class is not None else None
    if form is not None and not form.is_valid():
        messages.error(request, _form_errors(form))
    else:
        try:
            done = act(viewer, member, form.cleaned_data if form is not None else {})
        except UserError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, done)
    return see_other("accounts:member", user_id=member.pk)


def _form_errors(form: forms.Form) -> str:
    said = []
    for name, errors in form.errors.items():
        text = " ".join(str(error) for error in errors)
        said.append(f"{form.fields[name].label}: {text}" if name in form.fields else text)
    return " ".join(said)


def _grant(viewer: User, member: User, data: dict[str, Any]) -> str:
    role = Role(data["role"])
    made = services.role_grant_propose(user=member, role=role, by=viewer)
    if isinstance(made, RoleGrantProposal):
        return (
            f"Proposed {member.username} as {role.with_article} (proposal #{made.pk}): it takes effect when an "
            f"administrator other than you and {member.username} confirms it."
        )
    return f"{member.username} now holds the {role.noun} role."


def _revoke(viewer: User, member: User, data: dict[str, Any]) -> str:
    check_manage_roles(viewer)
    role = Role(data["role"])
    if not services.role_revoke(user=member, role=role, revoked_by=viewer):
        raise services.AccountError(f"{member.username} does not hold the {role.noun} role.", field="role")
    return f"{member.username} no longer holds the {role.noun} role."


def _active(viewer: User, member: User, data: dict[str, Any]) -> str:
    if data["active"] == "yes":
        changed = services.user_activate(user=member, by=viewer)
        return f"{member.username} can log in again." if changed else f"{member.username} was already active."
    changed = services.user_deactivate(user=member, by=viewer)
    return (
        f"{member.username} is deactivated: they can no longer log in, and their sessions end."
        if changed
        else f"{member.username} was already deactivated."
    )


def _reset(viewer: User, member: User, data: dict[str, Any]) -> str:
    member = services.user_password_reset_force(user=member, reset_by=viewer)
    return (
        f"{member.username}'s password no longer works, and their sessions end. A one-time link to set a new "
        f"one is being mailed to {member.email}; it works for {settings.PASSWORD_LINK_HOURS} hours."
    )


def _email(viewer: User, member: User, data: dict[str, Any]) -> str:
    member = services.user_email_change(user=member, by=viewer, email=data["email"])
    return (
        f"{member.username}'s e-mail address is now {member.email}. Force a password reset to mail them the link there."
    )


@login_required
@require_POST
def member_role_grant(request: HttpRequest, user_id: int) -> HttpResponse:
    return _member_act(request, user_id, RoleForm, _grant)


@login_required
@require_POST
def member_role_revoke(request: HttpRequest, user_id: int) -> HttpResponse:
    return _member_act(request, user_id, RoleForm, _revoke)


@login_required
@require_POST
def member_active(request: HttpRequest, user_id: int) -> HttpResponse:
    return _member_act(request, user_id, ActiveForm, _active)


@login_required
@require_POST
def member_password_reset(request: HttpRequest, user_id: int) -> HttpResponse:
    return _member_act(request, user_id, None, _reset)


@login_required
@require_POST
def member_email(request: HttpRequest, user_id: int) -> HttpResponse:
    return _member_act(request, user_id, EmailForm, _email)


def _proposal_act(request: HttpRequest, role_proposal_id: int, confirm: bool) -> HttpResponse:
    viewer = request_user(request)
    check_manage_users(viewer, action="confirm or withdraw role proposals")
    proposal = get_object_or_404(RoleGrantProposal.objects.select_related("user"), pk=role_proposal_id)
    try:
        if confirm:
            services.role_grant_confirm(proposal=proposal, by=viewer)
        else:
            services.role_grant_withdraw(proposal=proposal, by=viewer)
    except UserError as exc:
        messages.error(request, str(exc))
    else:
        role = Role(proposal.role).noun
        messages.success(
            request,
            f"Confirmed: {proposal.user.username} now holds the {role} role."
            if confirm
            else f"Withdrawn: role proposal #{proposal.pk} ({proposal.user.username} as {role}) grants nothing.",
        )
    return see_other("accounts:member", user_id=proposal.user_id)


@login_required
@require_POST
def role_proposal_confirm(request: HttpRequest, role_proposal_id: int) -> HttpResponse:
    return _proposal_act(request, role_proposal_id, confirm=True)


@login_required
@require_POST
def role_proposal_withdraw(request: HttpRequest, role_proposal_id: int) -> HttpResponse:
    return _proposal_act(request, role_proposal_id, confirm=False)
