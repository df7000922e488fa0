from __future__ import annotations

from django.apps import AppConfig


class ComparisonsConfig(AppConfig):
    name = "auditportal.comparisons"
    label = "comparisons"
