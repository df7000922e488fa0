from __future__ import annotations

from django.contrib import admin

from auditportal.audits.models import PredictionAudit
from auditportal.lib.admin import EvidenceAdmin


@admin.register(PredictionAudit)
class PredictionAuditAdmin(EvidenceAdmin[PredictionAudit]):
    """View only: an audit is retired on its page (audits.services.prediction_audit_retire), never deleted."""

    list_display = ["id", "original_name", "verdict", "num_rows", "created_by", "created_at", "retired_at"]
    list_filter = ["verdict"]
