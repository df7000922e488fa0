from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

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
from auditportal.evidence.services import verdict_document_freeze_trial_completed
from auditportal.experiments import configs
from auditportal.experiments.backends import (
    BackendError,
    BackendUnavailable,
    ExperimentSnapshot,
    TrialSnapshot,
    backend_for,
)
from auditportal.experiments.ingest import trial_metrics_ingest, trial_metrics_rewind
from auditportal.experiments.models import (
    TERMINAL_TRIAL_STATES,
    Backend,
    Experiment,
    ExperimentStatus,
    Trial,
    TrialState,
)
from auditportal.fairness.errors import UserError
from auditportal.fairness.sharding import ShardingError
from auditportal.fairness.tabular import DatasetError

logger = logging.getLogger(__name__)

# An experiment stuck in LAUNCHING this long lost its worker mid-launch.
LAUNCH_STALE_AFTER = timedelta(minutes=10)


def experiment_create(
    *,
    user: User,
    dataset_version: DatasetVersion,
    template: str,
    hparams: Mapping[str, Any] | None = None,
    max_trials: int | None = None,
    batches: int = 200,
    backend: str | None = None,
    name: str = "",
) -> Experiment:
    """Check the launch parameters, store the experiment and queue its launch after commit.

    Wrong parameters raise a UserError naming the field (dataset_version, template, hparams,
    max_trials, batches). A retired version, or one whose stored file fails its integrity check, is
    refused. Runs outside any transaction: the integrity check commits its own record.
    """
    require_role(user, Role.ML_ENGINEER, action="launch experiments")
    plan = _launch_plan(
        dataset_version=dataset_version, template=template, hparams=hparams, max_trials=max_trials, batches=batches
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
    name: str = "",
) -> str:
    """The Determined experiment config (YAML) that ``experiment_create`` would store and a cluster
    launch would submit, after the same checks; writes nothing and needs no master.

    Without ``name`` the experiment's default name is shown without the ``-<id>`` the portal adds
    once the experiment exists.
    """
    plan = _launch_plan(
        dataset_version=dataset_version, template=template, hparams=hparams, max_trials=max_trials, batches=batches
    )
    chosen = name.strip()[:128] or _default_name(dataset_version, template)
    return _config_yaml(dataset_version=dataset_version, template=template, plan=plan, batches=batches, name=chosen)


@dataclass(frozen=True)
class _LaunchPlan:
    space: dict[str, Any]
    trials: int


def _launch_plan(
    *,
    dataset_version: DatasetVersion,
    template: str,
    hparams: Mapping[str, Any] | None,
    max_trials: int | None,
    batches: int,
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
    return _LaunchPlan(space=space, trials=trials)


def _default_name(version: DatasetVersion, template: str) -> str:
    return f"{version.dataset.name}-v{version.number}-{template}"


def _config_yaml(*, dataset_version: DatasetVersion, template: str, plan: _LaunchPlan, batches: int, name: str) -> str:
    return configs.to_yaml(
        configs.experiment_config(
            name=name,
            template=template,
            space=plan.space,
            max_trials=plan.trials,
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

    experiment_launch_task.delay(experiment_id)


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
    claimed = Experiment.objects.filter(pk=experiment.pk, status=ExperimentStatus.QUEUED).update(
        status=ExperimentStatus.LAUNCHING
    )
    if claimed != 1:
        return False
    experiment.refresh_from_db()
    _launch(experiment)
    return True


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
    """Bring one running experiment up to date; False when another poller holds it."""
    now = timezone.now()
    lease = now + timedelta(seconds=settings.EXPERIMENT_POLL_LEASE_SECONDS)
    claimed = (
        Experiment.objects.filter(pk=experiment_id, status=ExperimentStatus.RUNNING)
        .exclude(poll_lease_until__gt=now)
        .update(poll_lease_until=lease)
    )
    if claimed != 1:
        return False
    experiment = Experiment.objects.select_related("dataset_version").get(pk=experiment_id)
    try:
        try:
            snapshot = backend_for(experiment.backend).poll(experiment)
        except BackendError as exc:
            # Transient trouble with the master is shown but does not end the experiment.
            Experiment.objects.filter(pk=experiment.pk).update(error=f"last poll failed: {exc.reason}")
            return True
        _apply(experiment, snapshot)
    finally:
        Experiment.objects.filter(pk=experiment_id, poll_lease_until=lease).update(poll_lease_until=None)
    return True


def _apply(experiment: Experiment, snapshot: ExperimentSnapshot) -> None:
    if experiment.error.startswith("last poll failed"):
        Experiment.objects.filter(pk=experiment.pk).update(error="")
    for trial_snapshot in snapshot.trials:
        trial = _trial_for(experiment, trial_snapshot)
        if trial is None:
            continue
        if trial_snapshot.rewind_to is not None:
            trial_metrics_rewind(trial=trial, step=trial_snapshot.rewind_to)
        trial_metrics_ingest(trial=trial, records=trial_snapshot.records)
        if _trial_update(trial, trial_snapshot) == TrialState.COMPLETED:
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
            updates["ended_at"] = timezone.now()
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


def experiment_cancel(*, user: User, experiment: Experiment) -> Experiment:
    require_role(user, Role.ML_ENGINEER, action="cancel experiments")
    experiment.refresh_from_db()
    if not experiment.is_active:
        status = experiment.get_status_display().lower()
        raise UserError(f"Experiment {experiment.pk} is {status}; nothing to cancel.")
    if experiment.status == ExperimentStatus.RUNNING:
        try:
            backend_for(experiment.backend).cancel(experiment)
        except BackendError as exc:
            raise UserError(f"Could not cancel experiment {experiment.pk}: {exc.reason}") from exc
    with transaction.atomic():
        cancelled = Experiment.objects.filter(pk=experiment.pk, status__in=[s.value for s in _ACTIVE]).update(
            status=ExperimentStatus.CANCELLED, ended_at=timezone.now()
        )
        if cancelled == 1:
            experiment.trials.exclude(state__in=TERMINAL_TRIAL_STATES).update(
                state=TrialState.CANCELED, ended_at=timezone.now()
            )
            event_record(actor=user, verb=Verb.EXPERIMENT_CANCELLED, target=experiment, data={})
    experiment.refresh_from_db()
    return experiment


_ACTIVE = (ExperimentStatus.QUEUED, ExperimentStatus.LAUNCHING, ExperimentStatus.RUNNING)


def experiments_poll_active() -> int:
    """The periodic task's work: poll every running experiment, expire lost launches."""
    stale = timezone.now() - LAUNCH_STALE_AFTER
    for experiment in Experiment.objects.filter(status=ExperimentStatus.LAUNCHING, created_at__lt=stale):
        _launch_failed(experiment, "the worker stopped while launching; launch it again")
    polled = 0
    for pk in Experiment.objects.filter(status=ExperimentStatus.RUNNING).values_list("pk", flat=True):
        try:
            polled += experiment_poll(experiment_id=pk)
        except Exception:
            # One broken experiment must not stop the others from being polled.
            logger.exception("polling experiment %s failed", pk)
    return polled


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
