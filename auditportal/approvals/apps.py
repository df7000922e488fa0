from __future__ import annotations

from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "auditportal.approvals"
    label = "approvals"
    verbose_name = "Approvals"
