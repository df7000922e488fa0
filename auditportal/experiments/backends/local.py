"""Local backend: trainer/ in Determined's local training mode, one runner per trial.

Each trial runs from its own folder ``EXPERIMENT_RUN_DIR/exp-<id>/trial-<n>/``: ``work/`` (the cwd;
Determined copies it into every checkpoint, so it stays empty), ``xdg/`` (checkpoints),
``hparams.json``, ``run.json`` (the dataset version it trains on), ``metrics.jsonl``, ``trial.log``
and the runner's files (backends/runner.py: ``pid``, ``stop``, ``stopped``, ``exit_code``). The runner
records the exit status even when the worker that started the trial has died, so a restarted worker
picks every trial up where it was.

A trial of ``slots_per_trial`` > 1 runs under ``torch.distributed.run`` with that many processes
(gloo on CPU), so the per-worker metrics (worker_share/...) are those of real workers. Stopping a
trial (a cancel, or ASHA's early stop) writes its ``stop`` file; the runner beside the trainer does
the rest, so no pid is signalled from here.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from django.conf import settings
from django.db.models import Q, Sum
from django.utils import timezone

from auditportal.experiments import asha, checkpoints, configs
from auditportal.experiments.backends import (
    BackendError,
    ExperimentSnapshot,
    Submission,
    TrialPlan,
    TrialSnapshot,
)
from auditportal.experiments.models import Backend, Experiment, ExperimentStatus, StopReason, Trial, TrialState
from auditportal.fairness.files import metricsfile

logger = logging.getLogger(__name__)

RUNNER = Path(__file__).resolve().with_name("runner.py")

# Determined's DistributedContext has the chief bind two ZMQ ports, fixed (12360, 12376) unless these
# are set: each multi-process trial gets free ones, so trials (and other runs) on one machine coexist.
_DETERMINED_PORT_ENV = ("INTER_TRAIN_PROCESS_COMM_PORT_1", "INTER_TRAIN_PROCESS_COMM_PORT_2")

# Popen objects of trials this process started, so their exit is reaped (no zombies).
_children: dict[int, subprocess.Popen[bytes]] = {}

# A trial claimed but without a pid file after this long was never started (its worker died).
START_GRACE = timedelta(seconds=30)


def run_dir(trial: Trial) -> Path:
    return Path(settings.EXPERIMENT_RUN_DIR) / f"exp-{trial.experiment_id}" / f"trial-{trial.number}"


class LocalBackend:
    name = "local"

    def checkpoint_metadata_set(self, checkpoint: str, *, key: str, value: dict[str, Any]) -> None:
        """Set ``key`` in the JSON file beside the checkpoint's folder (local training mode has no master
        to keep metadata), keeping its other keys; written whole or not at all."""
        folder = Path(checkpoint).resolve()
        runs = Path(settings.EXPERIMENT_RUN_DIR).resolve()
        if not folder.is_relative_to(runs):
            raise BackendError(f"checkpoint {checkpoint} is not under EXPERIMENT_RUN_DIR ({runs})")
        if not folder.is_dir():
            raise BackendError(f"checkpoint {checkpoint} no longer exists")
        path = checkpoint_metadata_path(str(folder))
        metadata: dict[str, Any] = {}
        if path.is_file():
            try:
                metadata = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise BackendError(f"cannot read {path}: {exc}") from exc
        metadata[key] = value
        partial = path.with_name(path.name + ".tmp")
        partial.write_text(json.dumps(metadata, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(partial, path)

    def submit(self, experiment: Experiment, *, shard_dir: Path) -> Submission:
        count = 1 if experiment.template == "single" else experiment.max_trials
        # Random and ASHA spaces are sampled here; ASHA's trials are dealt to its brackets in the order
        # Determined creates them, and services stop them at the rungs (asha.py).
        drawn = configs.sample(experiment.hparam_space, count, seed=experiment.pk)
        brackets: list[int | None] = [None] * count
        if experiment.template == "asha":
            plan = asha.search_brackets(
                max_trials=count, max_time=experiment.batches, max_concurrent_trials=experiment.max_concurrent_trials
            )
            brackets = list(asha.trial_brackets(plan))
        return Submission(
            det_experiment_id=None,
            trials=[
                TrialPlan(
                    number=index + 1, hparams=hparams, steps_planned=experiment.batches, asha_bracket=brackets[index]
                )
                for index, hparams in enumerate(drawn)
            ],
        )

    def poll(self, experiment: Experiment) -> ExperimentSnapshot:
        _reap()
        if experiment.status == ExperimentStatus.RUNNING:
            self._start_queued(experiment)
        snapshots = [
            self._observe(trial, experiment)
            for trial in experiment.trials.filter(state__in=[TrialState.STARTING, TrialState.RUNNING])
        ]
        return ExperimentSnapshot(trials=snapshots)

    def cancel(self, experiment: Experiment) -> None:
        """Ask the runner of every started trial to stop it; polls see them end (``stopped``)."""
        for trial in experiment.trials.filter(state__in=[TrialState.STARTING, TrialState.RUNNING]):
            request_stop(trial, reason=StopReason.CANCEL)

    def _start_queued(self, experiment: Experiment) -> None:
        """Start queued trials, in number order, as Determined's searcher creates them: at most the
        search's ``max_concurrent_trials`` at once (an ASHA search's share per bracket, asha.brackets),
        so the next trial starts only when one has ended (completed, or stopped at a rung), and within
        EXPERIMENT_LOCAL_CONCURRENCY slots over every local experiment."""
        # EXPERIMENT_LOCAL_CONCURRENCY counts processes (slots); a trial that needs more than that
        # runs alone rather than never.
        used = (
            Trial.objects.filter(
                experiment__backend=Backend.LOCAL, state__in=[TrialState.STARTING, TrialState.RUNNING]
            ).aggregate(slots=Sum("experiment__slots_per_trial"))["slots"]
            or 0
        )
        limits = _concurrency_limits(experiment)
        running = list(
            experiment.trials.filter(state__in=[TrialState.STARTING, TrialState.RUNNING]).values_list(
                "asha_bracket", flat=True
            )
        )
        for trial in experiment.trials.filter(state=TrialState.QUEUED).order_by("number"):
            if used and used + experiment.slots_per_trial > settings.EXPERIMENT_LOCAL_CONCURRENCY:
                return
            limit = limits.get(trial.asha_bracket, 0)
            if limit and running.count(trial.asha_bracket) >= limit:
                continue  # its search (bracket) has as many trials running as it may
            if self._start(trial, experiment):
                used += experiment.slots_per_trial
                running.append(trial.asha_bracket)

    def _start(self, trial: Trial, experiment: Experiment) -> bool:
        # What an earlier start of this trial left (one handed back to the queue). Before the claim: from
        # the claim on, a cancel may write this trial's stop request, which must stay.
        directory = run_dir(trial)
        for name in ("pid", "stop", "stopped", "exit_code", "exit_code.tmp", "metrics.jsonl", "trial.log"):
            (directory / name).unlink(missing_ok=True)
        # Claim: exactly one poller moves a trial out of QUEUED, so it is started once, and never once
        # its experiment is being cancelled.
        claimed = Trial.objects.filter(
            pk=trial.pk, state=TrialState.QUEUED, experiment__status=ExperimentStatus.RUNNING
        ).update(state=TrialState.STARTING, started_at=timezone.now())
        if claimed != 1:
            return False
        (directory / "work").mkdir(parents=True, exist_ok=True)
        (directory / "xdg").mkdir(exist_ok=True)
        (directory / "hparams.json").write_text(json.dumps(trial.hparams, sort_keys=True))
        # What the trial is trained on, kept beside its checkpoints: a checkpoint is only run on its own
        # dataset version's shards (experiments/checkpoints.py), even if this folder outlives the database.
        version = experiment.dataset_version
        record = {
            "experiment": experiment.pk,
            "trial": trial.pk,
            "dataset_version": {"id": version.pk, "sha256": version.sha256},
        }
        (directory / checkpoints.RUN_RECORD).write_text(json.dumps(record, sort_keys=True))
        launcher: list[str] = [settings.EXPERIMENT_TRAINER_PYTHON]
        ports: list[str] = []
        if experiment.slots_per_trial > 1:
            # --standalone: a rendezvous on a free local port, so trials never collide on one.
            launcher += [
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nnodes=1",
                f"--nproc_per_node={experiment.slots_per_trial}",
            ]
            ports = [f"--free-port-env={name}" for name in _DETERMINED_PORT_ENV]
        command = [
            *launcher,
            "-m",
            settings.EXPERIMENT_TRAINER_MODULE,
            "--data",
            experiment.shard_dir,
            "--hparams",
            str(directory / "hparams.json"),
            "--batches",
            str(experiment.batches),
            "--validation-period",
            str(experiment.validation_period),
            "--metrics-out",
            str(directory / "metrics.jsonl"),
            "--trial-id",
            str(trial.pk),
        ]
        env = {
            **os.environ,
            "PYTHONPATH": str(settings.BASE_DIR),
            "XDG_DATA_HOME": str(directory / "xdg"),
            "RUN_DIR": str(directory),
            # Small tabular models train several times faster on one thread than on an oversubscribed
            # few (measured on 2 cores); an operator can still set OMP_NUM_THREADS for the worker.
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        }
        try:
            process = subprocess.Popen(
                [
                    *(sys.executable, str(RUNNER), str(directory), *ports),
                    f"--check-seconds={settings.EXPERIMENT_RUNNER_CHECK_SECONDS}",
                    *("--", *command),
                ],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            Trial.objects.filter(pk=trial.pk).update(
                state=TrialState.ERRORED, error=f"trainer could not be started: {exc}", ended_at=timezone.now()
            )
            return False
        _children[process.pid] = process
        Trial.objects.filter(pk=trial.pk, state=TrialState.STARTING).update(pid=process.pid)
        logger.info("started trial %s of experiment %s as pid %d", trial.number, experiment.pk, process.pid)
        return True

    def _observe(self, trial: Trial, experiment: Experiment) -> TrialSnapshot:
        directory = run_dir(trial)
        pid = trial.pid or _read_int(directory / "pid")
        snapshot = TrialSnapshot(number=trial.number)
        if pid is None:
            started = trial.started_at or timezone.now()
            if timezone.now() - started > START_GRACE:
                if trial.stop_requested_at is not None:
                    # Claimed by a worker that died before starting it, and asked to stop: nothing ran.
                    snapshot.state = _stopped_state(trial.stop_reason)
                    return snapshot
                # Claimed by a worker that died before starting it: hand it back to the queue.
                Trial.objects.filter(pk=trial.pk, state=TrialState.STARTING, pid__isnull=True).update(
                    state=TrialState.QUEUED, started_at=None
                )
            return snapshot
        if trial.pid is None:
            Trial.objects.filter(Q(pk=trial.pk), Q(pid__isnull=True)).update(pid=pid)
        exit_code = _read_int(directory / "exit_code")
        if exit_code is None and not _alive(pid, directory):
            exit_code = _read_int(directory / "exit_code")  # it may have finished in between
            if exit_code is None:
                if trial.stop_requested_at is not None:
                    snapshot.state = _stopped_state(trial.stop_reason)
                else:
                    snapshot.state = TrialState.ERRORED
                    snapshot.error = "trainer crashed: the process ended without an exit status (killed?)"
        stopped = _read_json(directory / "stopped") if exit_code is not None else None
        if stopped is not None:
            # Ended by a stop request: a cancel, or an early stop (Determined completes those).
            snapshot.state = _stopped_state(str(stopped.get("reason", "")))
            at = stopped.get("stopped_at")
            if isinstance(at, (int, float)):
                snapshot.ended_at = datetime.fromtimestamp(at, tz=UTC)
        elif exit_code == 0:
            snapshot.state = TrialState.COMPLETED
            snapshot.steps_done = experiment.batches
        elif exit_code is not None:
            snapshot.state = TrialState.ERRORED
            snapshot.error = (
                f"trainer killed by signal {-exit_code}"
                if exit_code < 0
                else f"trainer crashed (exit status {exit_code})"
            )
        elif snapshot.state is None:
            snapshot.state = TrialState.RUNNING
        if snapshot.state == TrialState.ERRORED:
            snapshot.log_tail = metricsfile.log_tail(directory / "trial.log", settings.EXPERIMENT_LOG_TAIL_LINES)
        snapshot.checkpoint = _latest_checkpoint(directory / "xdg" / "determined")
        # Read after the exit status: once the trainer has exited its file is complete, and it is read
        # to the end, so a finished trial's last validation is ingested before it is marked finished
        # (and its verdict document frozen).
        path = directory / "metrics.jsonl"
        if snapshot.state in (TrialState.COMPLETED, TrialState.ERRORED):
            snapshot.records = _all_records(path, trial.metrics_offset)
        else:
            snapshot.records = metricsfile.read_records(path, trial.metrics_offset)
        return snapshot


def _concurrency_limits(experiment: Experiment) -> dict[int | None, int]:
    """How many trials may run at once, by ASHA bracket (None: the whole search); 0: no limit."""
    if experiment.template == "asha":
        plan = asha.search_brackets(
            max_trials=experiment.max_trials,
            max_time=experiment.batches,
            max_concurrent_trials=experiment.max_concurrent_trials,
        )
        return {index: bracket.max_concurrent_trials for index, bracket in enumerate(plan)}
    return {None: experiment.max_concurrent_trials}


def request_stop(trial: Trial, *, reason: str) -> None:
    """Ask the trial's runner to stop it (it checks every EXPERIMENT_RUNNER_CHECK_SECONDS, half a
    second by default); a runner not started yet finds the request before it starts the trainer.
    Idempotent: the first request's time is kept."""
    directory = run_dir(trial)
    path = directory / "stop"
    if path.exists():
        return
    directory.mkdir(parents=True, exist_ok=True)
    request = {"reason": reason, "requested_at": timezone.now().isoformat()}
    partial = path.with_name("stop.tmp")
    partial.write_text(json.dumps(request, sort_keys=True))
    os.replace(partial, path)


