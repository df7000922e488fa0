"""Admin pages for evidence: view only.

Evidence (dataset versions, prediction audits, experiments, trials, verdicts, the activity log) is
written by services that record an event; the admin must not offer a second, silent path that adds,
edits or deletes it. A retirement is a state change through the owning app's service.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.contrib import admin
from django.db import models
from django.http import HttpRequest

M = TypeVar("M", bound=models.Model)


class EvidenceAdmin(admin.ModelAdmin[M]):
    """Lists and shows rows; add, change and delete answer 403, and there is no bulk action."""

    actions = None  # not even "delete selected"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: M | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: M | None = None) -> bool:
        return False

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        return {}
