"""Launching a queued experiment on a worker: the claim, the integrity check, the shards, the
submission to the backend, and the heartbeat that tells a slow launch from a dead worker."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.datasets.models import IntegrityPurpose
from auditportal.datasets.services import (
    DatasetIntegrityError,
    dataset_version_check_integrity,
    dataset_version_shard,
    shards_match_version,
)
from auditportal.experiments.backends import BackendError, backend_for
from auditportal.experiments.models import Experiment, ExperimentStatus, Trial
from auditportal.experiments.services.poll import experiment_poll
from auditportal.fairness.files.sharding import ShardingError
from auditportal.fairness.files.tabular import DatasetError

logger = logging.getLogger(__name__)


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
