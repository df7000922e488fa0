from __future__ import annotations

from django.contrib import admin

from auditportal.attributions.models import TrialAttribution
from auditportal.lib.admin import EvidenceAdmin


@admin.register(TrialAttribution)
class TrialAttributionAdmin(EvidenceAdmin[TrialAttribution]):
    list_display = ("id", "trial", "checkpoint_name", "sample_size", "seed", "state", "created_by", "created_at")
    list_filter = ("state",)
    search_fields = ("checkpoint_sha256", "sha256", "checkpoint_name")
