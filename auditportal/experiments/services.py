from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import connection, transaction
from django.db.models import Max
from django.db.models.functions import Coalesce
from django.utils import timezone
from kombu.exceptions import KombuError

from auditportal.accounts.models import Role, User
from auditportal.accounts.permissions import require_role
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.datasets.models import DatasetVersion, IntegrityPurpose
from auditportal.datasets.services import (
    DatasetIntegrityError,
    dataset_version_check_integrity,
    dataset_version_shard,
    shards_match_version,
)
from auditportal.evidence.models import FreezeTrigger, VerdictDocument
from auditportal.evidence.rules import check_freeze
from auditportal.evidence.services import verdict_document_store
from auditportal.experiments import asha, configs
from auditportal.experiments import selectors as experiment_selectors
from auditportal.experiments.backends import (
    BackendError,
    BackendUnavailable,
    ExperimentSnapshot,
    TrainingBackend,
    TrialSnapshot,
    backend_for,
    local,
)
from auditportal.experiments.ingest import trial_metrics_ingest, trial_metrics_rewind
from auditportal.experiments.models import (
    TERMINAL_TRIAL_STATES,
    Backend,
    Experiment,
    ExperimentStatus,
    MetricKind,
    MetricPoint,
    StopReason,
    Template,
    Trial,
    TrialRung,
    TrialState,
)
from auditportal.fairness import documents
from auditportal.fairness.errors import UserError
from auditportal.fairness.metricsfile import confusion_counts
from auditportal.fairness.sharding import ShardingError
from auditportal.fairness.tabular import DatasetError
from auditportal.policies.models import FairnessPolicy
from auditportal.policies.selectors import policy_active

logger = logging.getLogger(__name__)

# An experiment still QUEUED this long after it was created with no launch task on the broker (the
# broker was down at commit) gets its task queued by the periodic poll.
LAUNCH_QUEUE_GRACE = timedelta(seconds=30)


def experiment_create(
    *,
    user: User,
    dataset_version: DatasetVersion,
    template: str,
    hparams: Mapping[str, Any] | None = None,
    max_trials: int | None = None,
    batches: int = 200,
    slots_per_trial: int = 1,
    backend: str | None = None,
    name: str = "",
) -> Experiment:
    """Check the launch parameters, store the experiment and queue its launch after commit.

    Wrong parameters raise a UserError naming the field (dataset_version, template, hparams,
    max_trials, batches, slots_per_trial). A retired version, or one whose stored file fails its
    integrity check, is refused. Runs outside any transaction: the integrity check commits its own
    record.
    """
    require_role(user, Role.ML_ENGINEER, action="launch experiments")
    plan = _launch_plan(
        dataset_version=dataset_version,
        template=template,
        hparams=hparams,
        max_trials=max_trials,
        batches=batches,
        slots_per_trial=slots_per_trial,
    )
    chosen_backend = backend or settings.EXPERIMENT_BACKEND
    try:
        dataset_version_check_integrity(version=dataset_version, actor=user, purpose=IntegrityPurpose.LAUNCH)
    except DatasetIntegrityError as exc:
        raise DatasetIntegrityError(exc.message, field="dataset_version") from None
    shard_dir = _shard_dir(dataset_version)
    with transaction.atomic():
        experiment = Experiment.objects.create(
            dataset_version=dataset_version,
            name=name.strip()[:128],
            template=template,
            hparam_space=plan.space,
            max_trials=plan.trials,
            slots_per_trial=plan.slots_per_trial,
            batches=batches,
            validation_period=configs.validation_period(template, batches),
            backend=chosen_backend,
            shard_dir=str(shard_dir),
            launched_by=user,
            config_yaml="",
        )
        experiment.name = experiment.name or f"{_default_name(dataset_version, template)}-{experiment.pk}"
        experiment.config_yaml = _config_yaml(
            dataset_version=dataset_version, template=template, plan=plan, batches=batches, name=experiment.name
        )
        experiment.save(update_fields=["name", "config_yaml"])
        event_record(
            actor=user,
            verb=Verb.EXPERIMENT_LAUNCHED,
            target=experiment,
            data={
                "dataset_version": dataset_version.pk,
                "template": template,
                "max_trials": plan.trials,
                "batches": batches,
                "slots_per_trial": plan.slots_per_trial,
                "backend": chosen_backend,
            },
        )
        pk = experiment.pk
        transaction.on_commit(lambda: _launch_queue(pk))
    return experiment


