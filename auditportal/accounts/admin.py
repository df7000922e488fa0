from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from auditportal.accounts.models import RoleGrant, User


class RoleGrantInline(admin.TabularInline[RoleGrant, User]):
    model = RoleGrant
    fk_name = "user"
    extra = 0
    readonly_fields = ("granted_at", "granted_by")


@admin.register(User)
class PortalUserAdmin(UserAdmin):  # type: ignore[type-arg]
    inlines = [RoleGrantInline]
