from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages

# The accounts app is listed before django.contrib.auth (settings/base.py): auth's admin module must
# register Group before it is unregistered below.
from django.contrib.auth import admin as auth_admin  # noqa: F401
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

from auditportal.accounts import services
from auditportal.accounts.models import ApiToken, Role, RoleGrant, RoleGrantProposal, User
from auditportal.accounts.permissions import request_user
from auditportal.accounts.rules import can_manage_roles, can_manage_users
from auditportal.accounts.services import (
    api_token_revoke,
    role_grant_confirm,
    role_grant_propose,
    role_grant_withdraw,
    role_revoke,
)
from auditportal.fairness.errors import UserError
from auditportal.fairness.text import numbers


class RoleGrantInline(admin.TabularInline[RoleGrant, User]):
    """Shows who holds which role and who granted it. Grants change only through the actions below
    (or `manage.py grant_role`), which call accounts.services and write the event."""

    model = RoleGrant
    fk_name = "user"
    extra = 0
    fields = ("role", "granted_at", "granted_by", "proposal")
    readonly_fields = ("role", "granted_at", "granted_by", "proposal")

    def has_add_permission(self, request: HttpRequest, obj: User | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: User | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: User | None = None) -> bool:
        return False


RoleAction = Callable[[admin.ModelAdmin[User], HttpRequest, QuerySet[User]], None]


def _role_action(role: Role, *, grant: bool) -> RoleAction:
    verb = "Grant" if grant else "Revoke"

    def action(modeladmin: admin.ModelAdmin[User], request: HttpRequest, queryset: QuerySet[User]) -> None:
        acting = request.user
        if not isinstance(acting, User) or not can_manage_roles(acting):
            modeladmin.message_user(
                request, "Only an administrator can grant or revoke roles; nothing changed.", messages.ERROR
            )
            return
        changed, proposed = [], []
        for user in queryset.order_by("username"):
            try:
                if grant and not user.has_role(role):
                    result = role_grant_propose(user=user, role=role, by=acting)
                    if isinstance(result, RoleGrantProposal):
                        proposed.append(f"{user.username} (#{result.pk})")
                    else:
                        changed.append(user.username)
                elif not grant and role_revoke(user=user, role=role, revoked_by=acting):
                    changed.append(user.username)
            except (UserError, PermissionDenied) as exc:
                modeladmin.message_user(request, f"{user.username}: {exc}", messages.ERROR)
        if changed:
            done = "Granted" if grant else "Revoked"
            modeladmin.message_user(request, f"{done} {role.noun} role: {', '.join(changed)}.", messages.SUCCESS)
        if proposed:
            modeladmin.message_user(
                request,
                f"Proposed {role.noun} role: {', '.join(proposed)}. Another administrator, not the "
                "grantee, confirms it under Role grant proposals.",
                messages.SUCCESS,
            )
        if not changed and not proposed:
            modeladmin.message_user(request, "Nothing to change.", messages.WARNING)

    action.__name__ = f"{verb.lower()}_{role.value}"
    return admin.action(description=f"{verb} role: {role.label}")(action)


ROLE_ACTIONS = [_role_action(role, grant=grant) for grant in (True, False) for role in Role]


def _account_action(name: str, description: str, change: Callable[[User, User], bool]) -> RoleAction:
    """An action that calls one accounts service per selected user (``change(user, acting)``: whether it
    changed anything), reporting each refusal by the user's name."""

    def action(modeladmin: admin.ModelAdmin[User], request: HttpRequest, queryset: QuerySet[User]) -> None:
        acting = request.user
        if not isinstance(acting, User) or not can_manage_users(acting):
            modeladmin.message_user(
                request, "Only an administrator can change accounts; nothing changed.", messages.ERROR
            )
            return
        changed = []
        for user in queryset.order_by("username"):
            try:
                if change(user, acting):
                    changed.append(user.username)
            except (UserError, PermissionDenied) as exc:
                modeladmin.message_user(request, f"{user.username}: {exc}", messages.ERROR)
        if changed:
            modeladmin.message_user(request, f"{description}: {', '.join(changed)}.", messages.SUCCESS)
        else:
            modeladmin.message_user(request, "Nothing to change.", messages.WARNING)

    action.__name__ = name
    return admin.action(description=description)(action)


def _force_reset(user: User, acting: User) -> bool:
    services.user_password_reset_force(user=user, reset_by=acting)
    return True


ACCOUNT_ACTIONS = [
    _account_action(
        "force_password_reset", "Force a password reset (the owner sets a new one from a mailed link)", _force_reset
    ),
    _account_action("activate", "Activate", lambda user, acting: services.user_activate(user=user, by=acting)),
    _account_action("deactivate", "Deactivate", lambda user, acting: services.user_deactivate(user=user, by=acting)),
    _account_action(
        "give_staff",
        "Give admin-site access",
        lambda user, acting: services.user_flags_set(user=user, by=acting, is_staff=True),
    ),
    _account_action(
        "take_staff",
        "Take admin-site access away",
        lambda user, acting: services.user_flags_set(user=user, by=acting, is_staff=False, is_superuser=False),
    ),
    _account_action(
        "give_superuser",
        "Make superuser (admin site only; no portal role)",
        lambda user, acting: services.user_flags_set(user=user, by=acting, is_staff=True, is_superuser=True),
    ),
    _account_action(
        "take_superuser",
        "Take superuser away",
        lambda user, acting: services.user_flags_set(user=user, by=acting, is_superuser=False),
    ),
]


