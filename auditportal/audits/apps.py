from __future__ import annotations

from django.apps import AppConfig


class AuditsConfig(AppConfig):
    name = "auditportal.audits"
    label = "audits"
