from __future__ import annotations

from django.contrib import admin

from auditportal.experiments.models import Experiment, Trial
from auditportal.lib.admin import EvidenceAdmin


@admin.register(Experiment)
class ExperimentAdmin(EvidenceAdmin[Experiment]):
    list_display = ["id", "name", "template", "backend", "status", "launched_by", "created_at"]
    list_filter = ["status", "template", "backend"]


@admin.register(Trial)
class TrialAdmin(EvidenceAdmin[Trial]):
    list_display = ["id", "experiment", "number", "state", "steps_done", "steps_planned", "latest_eod"]
    list_filter = ["state"]