def experiment_config_preview(
    *,
    dataset_version: DatasetVersion,
    template: str,
    hparams: Mapping[str, Any] | None = None,
    max_trials: int | None = None,
    batches: int = 200,
    slots_per_trial: int = 1,
    name: str = "",
) -> str:
    """The Determined experiment config (YAML) that ``experiment_create`` would store and a cluster
    launch would submit, after the same checks; writes nothing and needs no master.

    Without ``name`` the experiment's default name is shown without the ``-<id>`` the portal adds
    once the experiment exists.
    """
    plan = _launch_plan(
        dataset_version=dataset_version,
        template=template,
        hparams=hparams,
        max_trials=max_trials,
        batches=batches,
        slots_per_trial=slots_per_trial,
    )
    chosen = name.strip()[:128] or _default_name(dataset_version, template)
    return _config_yaml(dataset_version=dataset_version, template=template, plan=plan, batches=batches, name=chosen)


@dataclass(frozen=True)
class _LaunchPlan:
    space: dict[str, Any]
    trials: int
    slots_per_trial: int


def _launch_plan(
    *,
    dataset_version: DatasetVersion,
    template: str,
    hparams: Mapping[str, Any] | None,
    max_trials: int | None,
    batches: int,
    slots_per_trial: int,
) -> _LaunchPlan:
    """The checked hyperparameter space and trial count; a UserError names what is wrong."""
    if dataset_version.is_retired:
        assert dataset_version.retired_at is not None
        raise UserError(
            f"Dataset version {dataset_version.dataset.name} v{dataset_version.number} was retired on "
            f"{dataset_version.retired_at:%Y-%m-%d} ({dataset_version.retired_reason}); choose another version.",
            field="dataset_version",
        )
    space = configs.space_build(template, hparams, features=_feature_counts(dataset_version))
    if template == "single":
        if max_trials not in (None, 1):
            raise UserError("A single-trial experiment runs exactly one trial.", field="max_trials")
        trials = 1
    else:
        trials = 4 if max_trials is None else max_trials
        if not 1 <= trials <= settings.EXPERIMENT_MAX_TRIALS:
            raise UserError(
                f"max_trials must be between 1 and {settings.EXPERIMENT_MAX_TRIALS}, got {trials}.", field="max_trials"
            )
    if not 1 <= batches <= settings.EXPERIMENT_MAX_BATCHES:
        raise UserError(
            f"batches must be between 1 and {settings.EXPERIMENT_MAX_BATCHES}, got {batches}.", field="batches"
        )
    if template == "asha" and batches < configs.ASHA_DIVISOR ** (configs.ASHA_MAX_RUNGS - 1):
        raise UserError("An ASHA search needs at least 16 batches (three rungs, divisor 4).", field="batches")
    configs.check_slots_per_trial(slots_per_trial, space)
    return _LaunchPlan(space=space, trials=trials, slots_per_trial=slots_per_trial)


def _default_name(version: DatasetVersion, template: str) -> str:
    return f"{version.dataset.name}-v{version.number}-{template}"


def _config_yaml(*, dataset_version: DatasetVersion, template: str, plan: _LaunchPlan, batches: int, name: str) -> str:
    return configs.to_yaml(
        configs.experiment_config(
            name=name,
            template=template,
            space=plan.space,
            max_trials=plan.trials,
            slots_per_trial=plan.slots_per_trial,
            batches=batches,
            # Trial containers find the shards under the agents' view of the shard directory.
            shard_host_dir=settings.SHARD_HOST_DIR or str(settings.SHARD_DIR),
            shard_folder=_shard_dir(dataset_version).name,
            dataset_sha256=dataset_version.sha256,
            image=settings.DET_TRAINER_IMAGE,
        )
    )


def _feature_counts(version: DatasetVersion) -> tuple[int, int] | None:
    """(numeric, categorical) features the trainer will read, for the model-size check at launch."""
    kinds = [feature.get("kind") for feature in version.features or [] if isinstance(feature, dict)]
    if not kinds:
        return None
    return kinds.count("numeric"), kinds.count("categorical")


def _launch_queue(experiment_id: int) -> None:
    # tasks.py imports this module; importing it here, when the launch is queued, keeps the
    # dependency one-way at import time.
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


def _shard_dir(version: DatasetVersion) -> Path:
    return Path(settings.SHARD_DIR) / f"version-{version.pk}-k1-seed0"


def _check_integrity(experiment: Experiment) -> None:
    # Again at launch: the file may have changed since the experiment was queued.
    try:
        dataset_version_check_integrity(version=experiment.dataset_version, actor=None, purpose=IntegrityPurpose.LAUNCH)
    except DatasetIntegrityError as exc:
        raise BackendError(exc.message) from exc


