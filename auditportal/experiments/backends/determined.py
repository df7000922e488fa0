"""Determined cluster backend: the only module of the portal that talks to a Determined master.

Uses the SDK (determined==0.38.1) with a service account from DET_MASTER / DET_USER /
DET_PASSWORD(_FILE). Every request has a timeout; a 401 triggers one re-login. Connection errors,
HTTP 502-504, broken streams and timeouts are retried with exponential backoff, then reported as
"master unreachable"; any other refusal (the master answers an invalid experiment config with HTTP
500 and the reason) is reported at once with the master's own message.

A poll reads the experiment and its trial list, then only what is new: for each trial whose batch
count or latest validation moved past what the portal has stored, its workloads newest first
(``GET /api/v1/trials/{id}/workloads``, ordered by batches, a page at a time) down to the last step
already stored. The work per poll grows with the number of trials, never with their history.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import requests
from determined.common.api import bindings, errors
from determined.common.api._session import Session, UnauthSession
from determined.common.api._util import canonicalize_master_url
from determined.common.api.authentication import salt_and_hash
from determined.experimental import Determined
from django.conf import settings

from auditportal.experiments import configs
from auditportal.experiments.backends import (
    BackendAuthError,
    BackendError,
    BackendUnavailable,
    ExperimentSnapshot,
    Submission,
    TrialSnapshot,
)
from auditportal.experiments.models import TERMINAL_TRIAL_STATES, Experiment, Trial, TrialState
from auditportal.fairness.files.metricsfile import MetricRecord

logger = logging.getLogger(__name__)

T = TypeVar("T")

_TRIAL_STATES = {
    "STATE_QUEUED": TrialState.QUEUED,
    "STATE_PULLING": TrialState.STARTING,
    "STATE_STARTING": TrialState.STARTING,
    "STATE_ACTIVE": TrialState.RUNNING,
    "STATE_RUNNING": TrialState.RUNNING,
    "STATE_PAUSED": TrialState.QUEUED,
    "STATE_STOPPING_COMPLETED": TrialState.RUNNING,
    "STATE_STOPPING_CANCELED": TrialState.RUNNING,
    "STATE_STOPPING_KILLED": TrialState.RUNNING,
    "STATE_STOPPING_ERROR": TrialState.RUNNING,
    "STATE_COMPLETED": TrialState.COMPLETED,
    "STATE_CANCELED": TrialState.CANCELED,
    "STATE_ERROR": TrialState.ERRORED,
}
_FINISHED_EXPERIMENT_STATES = frozenset({"STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR", "STATE_DELETED"})
# Answers that mean the request never reached a working master (a proxy or a restarting master):
# worth sending again. Anything else from the master is its answer.
_TRANSIENT_STATUSES = frozenset({502, 503, 504})
# Workloads read per request when catching up with a trial (newest first).
WORKLOAD_PAGE = 100
# The harness adds the training length to every report; they are time metrics, not the model's.
_TIME_METRICS = frozenset({"batches", "epochs"})


class _Timeouts:
    """Gives every request of an SDK session a timeout; urllib3's retries are off (we retry)."""

    timeout: int = 15

    def _do_request(
        self,
        method: str,
        path: str,
        params: dict[str, Any] | None,
        json: Any,
        data: str | None,
        headers: dict[str, Any] | None,
        timeout: int | None,
        stream: bool,
    ) -> requests.Response:
        return super()._do_request(  # type: ignore[misc,no-any-return]
            method, path, params, json, data, headers, timeout or self.timeout, stream
        )


class _TimeoutSession(_Timeouts, Session):  # type: ignore[misc]
    pass


class _TimeoutUnauthSession(_Timeouts, UnauthSession):  # type: ignore[misc]
    pass


# One logged-in session per (master, user), shared by the polls of one worker process.
_sessions: dict[tuple[str, str], _TimeoutSession] = {}
_sessions_lock = threading.Lock()


