from __future__ import annotations

from django.contrib import admin

from auditportal.audits.models import PredictionAudit


@admin.register(PredictionAudit)
class PredictionAuditAdmin(admin.ModelAdmin[PredictionAudit]):
    list_display = ["id", "original_name", "verdict", "num_rows", "created_by", "created_at"]
    list_filter = ["verdict"]
    readonly_fields = [field.name for field in PredictionAudit._meta.fields]