def _shard(experiment: Experiment) -> Path:
    version = experiment.dataset_version
    target = Path(experiment.shard_dir)
    # Shards written earlier (atomically: complete or absent) are reused only when their manifest
    # says they came from the registered bytes; anything else is written again over them.
    if shards_match_version(out_dir=target, version=version):
        return target
    try:
        path, _ = dataset_version_shard(version=version, parts=1, out_dir=target, overwrite=True)
    except DatasetIntegrityError as exc:
        raise BackendError(exc.message) from exc
    except (DatasetError, ShardingError, OSError) as exc:
        raise BackendError(f"dataset invalid: {exc}") from exc
    return path


def experiment_launch(*, experiment: Experiment) -> bool:
    """Claim a queued experiment (QUEUED -> LAUNCHING), shard the dataset and submit it.

    Only the caller whose conditional UPDATE moves it out of QUEUED launches it, so a redelivered
    task or a second worker returns False and does nothing. Never half-creates: either the
    experiment runs with all its trials, or it is LAUNCH_FAILED with the reason.
    """
    now = timezone.now()
    claimed = Experiment.objects.filter(pk=experiment.pk, status=ExperimentStatus.QUEUED).update(
        status=ExperimentStatus.LAUNCHING, launch_claimed_at=now, launch_heartbeat_at=now
    )
    if claimed != 1:
        return False
    experiment.refresh_from_db()
    with _launch_heartbeat(experiment.pk):
        _launch(experiment)
    return True


@contextlib.contextmanager
def _launch_heartbeat(experiment_id: int) -> Iterator[None]:
    """While the block runs, stamp ``launch_heartbeat_at`` every EXPERIMENT_LAUNCH_HEARTBEAT_SECONDS
    from a thread of its own (sharding a large dataset takes minutes), so the stale-launch check
    (experiments_poll_active) tells a slow launch from a worker that died."""
    if connection.in_atomic_block:
        # Another connection's UPDATE would wait for the row this open transaction has locked.
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(settings.EXPERIMENT_LAUNCH_HEARTBEAT_SECONDS):
                Experiment.objects.filter(pk=experiment_id, status=ExperimentStatus.LAUNCHING).update(
                    launch_heartbeat_at=timezone.now()
                )
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=beat, name=f"launch-heartbeat-{experiment_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _launch(experiment: Experiment) -> None:
    backend = backend_for(experiment.backend)
    try:
        _check_integrity(experiment)
        shard_dir = _shard(experiment)
        submission = backend.submit(experiment, shard_dir=shard_dir)
    except BackendError as exc:
        _launch_failed(experiment, exc.reason)
        return
    except Exception as exc:
        logger.exception("experiment %s: unexpected error while launching", experiment.pk)
        _launch_failed(experiment, f"internal error: {type(exc).__name__}: {exc}")
        return
    with transaction.atomic():
        started = Experiment.objects.filter(pk=experiment.pk, status=ExperimentStatus.LAUNCHING).update(
            status=ExperimentStatus.RUNNING,
            det_experiment_id=submission.det_experiment_id,
            started_at=timezone.now(),
        )
        if started == 1:
            Trial.objects.bulk_create(
                Trial(
                    experiment=experiment,
                    number=plan.number,
                    hparams=plan.hparams,
                    steps_planned=plan.steps_planned,
                    asha_bracket=plan.asha_bracket,
                )
                for plan in submission.trials
            )
            event_record(
                actor=None,
                verb=Verb.EXPERIMENT_STARTED,
                target=experiment,
                data={"trials": len(submission.trials), "det_experiment_id": submission.det_experiment_id},
            )
    experiment.refresh_from_db()
    if started != 1:
        # Cancelled while it was being launched: stop what was just submitted.
        try:
            backend.cancel(experiment)
        except BackendError:
            logger.exception("could not stop experiment %s after it was cancelled during launch", experiment.pk)
        return
    experiment_poll(experiment_id=experiment.pk)


def _launch_failed(experiment: Experiment, reason: str) -> None:
    with transaction.atomic():
        failed = Experiment.objects.filter(pk=experiment.pk, status=ExperimentStatus.LAUNCHING).update(
            status=ExperimentStatus.LAUNCH_FAILED, error=f"launch failed: {reason}", ended_at=timezone.now()
        )
        if failed == 1:
            event_record(actor=None, verb=Verb.EXPERIMENT_LAUNCH_FAILED, target=experiment, data={"reason": reason})
    logger.warning("experiment %s: launch failed: %s", experiment.pk, reason)


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