class DeterminedBackend:
    name = "determined"

    def __init__(
        self,
        *,
        master: str,
        user: str,
        password: str,
        project_id: int | None = None,
        timeout: int = 15,
        attempts: int = 4,
        backoff: float = 1.0,
        model_dir: Path | None = None,
    ) -> None:
        self.master = canonicalize_master_url(master)
        self.user = user
        self.password = password
        self.project_id = project_id
        self.timeout = timeout
        self.attempts = attempts
        self.backoff = backoff
        self.model_dir = model_dir or Path(settings.EXPERIMENT_MODEL_DIR)

    @classmethod
    def from_settings(cls) -> DeterminedBackend:
        if not settings.DET_MASTER:
            raise BackendError("master unreachable: DET_MASTER is not set")
        return cls(
            master=settings.DET_MASTER,
            user=settings.DET_USER,
            password=settings.DET_PASSWORD,
            project_id=settings.DET_PROJECT_ID,
            timeout=settings.DET_REQUEST_TIMEOUT,
            attempts=settings.DET_RETRY_ATTEMPTS,
            backoff=settings.DET_RETRY_BACKOFF_MS / 1000,
            model_dir=settings.EXPERIMENT_MODEL_DIR,
        )

    # -- the interface -------------------------------------------------------------------------

    def submit(self, experiment: Experiment, *, shard_dir: Path) -> Submission:
        config = configs.from_yaml(experiment.config_yaml)
        with tempfile.TemporaryDirectory(prefix="auditportal-model-") as staging:
            # The uploaded context's root holds trainer/ itself: `python3 -m trainer.train` works there.
            shutil.copytree(
                self.model_dir, Path(staging) / "trainer", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
            created = self._call(
                "create the experiment",
                lambda session: Determined._from_session(session).create_experiment(
                    config=config, model_dir=staging, project_id=self.project_id
                ),
                # A create that may have reached the master (no answer in time) must not be repeated.
                retry_after_send=False,
            )
        return Submission(det_experiment_id=int(created.id), trials=[])

    def poll(self, experiment: Experiment) -> ExperimentSnapshot:
        det_id = experiment.det_experiment_id
        if det_id is None:
            return ExperimentSnapshot(trials=[], finished=True, error="no Determined experiment id was recorded")
        response = self._call(
            "read the experiment", lambda session: bindings.get_GetExperiment(session, experimentId=det_id)
        )
        state = _enum_value(response.experiment.state)
        trials: list[Any] = self._call("list trials", lambda session: list(_iter_trials(session, det_id)))
        stored = {
            trial.det_trial_id: trial
            for trial in experiment.trials.filter(det_trial_id__in=[trial.id for trial in trials]).only(
                "det_trial_id", "state", "steps_done", "latest_step", "metrics_offset"
            )
        }
        snapshots = [self._trial_snapshot(trial, stored.get(trial.id), experiment) for trial in trials]
        return ExperimentSnapshot(
            trials=snapshots,
            finished=state in _FINISHED_EXPERIMENT_STATES,
            error="the Determined experiment ended in an error" if state == "STATE_ERROR" else "",
        )

    def _trial_snapshot(self, trial: Any, known: Trial | None, experiment: Experiment) -> TrialSnapshot:
        det_state = _enum_value(trial.state)
        total = int(trial.totalBatchesProcessed or 0)
        checkpoint = getattr(trial, "bestCheckpoint", None)
        snapshot = TrialSnapshot(
            det_trial_id=trial.id,
            state=_TRIAL_STATES.get(det_state, TrialState.RUNNING),
            hparams=dict(trial.hparams or {}),
            steps_done=total,
            steps_planned=experiment.batches,
            checkpoint=(getattr(checkpoint, "uuid", None) or "") if checkpoint is not None else None,
            error="trial errored on the cluster; see its logs in Determined" if det_state == "STATE_ERROR" else None,
        )
        if known is not None and known.state in TERMINAL_TRIAL_STATES:
            return snapshot  # everything it reported was read before it was marked finished
        training_seen = known.metrics_offset if known is not None else 0
        validation_seen = (known.latest_step or 0) if known is not None else 0
        if known is not None and total < known.steps_done:
            # Back at an earlier checkpoint (a resume): the master archived what came after it, and
            # the new run reports those steps again.
            snapshot.rewind_to = total
            training_seen, validation_seen = min(training_seen, total), min(validation_seen, total)
        latest_validation = getattr(getattr(trial, "latestValidation", None), "totalBatches", None)
        wants_training = total > training_seen
        wants_validation = (total if latest_validation is None else int(latest_validation)) > validation_seen
        records: list[MetricRecord] = []
        if wants_training or wants_validation:
            floor = min(training_seen if wants_training else total, validation_seen if wants_validation else total)
            read = self._call(
                f"read the metrics of trial {trial.id}",
                _workloads_reader(trial.id, floor, validation_only=not wants_training),
            )
            seen = {"training": training_seen, "validation": validation_seen}
            records = sorted((r for r in read if r.step > seen[r.kind]), key=lambda r: (r.step, r.kind))
        snapshot.records = records
        snapshot.metrics_cursor = max([training_seen, *(r.step for r in records if r.kind == "training")])
        return snapshot

    def cancel(self, experiment: Experiment) -> None:
        det_id = experiment.det_experiment_id
        if det_id is None:
            return
        self._call("kill the experiment", lambda session: bindings.post_KillExperiment(session, id=det_id))

    def checkpoint_metadata_set(self, checkpoint: str, *, key: str, value: dict[str, Any]) -> None:
        """Set ``key`` in the checkpoint's user metadata, keeping its other keys (the master replaces
        the whole metadata with what it is sent, so the SDK reads it first). Safe to repeat."""

        def update(session: _TimeoutSession) -> None:
            Determined._from_session(session).get_checkpoint(checkpoint).add_metadata({key: value})

        self._call(f"update the metadata of checkpoint {checkpoint}", update)

    # -- sessions and retries ------------------------------------------------------------------

    def _login(self) -> _TimeoutSession:
        unauth = _TimeoutUnauthSession(master=self.master, cert=None, max_retries=0)
        unauth.timeout = self.timeout
        body = bindings.v1LoginRequest(username=self.user, password=salt_and_hash(self.password), isHashed=True)
        token = bindings.post_Login(session=unauth, body=body).token
        session = _TimeoutSession(master=self.master, username=self.user, token=token, cert=None, max_retries=0)
        session.timeout = self.timeout
        return session

    def _session(self, *, fresh: bool = False) -> _TimeoutSession:
        key = (self.master, self.user)
        with _sessions_lock:
            session = _sessions.get(key)
            if session is None or fresh:
                session = self._login()
                _sessions[key] = session
            return session

    def _call(self, what: str, call: Callable[[_TimeoutSession], T], *, retry_after_send: bool = True) -> T:
        """Run ``call`` with a logged-in session. Transient trouble (no connection, 502-504, a stream
        broken off, a timeout) is retried with backoff and ends as BackendUnavailable; every other
        refusal raises BackendError at once with the master's message. With ``retry_after_send``
        false, nothing that may have reached the master (a timeout, a 504) is sent again."""
        problem = ""
        relogged = False
        attempt = 0
        while attempt < self.attempts:
            try:
                try:
                    session = self._session()
                except errors.UnauthenticatedException:
                    raise BackendAuthError(
                        f"authentication failed: the master rejected user {self.user!r} (check DET_USER / DET_PASSWORD)"
                    ) from None
                except errors.ForbiddenException as exc:
                    raise BackendAuthError(f"authentication failed: {exc}") from None
                return call(session)
            except errors.UnauthenticatedException:
                # Tokens expire (7 days on the open-source master): log in again, once.
                if relogged:
                    raise BackendAuthError(
                        f"authentication failed: the master rejected a fresh token for {self.user!r} "
                        f"while trying to {what}"
                    ) from None
                relogged = True
                with _sessions_lock:
                    _sessions.pop((self.master, self.user), None)
                continue
            except errors.ForbiddenException as exc:
                raise BackendAuthError(f"authentication failed: not allowed to {what} ({exc})") from None
            except errors.MasterNotFoundException as exc:
                problem = f"master unreachable: cannot connect to {self.master} ({_short(exc)})"
            except errors.NotFoundException as exc:
                raise BackendError(f"the master could not {what}: not found ({_short(exc)})") from None
            except errors.APIException as exc:
                status = getattr(exc, "status_code", 0) or 0
                if status not in _TRANSIENT_STATUSES:
                    # The master's answer, e.g. HTTP 500 "invalid experiment configuration: ...":
                    # sending it again changes nothing.
                    raise BackendError(f"the master refused to {what} (HTTP {status}): {_message(exc)}") from None
                problem = f"master unreachable: HTTP {status} from {self.master} while trying to {what}"
                if status == 504 and not retry_after_send:
                    attempt = self.attempts  # a gateway timeout: the master may have carried it out
            except bindings.APIHttpStreamError as exc:
                # The master broke off a stream part-way (its error line, or the connection).
                problem = f"master unreachable: {self.master} broke off while trying to {what} ({_short(exc)})"
            except (errors.BadRequestException, requests.exceptions.RequestException) as exc:
                # Timeouts and other request failures that are not connection errors, also while a
                # response is being read.
                problem = f"master unreachable: {self.master} did not answer in time ({_short(exc)})"
                if not retry_after_send:
                    attempt = self.attempts
            attempt += 1
            if attempt < self.attempts:
                delay = self.backoff * (2 ** (attempt - 1))
                logger.warning("Determined: could not %s (%s); retrying in %.1fs", what, problem, delay)
                time.sleep(delay)
        raise BackendUnavailable(problem)


def _message(exc: errors.APIException) -> str:
    """The master's own error text (the body's ``error.error``), whole but bounded."""
    text = " ".join(line.strip() for line in str(exc).strip().splitlines() if line.strip())
    return text[:2000] or type(exc).__name__


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:300]


