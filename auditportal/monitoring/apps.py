from __future__ import annotations

from django.apps import AppConfig
from django.urls import register_converter


class MonitoringConfig(AppConfig):
    name = "auditportal.monitoring"
    label = "monitoring"
    verbose_name = "Monitoring"

    def ready(self) -> None:
        from auditportal.monitoring.names import DeploymentNameConverter

        # ``<deployment:name>`` in monitoring's page and API URLconfs (names.py says why a name keeps its
        # slashes); registered once, before any URLconf is read.
        register_converter(DeploymentNameConverter, "deployment")
