from __future__ import annotations

from django.apps import AppConfig


class ActivityConfig(AppConfig):
    name = "auditportal.activity"
    label = "activity"
    verbose_name = "Activity log"
