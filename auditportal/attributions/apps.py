from __future__ import annotations

from django.apps import AppConfig


class AttributionsConfig(AppConfig):
    name = "auditportal.attributions"
    label = "attributions"
    verbose_name = "attributions"