def _asha_enter_rungs(experiment: Experiment, trial: Trial) -> None:
    """Enter the trial's validations into the rungs they reached, and stop it where Determined's
    stopping ASHA would (asha.py). Each entry is written once, so a decision is never taken twice."""
    if trial.asha_bracket is None or trial.stop_requested_at is not None:
        return
    entries = list(trial.rungs.order_by("rung"))
    if entries and entries[-1].outcome != asha.CONTINUED:
        return
    units = _asha_units(experiment, trial.asha_bracket)
    for rung in range(len(entries), len(units)):
        point = (
            MetricPoint.objects.filter(
                trial=trial, kind=MetricKind.VALIDATION, name=configs.SEARCHER_METRIC, step__gte=units[rung]
            )
            .order_by("step")
            .values_list("step", "value")
            .first()
        )
        if point is None:
            return
        step, metric = point
        decision = _asha_record(experiment, trial, rung=rung, units=units, step=step, metric=metric)
        if decision.outcome == asha.STOPPED:
            local.request_stop(trial, reason=StopReason.EARLY_STOP)
        if decision.outcome != asha.CONTINUED:
            return


def _asha_exited(experiment: Experiment, trial: Trial) -> None:
    """A trial that ended with an error counts in its next rung as the worst metric (Determined's
    trialExitedEarly), so it still takes a place among those later trials are ranked against."""
    if trial.asha_bracket is None:
        return
    entries = list(trial.rungs.order_by("rung"))
    if entries and entries[-1].outcome != asha.CONTINUED:
        return
    units = _asha_units(experiment, trial.asha_bracket)
    if len(entries) < len(units):
        _asha_record(experiment, trial, rung=len(entries), units=units, step=None, metric=None)


def _asha_units(experiment: Experiment, bracket: int) -> list[int]:
    plan = asha.search_brackets(max_trials=experiment.max_trials, max_time=experiment.batches)
    return asha.rung_units(plan[bracket].num_rungs, configs.ASHA_DIVISOR, experiment.batches)


def _asha_record(
    experiment: Experiment, trial: Trial, *, rung: int, units: list[int], step: int | None, metric: float | None
) -> asha.Decision:
    entered = [
        asha.EXITED_METRIC if value is None else value
        for value in TrialRung.objects.filter(
            trial__experiment=experiment, trial__asha_bracket=trial.asha_bracket, rung=rung
        ).values_list("metric", flat=True)
    ]
    ranked = asha.EXITED_METRIC if metric is None else metric
    decision = asha.decide(entered, ranked, divisor=configs.ASHA_DIVISOR, top=rung == len(units) - 1)
    outcome = asha.EXITED if step is None else decision.outcome
    with transaction.atomic():
        TrialRung.objects.create(
            trial=trial,
            rung=rung,
            units=units[rung],
            step=step,
            metric=metric,
            position=decision.position,
            entered=decision.entered,
            continuing=decision.continuing,
            outcome=outcome,
        )
        if outcome == asha.STOPPED:
            now = timezone.now()
            Trial.objects.filter(pk=trial.pk).update(stop_requested_at=now, stop_reason=StopReason.EARLY_STOP)
            trial.stop_requested_at, trial.stop_reason = now, StopReason.EARLY_STOP
            event_record(
                actor=None,
                verb=Verb.TRIAL_EARLY_STOPPED,
                target=trial,
                data={
                    "experiment": experiment.pk,
                    "trial": trial.number,
                    "bracket": trial.asha_bracket,
                    "rung": rung + 1,
                    "rungs": len(units),
                    "step": step,
                    configs.SEARCHER_METRIC: metric,
                    "position": decision.position,
                    "entered": decision.entered,
                    "continuing": decision.continuing,
                },
            )
    return decision


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


def experiment_cancel(*, user: User, experiment: Experiment) -> Experiment:
    """Cancel an experiment. Nothing is signalled from here (the web process may be on another
    machine than the trials): one that has not started is cancelled at once; a running one becomes
    CANCELLING, and a worker stops its trials (the task queued after commit, else the periodic poll)
    and marks it CANCELLED once the last has ended, keeping when each actually did."""
    if not experiment_can_cancel(user=user, experiment=experiment):
        raise PermissionDenied(
            f"Only the engineer who launched experiment {experiment.pk} ({experiment.launched_by.username}) "
            "or an administrator can cancel it."
        )
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
            pk = experiment.pk
            transaction.on_commit(lambda: _stop_queue(pk))
    experiment.refresh_from_db()
    if not (cancelled or requested):
        if experiment.status == ExperimentStatus.CANCELLING:
            raise UserError(f"Experiment {experiment.pk} is already being cancelled; its trials are stopping.")
        status = experiment.get_status_display().lower()
        raise UserError(f"Experiment {experiment.pk} is {status}; nothing to cancel.")
    return experiment


