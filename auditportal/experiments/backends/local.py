"""Local backend: trainer/ in Determined's local training mode, one subprocess per trial.

Each trial runs from its own folder ``EXPERIMENT_RUN_DIR/exp-<id>/trial-<n>/``:
``work/`` (the cwd; Determined copies it into every checkpoint, so it stays empty), ``xdg/``
(checkpoints), ``hparams.json``, ``metrics.jsonl``, ``trial.log`` and, written by the small shell
wrapper, ``pid`` and ``exit_code``. The wrapper records the exit status even when the worker that
started the trial has died, so a restarted worker picks every trial up where it was.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import cast

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from auditportal.experiments import configs
from auditportal.experiments.backends import (
    BackendError,
    ExperimentSnapshot,
    Submission,
    TrialPlan,
    TrialSnapshot,
)
from auditportal.experiments.models import Backend, Experiment, Trial, TrialState
from auditportal.fairness import metricsfile

logger = logging.getLogger(__name__)

# The wrapper: record the pid, run the trainer with its output in trial.log, record the exit status
# atomically. It leads its own session, so cancel can kill the whole process group.
_WRAPPER = 'cd "$1/work" && echo $$ > "$1/pid" && shift && "$@" > "$RUN_DIR/trial.log" 2>&1; '
_WRAPPER += 'echo $? > "$RUN_DIR/exit_code.tmp" && mv "$RUN_DIR/exit_code.tmp" "$RUN_DIR/exit_code"'

# Popen objects of trials this process started, so their exit is reaped (no zombies).
_children: dict[int, subprocess.Popen[bytes]] = {}

# A trial claimed but without a pid file after this long was never started (its worker died).
START_GRACE = timedelta(seconds=30)


def run_dir(trial: Trial) -> Path:
    return Path(settings.EXPERIMENT_RUN_DIR) / f"exp-{trial.experiment_id}" / f"trial-{trial.number}"


class LocalBackend:
    name = "local"

    def submit(self, experiment: Experiment, *, shard_dir: Path) -> Submission:
        count = 1 if experiment.template == "single" else experiment.max_trials
        # Random and ASHA spaces are sampled here; locally ASHA runs as a random search (no early stop).
        drawn = configs.sample(experiment.hparam_space, count, seed=experiment.pk)
        return Submission(
            det_experiment_id=None,
            trials=[
                TrialPlan(number=index + 1, hparams=hparams, steps_planned=experiment.batches)
                for index, hparams in enumerate(drawn)
            ],
        )

    def poll(self, experiment: Experiment) -> ExperimentSnapshot:
        _reap()
        self._start_queued(experiment)
        snapshots = [
            self._observe(trial, experiment)
            for trial in experiment.trials.filter(state__in=[TrialState.STARTING, TrialState.RUNNING])
        ]
        return ExperimentSnapshot(trials=snapshots)

    def cancel(self, experiment: Experiment) -> None:
        groups = []
        for trial in experiment.trials.filter(state__in=[TrialState.STARTING, TrialState.RUNNING]):
            pid = trial.pid or _read_int(run_dir(trial) / "pid")
            if pid is not None and _alive(pid, run_dir(trial)):
                groups.append(pid)
                _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for pid in groups:
            while _group_exists(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _group_exists(pid):
                _signal_group(pid, signal.SIGKILL)
        _reap()

    def _start_queued(self, experiment: Experiment) -> None:
        running = Trial.objects.filter(
            experiment__backend=Backend.LOCAL, state__in=[TrialState.STARTING, TrialState.RUNNING]
        ).count()
        free = settings.EXPERIMENT_LOCAL_CONCURRENCY - running
        if free <= 0:
            return
        for trial in list(experiment.trials.filter(state=TrialState.QUEUED).order_by("number")[:free]):
            self._start(trial, experiment)

    def _start(self, trial: Trial, experiment: Experiment) -> None:
        # Claim first: exactly one poller moves a trial out of QUEUED, so it is started once.
        claimed = Trial.objects.filter(pk=trial.pk, state=TrialState.QUEUED).update(
            state=TrialState.STARTING, started_at=timezone.now()
        )
        if claimed != 1:
            return
        directory = run_dir(trial)
        for name in ("pid", "exit_code", "exit_code.tmp", "metrics.jsonl", "trial.log"):
            (directory / name).unlink(missing_ok=True)
        (directory / "work").mkdir(parents=True, exist_ok=True)
        (directory / "xdg").mkdir(exist_ok=True)
        (directory / "hparams.json").write_text(json.dumps(trial.hparams, sort_keys=True))
        command = [
            settings.EXPERIMENT_TRAINER_PYTHON,
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
                ["/bin/sh", "-c", _WRAPPER, "trial-wrapper", str(directory), *command],
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
            return
        _children[process.pid] = process
        Trial.objects.filter(pk=trial.pk, state=TrialState.STARTING).update(pid=process.pid)
        logger.info("started trial %s of experiment %s as pid %d", trial.number, experiment.pk, process.pid)

    def _observe(self, trial: Trial, experiment: Experiment) -> TrialSnapshot:
        directory = run_dir(trial)
        pid = trial.pid or _read_int(directory / "pid")
        snapshot = TrialSnapshot(number=trial.number)
        if pid is None:
            started = trial.started_at or timezone.now()
            if timezone.now() - started > START_GRACE:
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
                snapshot.state = TrialState.ERRORED
                snapshot.error = "trainer crashed: the process ended without an exit status (killed?)"
        if exit_code == 0:
            snapshot.state = TrialState.COMPLETED
            snapshot.steps_done = experiment.batches
        elif exit_code is not None:
            snapshot.state = TrialState.ERRORED
            snapshot.error = f"trainer crashed (exit status {exit_code})"
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
    # Guard against pid reuse (a trial started by another worker): the wrapper's command line names
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


def _group_exists(pid: int) -> bool:
    _reap()
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _latest_checkpoint(root: Path) -> str | None:
    try:
        candidates = [path for path in root.iterdir() if path.is_dir()]
    except FileNotFoundError:
        return None
    if not candidates:
        return None
    return str(max(candidates, key=lambda path: path.stat().st_mtime))


__all__ = ["BackendError", "LocalBackend", "run_dir"]
