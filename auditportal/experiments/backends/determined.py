"""Determined cluster backend: the only module of the portal that talks to a Determined master.

Uses the SDK (determined==0.38.1) with a service account from DET_MASTER / DET_USER /
DET_PASSWORD(_FILE). Every request has a timeout; a 401 triggers one re-login; connection errors
and 5xx answers are retried with exponential backoff, then reported as "master unreachable". The
metrics endpoint is a snapshot, re-read on every poll and de-duplicated on (trial, group, steps).
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
from auditportal.experiments.models import Experiment, MetricPoint, TrialState
from auditportal.fairness.metricsfile import MetricRecord

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
        known: set[tuple[int | None, str, int]] = set(
            MetricPoint.objects.filter(trial__experiment=experiment)
            .values_list("trial__det_trial_id", "kind", "step")
            .distinct()
        )
        snapshots: dict[int, TrialSnapshot] = {}
        for trial in trials:
            checkpoint = getattr(trial, "bestCheckpoint", None)
            snapshots[trial.id] = TrialSnapshot(
                det_trial_id=trial.id,
                state=_TRIAL_STATES.get(_enum_value(trial.state), TrialState.RUNNING),
                hparams=dict(trial.hparams or {}),
                steps_done=int(trial.totalBatchesProcessed or 0),
                steps_planned=experiment.batches,
                checkpoint=(getattr(checkpoint, "uuid", None) or "") if checkpoint is not None else None,
                error="trial errored on the cluster; see its logs in Determined"
                if _enum_value(trial.state) == "STATE_ERROR"
                else None,
                records=[],
            )
        if snapshots:
            ids = sorted(snapshots)
            for group in ("training", "validation"):
                reports = self._call(f"read {group} metrics", _metrics_reader(ids, group))
                seen: set[tuple[int, str, int]] = set()
                for trial_id, report in reports:
                    key = (trial_id, report.kind, report.step)
                    if key in seen or key in known or trial_id not in snapshots:
                        continue
                    seen.add(key)
                    reports_list = snapshots[trial_id].records
                    assert isinstance(reports_list, list)
                    reports_list.append(report)
        return ExperimentSnapshot(
            trials=list(snapshots.values()),
            finished=state in _FINISHED_EXPERIMENT_STATES,
            error="the Determined experiment ended in an error" if state == "STATE_ERROR" else "",
        )

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
                if status < 500:
                    raise BackendError(f"the master refused to {what}: HTTP {status} {_short(exc)}") from None
                # A 5xx answer means the request was not carried out: safe to send again.
                problem = f"master unreachable: HTTP {status} from {self.master} while trying to {what}"
            except errors.BadRequestException as exc:
                # Raised for timeouts and other request failures that are not connection errors.
                problem = f"master unreachable: {self.master} did not answer in time ({_short(exc)})"
                if not retry_after_send:
                    attempt = self.attempts
            attempt += 1
            if attempt < self.attempts:
                delay = self.backoff * (2 ** (attempt - 1))
                logger.warning("Determined: could not %s (%s); retrying in %.1fs", what, problem, delay)
                time.sleep(delay)
        raise BackendUnavailable(problem)


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


def _metrics_reader(trial_ids: list[int], group: str) -> Callable[[Session], list[tuple[int, MetricRecord]]]:
    def read(session: Session) -> list[tuple[int, MetricRecord]]:
        return list(_iter_metrics(session, trial_ids, group))

    return read


def _iter_metrics(session: Session, trial_ids: list[int], group: str) -> Iterator[tuple[int, MetricRecord]]:
    for page in bindings.get_GetMetrics(session, trialIds=trial_ids, group=group):
        for report in page.metrics:
            # The SDK's own parser (TrialMetrics._from_bindings) reads these keys.
            key = "validation_metrics" if group == "validation" else "avg_metrics"
            values = report.metrics.get(key) or {} if isinstance(report.metrics, dict) else {}
            metrics: dict[str, float | None] = {}
            for name, value in values.items():
                if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
                    metrics[str(name)] = None if value is None else float(value)
            yield report.trialId, MetricRecord(kind=group, step=int(report.totalBatches), metrics=metrics)
