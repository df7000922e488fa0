from __future__ import annotations

from django.contrib import admin

from auditportal.experiments.models import Experiment, Trial


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin[Experiment]):
    list_display = ["id", "name", "template", "backend", "status", "launched_by", "created_at"]
    list_filter = ["status", "template", "backend"]
    readonly_fields = [field.name for field in Experiment._meta.fields]


@admin.register(Trial)
class TrialAdmin(admin.ModelAdmin[Trial]):
    list_display = ["id", "experiment", "number", "state", "steps_done", "steps_planned", "latest_eod"]
    list_filter = ["state"]
    readonly_fields = [field.name for field in Trial._meta.fields]
