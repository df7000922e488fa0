from __future__ import annotations

from django.apps import AppConfig


class ExperimentsConfig(AppConfig):
    name = "auditportal.experiments"
    label = "experiments"
