from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import Group
from django.db.models import QuerySet
from django.http import HttpRequest

from auditportal.accounts.models import Role, RoleGrant, User
from auditportal.accounts.services import role_grant, role_revoke


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
        if not isinstance(acting, User) or not acting.has_role(Role.ADMIN):
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
