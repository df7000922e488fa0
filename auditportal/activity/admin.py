from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from auditportal.activity.models import Event


@admin.register(Event)
class EventAdmin(admin.ModelAdmin[Event]):
    """Read-only: events are written only by services (activity.services.event_record), in the chain."""

    list_display = ("seq", "at", "actor_username", "verb", "target_type", "target_id")
    list_filter = ("verb", "target_type")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Event | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Event | None = None) -> bool:
        return False