def experiment_can_cancel(*, user: User, experiment: Experiment) -> bool:
    """Its launcher (still an ML engineer) or an administrator cancels an experiment."""
    if not user.is_authenticated:
        return False
    if user.has_role(Role.ADMIN):
        return True
    return experiment.launched_by_id == user.pk and user.has_role(Role.ML_ENGINEER)


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


class CheckpointMetadataError(Exception):
    """The checkpoint's metadata could not be written; ``transient`` when trying again later may work
    (the master could not be reached)."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


def checkpoint_metadata_set(*, experiment: Experiment, checkpoint: str, key: str, value: dict[str, Any]) -> None:
    """Set one top-level key of a checkpoint's metadata, keeping the others: on a Determined cluster
    through the SDK (``Checkpoint.add_metadata``), locally in ``<checkpoint>.metadata.json`` beside the
    checkpoint's folder. Used by approvals to record an approval (and its revocation) on the model."""
    try:
        backend_for(experiment.backend).checkpoint_metadata_set(checkpoint, key=key, value=value)
    except BackendUnavailable as exc:
        raise CheckpointMetadataError(exc.reason, transient=True) from exc
    except BackendError as exc:
        raise CheckpointMetadataError(exc.reason, transient=False) from exc


class NoValidation(UserError):
    pass


def verdict_document_freeze_trial(*, user: User, trial: Trial, step: int) -> VerdictDocument:
    """An engineer's or reviewer's freeze of one validation of ``trial``, judged under the active policy.

    Refused for other roles (FreezerRequired: 403), for a step without a validation, and when the dataset
    version's stored file no longer has its registered SHA-256 (DatasetIntegrityError).
    """
    # The experiment must be visible to the user: outsiders learn nothing (404).
    experiment_selectors.experiment_get(user=user, experiment_id=trial.experiment_id)
    check_freeze(user)
    if not experiment_selectors.trial_validation_counts(trial=trial, step=step):
        raise NoValidation(
            f"Trial {trial.number} of experiment {trial.experiment_id} has no validation counts at step {step}.",
            field="step",
        )
    return _freeze_trial(trial=trial, step=step, policy=policy_active(), user=user, trigger=FreezeTrigger.REQUESTED)


def verdict_document_freeze_trial_completed(*, trial: Trial) -> VerdictDocument | None:
    """Freeze a completed trial's last validation; None when it reported none or its data failed the
    integrity check (logged; the check records its own event). Call outside any transaction, after the
    trial's metrics are ingested."""
    trial.refresh_from_db()
    step = trial.latest_step
    if step is None or not experiment_selectors.trial_validation_counts(trial=trial, step=step):
        return None
    verdict = trial.verdicts.filter(step=step, policy__isnull=False).select_related("policy").first()
    policy = verdict.policy if verdict is not None and verdict.policy is not None else policy_active()
    try:
        return _freeze_trial(trial=trial, step=step, policy=policy, user=None, trigger=FreezeTrigger.TRIAL_COMPLETED)
    except DatasetIntegrityError as exc:
        logger.warning("%s: final validation not frozen: %s", trial, exc)
        return None


def _freeze_trial(
    *, trial: Trial, step: int, policy: FairnessPolicy, user: User | None, trigger: FreezeTrigger
) -> VerdictDocument:
    experiment = trial.experiment
    version = experiment.dataset_version
    # Outside the transaction below: a failed check records its event, which must stay.
    dataset_version_check_integrity(version=version, actor=user, purpose=IntegrityPurpose.FREEZE)
    counts = confusion_counts(experiment_selectors.trial_validation_counts(trial=trial, step=step))
    document = documents.trial_validation_document(
        counts=counts,
        step=step,
        dataset_version={"name": version.dataset.name, "number": version.number, "sha256": version.sha256},
        experiment={
            "id": experiment.pk,
            "name": experiment.name,
            "det_experiment_id": experiment.det_experiment_id,
            "config_yaml": experiment.config_yaml,
        },
        trial={"number": trial.number, "det_trial_id": trial.det_trial_id, "hparams": trial.hparams},
        policy=policy.as_document(),
    )
    with transaction.atomic():
        return verdict_document_store(
            frozen=documents.freeze(document),
            policy=policy,
            trigger=trigger,
            frozen_by=user,
            trial_id=trial.pk,
            step=step,
        )