def _stopped_state(reason: str) -> str:
    # Determined ends a trial its searcher stopped as COMPLETED (it trained as long as it was asked to).
    return TrialState.COMPLETED if reason == StopReason.EARLY_STOP else TrialState.CANCELED


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _all_records(path: Path, offset: int) -> Iterator[metricsfile.MetricRecord]:
    """Every complete line from ``offset`` on, read a chunk at a time."""
    while True:
        end = None
        for record in metricsfile.read_records(path, offset):
            end = record.end
            yield record
        if end is None:
            return
        offset = end


def _reap() -> None:
    for pid, process in list(_children.items()):
        if process.poll() is not None:
            del _children[pid]


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def _alive(pid: int, directory: Path) -> bool:
    _reap()
    child = _children.get(pid)
    if child is not None:
        # Started by this process and not reaped yet, so the pid is still this child's: no need to
        # look at /proc, whose command line is empty for a moment after Popen returns (see below).
        return str(directory) in cast(list[str], child.args)  # _start passes a list of str
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Guard against pid reuse (a trial started by another worker): the runner's command line names
    # the trial's folder.
    if not Path(f"/proc/{pid}").exists():
        return True
    try:
        status = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if status == "Z":
            return False
        cmdline = _cmdline(pid)
    except (FileNotFoundError, IndexError):
        return False
    # Empty while the process is between exec's start and its new command line's set-up (or while it
    # exits): it cannot be told apart yet, so it counts as alive and the next poll decides. Popen
    # returns inside that window, so a trial observed just after its start used to be taken for dead.
    return not cmdline or str(directory).encode() in cmdline


def _cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def checkpoint_metadata_path(checkpoint: str) -> Path:
    """Where the local backend keeps a checkpoint's metadata: ``<uuid>.metadata.json`` beside its folder."""
    folder = Path(checkpoint)
    return folder.with_name(f"{folder.name}.metadata.json")


def _latest_checkpoint(root: Path) -> str | None:
    try:
        candidates = [path for path in root.iterdir() if path.is_dir()]
    except FileNotFoundError:
        return None
    if not candidates:
        return None
    return str(max(candidates, key=lambda path: path.stat().st_mtime))


__all__ = ["BackendError", "LocalBackend", "run_dir"]
