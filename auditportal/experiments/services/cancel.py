"""Cancelling an experiment (recorded here; a worker stops its trials)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.experiments import rules
from auditportal.experiments.models import TERMINAL_TRIAL_STATES, Experiment, ExperimentStatus, TrialState
from auditportal.experiments.services.queueing import _stop_queue
from auditportal.fairness.errors import UserError


def experiment_cancel(*, user: User, experiment: Experiment) -> Experiment:
    """Cancel an experiment. Nothing is signalled from here (the web process may be on another
    machine than the trials): one that has not started is cancelled at once; a running one becomes
    CANCELLING, and a worker stops its trials (the task queued with the cancel, else the periodic poll)
    and marks it CANCELLED once the last has ended, keeping when each actually did."""
    rules.check_cancel(user, experiment)
    now = timezone.now()
    with transaction.atomic():
        # Not started (or being launched: the launching worker stops what it submitted).
        cancelled = Experiment.objects.filter(
            pk=experiment.pk, status__in=[ExperimentStatus.QUEUED, ExperimentStatus.LAUNCHING]
        ).update(status=ExperimentStatus.CANCELLED, cancel_requested_at=now, ended_at=now)
        requested = 0
        if cancelled != 1:
            requested = Experiment.objects.filter(pk=experiment.pk, status=ExperimentStatus.RUNNING).update(
                status=ExperimentStatus.CANCELLING, cancel_requested_at=now
            )
        if cancelled or requested:
            experiment.trials.filter(state=TrialState.QUEUED).update(state=TrialState.CANCELED, ended_at=now)
            running = experiment.trials.exclude(state__in=TERMINAL_TRIAL_STATES).count()
            event_record(
                actor=user, verb=Verb.EXPERIMENT_CANCELLED, target=experiment, data={"trials_to_stop": running}
            )
        if requested:
            _stop_queue(experiment.pk)
    experiment.refresh_from_db()
    if not (cancelled or requested):
        if experiment.status == ExperimentStatus.CANCELLING:
            raise UserError(f"Experiment {experiment.pk} is already being cancelled; its trials are stopping.")
        status = experiment.get_status_display().lower()
        raise UserError(f"Experiment {experiment.pk} is {status}; nothing to cancel.")
    return experiment
