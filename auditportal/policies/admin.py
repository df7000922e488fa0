from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from auditportal.policies.models import FairnessPolicy


@admin.register(FairnessPolicy)
class FairnessPolicyAdmin(admin.ModelAdmin[FairnessPolicy]):
    """Read-only: a new version goes through policies.services (the page or `fairness_policy set`)."""

    list_display = ["version", "tolerance", "alpha", "min_group_size", "created_by", "created_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: FairnessPolicy | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: FairnessPolicy | None = None) -> bool:
        return False
