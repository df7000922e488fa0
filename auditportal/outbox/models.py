from __future__ import annotations

from django.db import models
from django.db.models import Q

# Long enough for any task name Celery users write ("<app>.<verb_noun>"), short enough to index.
MAX_TASK_NAME = 200
# The last delivery error is a hint for an operator, not a log: the full traceback is in the log.
MAX_LAST_ERROR = 500


class OutboxMessage(models.Model):
    """A Celery task to queue once the transaction that wrote this row has committed.

    Written by ``outbox.services.task_enqueue`` in the caller's transaction, so the task exists if
    and only if the caller's data does; delivered to the broker after the commit, or by the periodic
    ``outbox.deliver`` task while the broker was down. Not evidence: sent rows are purged after
    ``OUTBOX_KEEP_DAYS``.
    """

    name = models.CharField(max_length=MAX_TASK_NAME, help_text="The Celery task's registered name.")
    args = models.JSONField(default=list, blank=True)
    kwargs = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True, help_text="When the broker accepted the task.")
    attempts = models.PositiveIntegerField(default=0, help_text="Deliveries tried, the successful one included.")
    last_error = models.CharField(max_length=MAX_LAST_ERROR, blank=True, default="")
    # A deliverer claims a row by setting this with a conditional UPDATE; nobody else sends it until
    # the lease runs out (a deliverer killed mid-send leaves it claimed until then).
    claimed_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("id",)
        indexes = [
            # The periodic delivery reads unsent rows oldest first; sent rows are most of the table.
            models.Index(fields=["id"], condition=Q(sent_at__isnull=True), name="outbox_unsent_idx"),
            # The purge deletes sent rows by age.
            models.Index(fields=["sent_at"], condition=Q(sent_at__isnull=False), name="outbox_sent_at_idx"),
        ]

    def __str__(self) -> str:
        state = f"sent {self.sent_at:%Y-%m-%d %H:%M:%S}" if self.sent_at else f"unsent, {self.attempts} attempts"
        return f"{self.name} #{self.pk} ({state})"