def _enum_value(value: Any) -> str:
    return str(getattr(value, "value", value))


def _iter_trials(session: Session, experiment_id: int) -> Iterator[Any]:
    offset = 0
    while True:
        page = bindings.get_GetExperimentTrials(session, experimentId=experiment_id, offset=offset)
        yield from page.trials
        end = page.pagination.endIndex if page.pagination is not None else None
        total = page.pagination.total if page.pagination is not None else None
        if not page.trials or end is None or total is None or end >= total:
            return
        offset = end


def _workloads_reader(trial_id: int, floor: int, *, validation_only: bool) -> Callable[[Session], list[MetricRecord]]:
    """Reads a trial's metric workloads newest first, a page at a time, down to ``floor`` batches."""

    def read(session: Session) -> list[MetricRecord]:
        records: list[MetricRecord] = []
        offset = 0
        while True:
            page = bindings.get_GetTrialWorkloads(
                session,
                trialId=trial_id,
                orderBy=bindings.v1OrderBy.DESC,
                sortKey="batches",
                limit=WORKLOAD_PAGE,
                offset=offset,
                filter=bindings.GetTrialWorkloadsRequestFilterOption.VALIDATION
                if validation_only
                else bindings.GetTrialWorkloadsRequestFilterOption.UNSPECIFIED,
                includeBatchMetrics=False,
            )
            below = False
            for container in page.workloads:
                for kind in ("training", "validation"):
                    workload = getattr(container, kind, None)
                    if workload is None:
                        continue
                    if int(workload.totalBatches) <= floor:
                        below = True
                        continue
                    records.append(_record(kind, workload))
            if below or len(page.workloads) < WORKLOAD_PAGE:
                return records
            offset += len(page.workloads)

    return read


def _record(kind: str, workload: Any) -> MetricRecord:
    values = getattr(workload.metrics, "avgMetrics", None) or {}
    metrics: dict[str, float | None] = {}
    for name, value in values.items():
        if name in _TIME_METRICS:
            continue
        if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
            metrics[str(name)] = None if value is None else float(value)
    return MetricRecord(kind=kind, step=int(workload.totalBatches), metrics=metrics)
