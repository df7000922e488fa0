from __future__ import annotations

from django.conf import settings
from django.db import models


class Event(models.Model):
    """One row per state-changing action, written in the same transaction as the change.

    This is the governance trail an ethics committee reads: who did what to which object, when.
    Rows are never updated or deleted by the application.
    """

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
    verb = models.CharField(max_length=64)
    target_type = models.CharField(max_length=64)
    target_id = models.CharField(max_length=64)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["target_type", "target_id"], name="activity_event_target_idx")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor} {self.verb} {self.target_type}#{self.target_id}"
