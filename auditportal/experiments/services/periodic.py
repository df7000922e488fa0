"""The periodic task's work (experiments.poll_active): queue launches that never reached the broker,
expire launches whose worker stopped, poll every running or cancelling experiment."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models.functions import Coalesce
from django.utils import timezone

from auditportal.experiments.models import Experiment, ExperimentStatus
from auditportal.experiments.services.launch import _launch_failed
from auditportal.experiments.services.poll import _POLLED, experiment_poll
from auditportal.experiments.services.queueing import _launch_queue

logger = logging.getLogger(__name__)


def experiments_poll_active() -> int:
    """The periodic task's work: queue again launches that no worker claimed, expire launches whose
    worker stopped, poll every running or cancelling experiment."""
    now = timezone.now()
    _launches_requeue(now)
    stale = now - timedelta(seconds=settings.EXPERIMENT_LAUNCH_STALE_SECONDS)
    # Keyed on the launching worker's heartbeat (or its claim), never on when the experiment was
    # created: an experiment may wait in the queue for long and then launch for minutes.
    lost = Experiment.objects.filter(status=ExperimentStatus.LAUNCHING).alias(
        alive_at=Coalesce("launch_heartbeat_at", "launch_claimed_at", "created_at")
    )
    for experiment in lost.filter(alive_at__lt=stale):
        _launch_failed(experiment, "the worker stopped while launching; launch it again")
    polled = 0
    for pk in Experiment.objects.filter(status__in=_POLLED).values_list("pk", flat=True):
        try:
            polled += experiment_poll(experiment_id=pk)
        except Exception:
            # One broken experiment must not stop the others from being polled.
            logger.exception("polling experiment %s failed", pk)
    return polled


def _launches_requeue(now: datetime) -> None:
    """Queue again the launch of experiments still QUEUED EXPERIMENT_LAUNCH_REQUEUE_SECONDS after it
    was queued. The outbox hands every launch to the broker, however long the broker was down; but a
    broker can lose a message it took (a restart without persistence). A duplicate task is harmless:
    only one claim launches."""
    # An experiment queued before launches went through the outbox may have no stamp (its task never
    # reached the broker): its creation is when its launch was asked for.
    stuck = (
        Experiment.objects.filter(status=ExperimentStatus.QUEUED)
        .alias(queued_at=Coalesce("launch_queued_at", "created_at"))
        .filter(queued_at__lt=now - timedelta(seconds=settings.EXPERIMENT_LAUNCH_REQUEUE_SECONDS))
    )
    for pk in stuck.values_list("pk", flat=True):
        logger.warning("experiment %s: still queued without a launch under way; queueing its launch again", pk)
        with transaction.atomic():
            _launch_queue(pk)
