"""Polling a running (or cancelling) experiment: the backend's snapshot applied to its trials, their
metrics ingested, a cancel passed on, the experiment finished when its trials have."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.experiments.backends import (
    BackendError,
    ExperimentSnapshot,
    TrainingBackend,
    TrialSnapshot,
    backend_for,
)
from auditportal.experiments.ingest import trial_metrics_ingest, trial_metrics_rewind
from auditportal.experiments.models import (
    TERMINAL_TRIAL_STATES,
    Backend,
    Experiment,
    ExperimentStatus,
    StopReason,
    Template,
    Trial,
    TrialState,
)
from auditportal.experiments.services.documents import verdict_document_freeze_trial_completed
from auditportal.experiments.services.search import _asha_enter_rungs, _asha_exited


def experiment_poll(*, experiment_id: int) -> bool:
    """Bring one running (or cancelling) experiment up to date; False when another poller holds it.

    For a cancelling experiment it first asks the backend to stop every trial not asked yet: this is
    where a cancel takes effect, on a worker, whichever process recorded it."""
    now = timezone.now()
    lease = now + timedelta(seconds=settings.EXPERIMENT_POLL_LEASE_SECONDS)
    claimed = (
        Experiment.objects.filter(pk=experiment_id, status__in=_POLLED)
        .exclude(poll_lease_until__gt=now)
        .update(poll_lease_until=lease)
    )
    if claimed != 1:
        return False
    experiment = Experiment.objects.select_related("dataset_version").get(pk=experiment_id)
    try:
        backend = backend_for(experiment.backend)
        try:
            if experiment.status == ExperimentStatus.CANCELLING:
                _cancel_pass(experiment, backend)
            snapshot = backend.poll(experiment)
        except BackendError as exc:
            # Transient trouble with the master is shown but does not end the experiment.
            Experiment.objects.filter(pk=experiment.pk).update(error=f"last poll failed: {exc.reason}")
            return True
        _apply(experiment, snapshot)
    finally:
        Experiment.objects.filter(pk=experiment_id, poll_lease_until=lease).update(poll_lease_until=None)
    return True


_POLLED = (ExperimentStatus.RUNNING, ExperimentStatus.CANCELLING)


def _cancel_pass(experiment: Experiment, backend: TrainingBackend) -> None:
    """Cancel what has not started and ask the backend to stop the rest; each trial is asked once
    (``stop_requested_at``), and the backend again only when a trial was not asked yet."""
    now = timezone.now()
    experiment.trials.filter(state=TrialState.QUEUED).update(state=TrialState.CANCELED, ended_at=now)
    pending = list(
        experiment.trials.filter(
            state__in=[TrialState.STARTING, TrialState.RUNNING], stop_requested_at__isnull=True
        ).values_list("pk", flat=True)
    )
    if experiment.cancel_sent_at is not None and not pending:
        return
    backend.cancel(experiment)
    Trial.objects.filter(pk__in=pending).update(stop_requested_at=now, stop_reason=StopReason.CANCEL)
    Experiment.objects.filter(pk=experiment.pk, cancel_sent_at__isnull=True).update(cancel_sent_at=now)


def _apply(experiment: Experiment, snapshot: ExperimentSnapshot) -> None:
    if experiment.error.startswith("last poll failed"):
        Experiment.objects.filter(pk=experiment.pk).update(error="")
    searching = (
        experiment.template == Template.ASHA
        and experiment.backend == Backend.LOCAL
        and experiment.status == ExperimentStatus.RUNNING
    )
    for trial_snapshot in snapshot.trials:
        trial = _trial_for(experiment, trial_snapshot)
        if trial is None:
            continue
        if trial_snapshot.rewind_to is not None:
            trial_metrics_rewind(trial=trial, step=trial_snapshot.rewind_to)
        result = trial_metrics_ingest(trial=trial, records=trial_snapshot.records)
        if searching and result.max_step is not None:
            _asha_enter_rungs(experiment, trial)
        moved = _trial_update(trial, trial_snapshot)
        if searching and moved == TrialState.ERRORED:
            _asha_exited(experiment, trial)
        if moved == TrialState.COMPLETED:
            # Its metrics, the last validation's included, were ingested just above.
            verdict_document_freeze_trial_completed(trial=trial)
    _finish_if_done(experiment, snapshot)


def _trial_for(experiment: Experiment, snapshot: TrialSnapshot) -> Trial | None:
    if snapshot.number is not None:
        return experiment.trials.filter(number=snapshot.number).first()
    if snapshot.det_trial_id is None:
        return None
    trial = experiment.trials.filter(det_trial_id=snapshot.det_trial_id).first()
    if trial is not None:
        return trial
    with transaction.atomic():
        top = experiment.trials.aggregate(top=Max("number"))["top"] or 0
        return Trial.objects.create(
            experiment=experiment,
            number=top + 1,
            det_trial_id=snapshot.det_trial_id,
            hparams=snapshot.hparams or {},
            steps_planned=snapshot.steps_planned or experiment.batches,
            state=TrialState.QUEUED,
        )


def _trial_update(trial: Trial, snapshot: TrialSnapshot) -> str | None:
    """Apply the snapshot; the state the trial was moved into, if this call moved it."""
    updates: dict[str, Any] = {}
    if snapshot.hparams is not None and snapshot.hparams != trial.hparams:
        updates["hparams"] = snapshot.hparams
    if snapshot.steps_done is not None and snapshot.steps_done != trial.steps_done:
        updates["steps_done"] = snapshot.steps_done
    if snapshot.steps_planned is not None and snapshot.steps_planned != trial.steps_planned:
        updates["steps_planned"] = snapshot.steps_planned
    for name in ("checkpoint", "error", "log_tail"):
        value = getattr(snapshot, name)
        if value is not None and value != getattr(trial, name):
            updates[name] = value
    if snapshot.metrics_cursor is not None and snapshot.metrics_cursor != trial.metrics_offset:
        updates["metrics_offset"] = snapshot.metrics_cursor
    if snapshot.state is not None and snapshot.state != trial.state:
        updates["state"] = snapshot.state
        if snapshot.state in TERMINAL_TRIAL_STATES:
            updates["ended_at"] = snapshot.ended_at or timezone.now()
        elif snapshot.state == TrialState.RUNNING and trial.started_at is None:
            updates["started_at"] = timezone.now()
    if not updates:
        return None
    # Never move a trial out of a final state (a cancel may have landed while we polled).
    changed = Trial.objects.filter(pk=trial.pk).exclude(state__in=TERMINAL_TRIAL_STATES).update(**updates)
    return updates.get("state") if changed == 1 else None


def _finish_if_done(experiment: Experiment, snapshot: ExperimentSnapshot) -> None:
    states = list(experiment.trials.values_list("state", flat=True))
    if experiment.backend == Backend.LOCAL:
        # The portal planned every local trial: done when each has ended.
        if any(state not in TERMINAL_TRIAL_STATES for state in states):
            return
    elif not snapshot.finished:
        # A cluster search may still create trials: only the master says when it is over.
        return
    errored = sum(1 for state in states if state != TrialState.COMPLETED)
    if states and errored == 0:
        status, verb, error = ExperimentStatus.COMPLETED, Verb.EXPERIMENT_FINISHED, ""
    else:
        status, verb = ExperimentStatus.ERRORED, Verb.EXPERIMENT_FAILED
        error = snapshot.error or f"{errored} of {len(states)} trials did not complete"
    with transaction.atomic():
        done = Experiment.objects.filter(pk=experiment.pk, status=ExperimentStatus.RUNNING).update(
            status=status, error=error, ended_at=timezone.now()
        )
        if done == 1:
            event_record(
                actor=None,
                verb=verb,
                target=experiment,
                data={"trials": len(states), "errored": errored, "error": error},
            )
            return
    # A cancel ends once its last trial has stopped: that is when the experiment ended. (The user's
    # cancel was recorded when it was asked for.)
    stopped = experiment.trials.aggregate(last=Max("ended_at"))["last"]
    Experiment.objects.filter(pk=experiment.pk, status=ExperimentStatus.CANCELLING).update(
        status=ExperimentStatus.CANCELLED, ended_at=stopped or timezone.now()
    )
