"""Handing an experiment's launch and stop tasks to the broker after commit."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.utils import timezone
from kombu.exceptions import KombuError

from auditportal.experiments.models import Experiment

logger = logging.getLogger(__name__)


def _launch_queue(experiment_id: int) -> None:
    # tasks.py imports the services package (and so this module); importing it here, when the launch
    # is queued, keeps the dependency one-way at import time.
    from auditportal.experiments.tasks import experiment_launch_task

    # Recorded only once the broker has the task: an experiment left QUEUED without it is found and
    # queued again by the periodic poll (experiments_poll_active).
    if _queue(experiment_launch_task.delay, experiment_id, what="launch"):
        Experiment.objects.filter(pk=experiment_id).update(launch_queued_at=timezone.now())


def _stop_queue(experiment_id: int) -> None:
    from auditportal.experiments.tasks import experiment_stop_task

    # If the broker is down the periodic poll does the same work within EXPERIMENT_POLL_SECONDS.
    _queue(experiment_stop_task.delay, experiment_id, what="stop")


def _queue(delay: Callable[[int], object], experiment_id: int, *, what: str) -> bool:
    try:
        delay(experiment_id)
    except (KombuError, OSError):
        # After commit, in the request that made the change: the user's action stands, and the
        # periodic poll picks up what this task would have done.
        logger.exception("experiment %s: could not queue its %s task (is the broker down?)", experiment_id, what)
        return False
    return True
