from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from auditportal.evidence.models import VerdictDocument


@admin.register(VerdictDocument)
class VerdictDocumentAdmin(admin.ModelAdmin[VerdictDocument]):
    """Read-only: documents are frozen by evidence.services and never changed or deleted."""

    list_display = ["id", "kind", "prediction_audit", "trial", "step", "sha256", "policy", "trigger", "frozen_at"]
    list_filter = ["kind", "trigger"]
    search_fields = ["sha256"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: VerdictDocument | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: VerdictDocument | None = None) -> bool:
        return False
