"""The periodic task's work (experiments.poll_active): queue launches that never reached the broker,
expire launches whose worker stopped, poll every running or cancelling experiment."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models.functions import Coalesce
from django.utils import timezone

from auditportal.experiments.models import Experiment, ExperimentStatus
from auditportal.experiments.services.launch import _launch_failed
from auditportal.experiments.services.poll import _POLLED, experiment_poll
from auditportal.experiments.services.queueing import _launch_queue

logger = logging.getLogger(__name__)


# An experiment still QUEUED this long after it was created with no launch task on the broker (the
# broker was down at commit) gets its task queued by the periodic poll.
LAUNCH_QUEUE_GRACE = timedelta(seconds=30)


def experiments_poll_active() -> int:
    """The periodic task's work: queue launches that never reached the broker, expire launches whose
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
    """Queue the launch of experiments stuck QUEUED: never handed to the broker (it was down when the
    experiment was created), or handed over but not claimed for EXPERIMENT_LAUNCH_REQUEUE_SECONDS
    (the message was lost). A duplicate task is harmless: only one claim launches."""
    never = Experiment.objects.filter(
        status=ExperimentStatus.QUEUED, launch_queued_at__isnull=True, created_at__lt=now - LAUNCH_QUEUE_GRACE
    )
    lost = Experiment.objects.filter(
        status=ExperimentStatus.QUEUED,
        launch_queued_at__lt=now - timedelta(seconds=settings.EXPERIMENT_LAUNCH_REQUEUE_SECONDS),
    )
    for pk in list(never.values_list("pk", flat=True)) + list(lost.values_list("pk", flat=True)):
        logger.warning("experiment %s: still queued without a launch under way; queueing its launch again", pk)
        _launch_queue(pk)
