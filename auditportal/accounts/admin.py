from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest

from auditportal.accounts.models import ApiToken, Role, RoleGrant, User
from auditportal.accounts.permissions import request_user
from auditportal.accounts.rules import can_manage_roles
from auditportal.accounts.services import api_token_revoke, role_grant, role_revoke
from auditportal.fairness.errors import UserError


class RoleGrantInline(admin.TabularInline[RoleGrant, User]):
    """Shows who holds which role and who granted it. Grants change only through the actions below
    (or `manage.py grant_role`), which call accounts.services and write the event."""

    model = RoleGrant
    fk_name = "user"
    extra = 0
    fields = ("role", "granted_at", "granted_by")
    readonly_fields = ("role", "granted_at", "granted_by")

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
        changed = []
        for user in queryset.order_by("username"):
            if grant and not user.has_role(role):
                role_grant(user=user, role=role, granted_by=acting)
                changed.append(user.username)
            elif not grant and role_revoke(user=user, role=role, revoked_by=acting):
                changed.append(user.username)
        if changed:
            done = "Granted" if grant else "Revoked"
            modeladmin.message_user(
                request, f"{done} {role.label.lower()} role: {', '.join(changed)}.", messages.SUCCESS
            )
        else:
            modeladmin.message_user(request, "Nothing to change.", messages.WARNING)

    action.__name__ = f"{verb.lower()}_{role.value}"
    return admin.action(description=f"{verb} role: {role.label}")(action)


ROLE_ACTIONS = [_role_action(role, grant=grant) for grant in (True, False) for role in Role]


# Roles (RoleGrant, changed through accounts.services) are the portal's permissions; Django's groups
# are not used, and their add page was one more form to get wrong (a huge permission id overflowed
# SQLite's integers: a server error).
admin.site.unregister(Group)


@admin.register(User)
class PortalUserAdmin(UserAdmin):  # type: ignore[type-arg]
    inlines = [RoleGrantInline]
    actions = ROLE_ACTIONS

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
        self.message_user(request, f"Revoked {revoked} token(s).", messages.SUCCESS)
