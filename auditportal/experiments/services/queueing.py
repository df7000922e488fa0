"""The experiments' tasks, queued through the outbox (auditportal.outbox): by name, with the
experiment's id, in the caller's transaction. The outbox hands them to the broker once that commits,
or later while the broker is down; the user's change never fails for it."""

from __future__ import annotations

from django.utils import timezone

from auditportal.experiments.models import Experiment
from auditportal.outbox.services import task_enqueue


def _launch_queue(experiment_id: int) -> None:
    """Queue the experiment's launch and stamp when (``launch_queued_at``): the periodic poll queues it
    again if no worker has claimed it EXPERIMENT_LAUNCH_REQUEUE_SECONDS later. Call inside a
    transaction."""
    task_enqueue(name="experiments.launch", args=[experiment_id])
    Experiment.objects.filter(pk=experiment_id).update(launch_queued_at=timezone.now())


def _stop_queue(experiment_id: int) -> None:
    """Queue the stop of a cancelled experiment's trials; call inside a transaction. Should the task be
    lost, the periodic poll does the same work within EXPERIMENT_POLL_SECONDS."""
    task_enqueue(name="experiments.stop", args=[experiment_id])