def _own_password_change(request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
    return redirect("accounts:password-change")


# The admin site's "Change password" changed one's own password without an event: it is the portal's
# page, which goes through accounts.services.user_password_change.
admin.site.password_change = _own_password_change  # type: ignore[method-assign,assignment]


# Roles (RoleGrant, changed through accounts.services) are the portal's permissions; Django's groups
# are not used, and their add page was one more form to get wrong (a huge permission id overflowed
# SQLite's integers: a server error).
admin.site.unregister(Group)


@admin.register(User)
class PortalUserAdmin(admin.ModelAdmin[User]):
    """Accounts, read only: not Django's UserAdmin, whose password form let a superuser set any member's
    password (and then sign that member's votes) and whose add form took a password, both without an
    event. Every change is an action calling accounts.services, which writes the event; nobody sets
    another person's password here (docs/governance.md, "Accounts and passwords"). Accounts are made with
    ``manage.py account create``."""

    inlines = [RoleGrantInline]
    actions = [*ACCOUNT_ACTIONS, *ROLE_ACTIONS]
    list_display = [
        "username",
        "email",
        "first_name",
        "last_name",
        "is_active",
        "is_staff",
        "is_superuser",
        "last_login",
    ]
    list_filter = ["is_active", "is_staff", "is_superuser", "role_grants__role"]
    search_fields = ["username", "first_name", "last_name", "email"]
    ordering = ["username"]
    fields = readonly_fields = (
        "username",
        "first_name",
        "last_name",
        "email",
        "is_active",
        "is_staff",
        "is_superuser",
        "last_login",
        "date_joined",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    # The change page shows the account; the actions on the list change it.
    def has_change_permission(self, request: HttpRequest, obj: User | None = None) -> bool:
        return False

    # Deleting an account would drop its role grants without a revocation event; deactivate it instead.
    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin[ApiToken]):
    """Lists tokens (never their secret: only the hash is stored; they are made with `manage.py api_token
    create`); no add, change or delete; the one action revokes them through accounts.services."""

    list_display = ["id", "name", "user", "scope", "token_key", "created", "expiry", "revoked_at", "revoked_by"]
    list_filter = ["scope"]
    exclude = ["digest"]
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        return False

    @admin.action(description="Revoke the selected API tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        user = request_user(request)
        revoked = 0
        for token in queryset.filter(revoked_at__isnull=True):
            try:
                api_token_revoke(user=user, token=token)
            except (UserError, PermissionDenied) as exc:
                self.message_user(request, f"Token #{token.pk}: {exc}", messages.ERROR)
                continue
            revoked += 1
        self.message_user(request, f"Revoked {numbers.plural(revoked, 'token')}.", messages.SUCCESS)


@admin.register(RoleGrantProposal)
class RoleGrantProposalAdmin(admin.ModelAdmin[RoleGrantProposal]):
    """Proposed grants of the roles that decide (docs/governance.md, "Roles that decide: the two-person
    rule"): read only; the actions confirm (an administrator who is neither the proposer nor the
    grantee) or withdraw them through accounts.services, which write the events."""

    list_display = ["id", "user", "role", "proposed_by", "proposed_at", "outcome", "closed_by"]
    list_filter = ["role", "closure__outcome"]
    fields = readonly_fields = ("user", "role", "proposed_by", "proposed_at", "outcome", "closed_by")
    actions = ["confirm", "withdraw"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[RoleGrantProposal]:
        return super().get_queryset(request).select_related("user", "proposed_by", "closure__closed_by")

    @admin.display(description="outcome")
    def outcome(self, obj: RoleGrantProposal) -> str:
        closure = getattr(obj, "closure", None)
        return closure.get_outcome_display() if closure is not None else "waiting for a second administrator"

    @admin.display(description="closed by")
    def closed_by(self, obj: RoleGrantProposal) -> str:
        closure = getattr(obj, "closure", None)
        return closure.closed_by.get_username() if closure is not None else ""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: RoleGrantProposal | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: RoleGrantProposal | None = None) -> bool:
        return False

    def _each(self, request: HttpRequest, queryset: QuerySet[RoleGrantProposal], *, confirm: bool) -> None:
        acting = request.user
        if not isinstance(acting, User) or not can_manage_roles(acting):
            self.message_user(request, "Only an administrator can confirm or withdraw role proposals.", messages.ERROR)
            return
        done = []
        for proposal in queryset.order_by("pk"):
            try:
                if confirm:
                    role_grant_confirm(proposal=proposal, by=acting)
                else:
                    role_grant_withdraw(proposal=proposal, by=acting)
            except (UserError, PermissionDenied) as exc:
                self.message_user(request, f"#{proposal.pk}: {exc}", messages.ERROR)
                continue
            done.append(f"#{proposal.pk}")
        if done:
            self.message_user(request, f"{'Confirmed' if confirm else 'Withdrew'} {', '.join(done)}.", messages.SUCCESS)

    @admin.action(description="Confirm the selected role proposals (two-person rule)")
    def confirm(self, request: HttpRequest, queryset: QuerySet[RoleGrantProposal]) -> None:
        self._each(request, queryset, confirm=True)

    @admin.action(description="Withdraw the selected role proposals")
    def withdraw(self, request: HttpRequest, queryset: QuerySet[RoleGrantProposal]) -> None:
        self._each(request, queryset, confirm=False)
