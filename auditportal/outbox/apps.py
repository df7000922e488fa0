from __future__ import annotations

from django.apps import AppConfig


class OutboxConfig(AppConfig):
    name = "auditportal.outbox"
    label = "outbox"
    verbose_name = "Task outbox"
