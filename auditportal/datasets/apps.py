from __future__ import annotations

from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    name = "auditportal.datasets"
    label = "datasets"
    verbose_name = "Dataset registry"
