from __future__ import annotations

from django.contrib import admin

from auditportal.lib.admin import EvidenceAdmin
from auditportal.outbox.models import OutboxMessage


@admin.register(OutboxMessage)
class OutboxMessageAdmin(EvidenceAdmin[OutboxMessage]):
    """View only: an operator sees what waits for the broker and why; rows change only by delivery."""

    list_display = ("id", "name", "created_at", "sent_at", "attempts", "last_error")
    list_filter = ("name",)
    search_fields = ("name",)
