"""A stub of the Determined master's REST API, for contract tests of the portal's Determined backend.

This is a stand-in, not a master: a Determined master cannot run on our machines (no Docker, no Go).
It serves the endpoints the SDK (determined==0.38.1) calls for the portal, listed in
../shared/DETERMINED.md, with the fields the SDK's parsers require, on 127.0.0.1 and a random port.
Where it matters it is as strict as a 0.38.1 master:

- A create request's config is checked against expconf v0 (tests/stubs/expconf_v0): an unknown key,
  a wrong type or a missing field is answered with HTTP 500 and the master's message, as
  master/internal/api_experiment.go does (``parseCreateExperiment``'s error is returned as is).
- The cluster has ``agent_slots`` (one entry per agent, default one agent of 4 slots: the compose
  profile's CPU agent with ``artificial_slots: 4``). A trial needing more slots than the cluster has
  is refused as a 0.38.1 master with ``launch_error: true`` refuses it: HTTP 500, "slots requested
  exceeds cluster capacity" (the master's experiment creation: ``ValidateResources`` returns the
  CurrentSlotsExceeded launch warning and ``if m.config.LaunchError && len(launchWarnings) > 0``
  returns that error); with ``resources.is_single_node`` a trial needing more slots than one agent
  has is refused with "validating resources: request unfulfillable, please try requesting less
  slots" (agentrm ``ValidateResources``).
- The searcher creates the trials (one for ``single``, ``max_trials`` otherwise), with
  hyperparameters drawn from the config's space; they start QUEUED and ``advance`` moves them
  through PULLING, STARTING and RUNNING. A kill moves the experiment and its unfinished trials to
  STOPPING_KILLED; ``settle_kills`` ends them CANCELED (Determined has no KILLED end state).
- Metric reports carry ``batches`` and ``epochs`` as the harness adds them; ``resume`` archives what
  a trial reported after a checkpoint and starts a new run, as the master does.
- A trial carries ``bestCheckpoint`` (a v1CheckpointWorkload) once it has a checkpoint, and an
  unfiltered workload read (``filter`` unset) holds checkpoint rows (``{"checkpoint": ...}``) among
  the training and validation rows, as the master's ``proto_get_trial_workloads`` does.
- Trial workloads (``GET /api/v1/trials/{id}/workloads``) are sorted by batches and paged with
  ``offset`` and ``limit``; ``break_off`` breaks such a read part-way.

Scripting: ``fail_next(n, status=503, prefix=None)``, ``break_off(prefix, after=, rounds=)``,
``expire_tokens()``, ``advance``,
``complete``, ``add_metrics``, ``resume``, ``settle_kills``, ``add_checkpoint`` (metadata the portal
reads and replaces whole, master/internal/api_checkpoint.go). ``requests`` logs every request.
"""

from __future__ import annotations

import json
import random
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import yaml

from tests.loopback import LoopbackServer
from tests.stubs.expconf import config_errors, master_message

START = "2026-01-01T00:00:00Z"
ACTIVE_TRIAL_STATES = ("STATE_QUEUED", "STATE_PULLING", "STATE_STARTING", "STATE_RUNNING")
FINAL_TRIAL_STATES = frozenset({"STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR"})


@dataclass
class StubTrial:
    id: int
    experiment_id: int
    hparams: dict[str, Any]
    state: str = "STATE_QUEUED"
    batches: int = 0
    run_id: int = 1
    restarts: int = 0


@dataclass
class StubExperiment:
    id: int
    config: str
    state: str = "STATE_ACTIVE"
    trials: list[int] = field(default_factory=list)
    model_files: list[str] = field(default_factory=list)


@dataclass
class StubCheckpoint:
    uuid: str
    trial_id: int
    experiment_id: int
    metadata: dict[str, Any] = field(default_factory=dict)
    batches: int = 0
    # Every metadata body the portal posted, in order.
    posted: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class StubRequest:
    method: str
    path: str
    query: dict[str, list[str]]


class DeterminedMasterStub:
    def __init__(self, *, username: str, password: str, agent_slots: tuple[int, ...] = (4,)) -> None:
        self.username = username
        self.password = password
        self.agent_slots = agent_slots
        self.lock = threading.Lock()
        self.log: list[StubRequest] = []
        self.experiments: dict[int, StubExperiment] = {}
        self.trials: dict[int, StubTrial] = {}
        self.metrics: list[dict[str, Any]] = []
        self.checkpoints: dict[str, StubCheckpoint] = {}
        self.valid_tokens: set[str] = set()
        self.logins = 0
        # Workload rows served, for checks that a poll reads only what is new.
        self.workloads_served = 0
        self._failures: list[tuple[str | None, int]] = []
        # break_off rules: [prefix, successes before the next failure, its status, rounds left].
        self._breaks: list[list[Any]] = []
        self._next_id = 100
        self.loopback = LoopbackServer(self._handler())
        self.server = self.loopback.server

    @property
    def url(self) -> str:
        return self.loopback.base_url

    @property
    def requests(self) -> list[tuple[str, str]]:
        return [(entry.method, entry.path) for entry in self.log]

    def start(self) -> DeterminedMasterStub:
        self.loopback.start()
        return self

    def stop(self) -> None:
        self.loopback.stop()

    # -- scripting ---------------------------------------------------------------------------

    def fail_next(self, count: int, status: int = 503, *, prefix: str | None = None) -> None:
        """The next ``count`` requests (whose path starts with ``prefix``, if given) answer ``status``."""
        with self.lock:
            self._failures.extend([(prefix, status)] * count)

    def break_off(self, prefix: str, *, after: int, rounds: int, status: int = 503) -> None:
        """For ``rounds`` rounds, ``after`` requests under ``prefix`` are answered and the next one
        fails with ``status``: a read of several pages broken off part-way, each time it is tried."""
        with self.lock:
            self._breaks.append([prefix, after, after, status, rounds])

    def expire_tokens(self) -> None:
        with self.lock:
            self.valid_tokens.clear()

    def advance(self, trial_id: int | None = None, *, steps: int = 1) -> None:
        """Move one trial (or every unfinished one) ``steps`` states along QUEUED, PULLING,
        STARTING, RUNNING."""
        with self.lock:
            chosen = [self.trials[trial_id]] if trial_id is not None else list(self.trials.values())
            for trial in chosen:
                if trial.state in ACTIVE_TRIAL_STATES:
                    index = ACTIVE_TRIAL_STATES.index(trial.state)
                    trial.state = ACTIVE_TRIAL_STATES[min(index + steps, len(ACTIVE_TRIAL_STATES) - 1)]

    def complete(self, trial_id: int, state: str = "STATE_COMPLETED") -> None:
        """End a trial; once every trial has ended, the experiment ends (COMPLETED, or ERROR when a
        trial errored)."""
        with self.lock:
            self.trials[trial_id].state = state
            experiment = self.experiments[self.trials[trial_id].experiment_id]
            states = {self.trials[i].state for i in experiment.trials}
            if states <= FINAL_TRIAL_STATES:
                experiment.state = "STATE_ERROR" if "STATE_ERROR" in states else "STATE_COMPLETED"

    def settle_kills(self) -> None:
        """Killed experiments and trials finish stopping: STOPPING_KILLED becomes CANCELED."""
        with self.lock:
            for trial in self.trials.values():
                if trial.state == "STATE_STOPPING_KILLED":
                    trial.state = "STATE_CANCELED"
            for experiment in self.experiments.values():
                if experiment.state == "STATE_STOPPING_KILLED":
                    experiment.state = "STATE_CANCELED"

    def add_trial(self, experiment_id: int, hparams: dict[str, Any]) -> StubTrial:
        with self.lock:
            return self._new_trial(experiment_id, hparams)

    def add_metrics(self, trial_id: int, group: str, step: int, metrics: dict[str, Any]) -> None:
        """A report as the harness sends it: the model's metrics plus ``batches`` and ``epochs``."""
        with self.lock:
            trial = self.trials[trial_id]
            key = "validation_metrics" if group == "validation" else "avg_metrics"
            self.metrics.append(
                {
                    "archived": False,
                    "endTime": START,
                    "group": group,
                    "id": len(self.metrics) + 1,
                    "metrics": {key: {**metrics, "batches": step, "epochs": step // 100}},
                    "totalBatches": step,
                    "trialId": trial_id,
                    "trialRunId": trial.run_id,
                }
            )
            trial.batches = max(trial.batches, step)

    def resume(self, trial_id: int, *, from_step: int) -> None:
        """The trial continues from its checkpoint at ``from_step`` in a new run: what it reported
        after that step is archived, and its batch count goes back to the checkpoint's."""
        with self.lock:
            trial = self.trials[trial_id]
            for report in self.metrics:
                if report["trialId"] == trial_id and report["totalBatches"] > from_step:
                    report["archived"] = True
            trial.run_id += 1
            trial.batches = from_step
            trial.state = "STATE_RUNNING"

    def add_checkpoint(
        self, uuid: str, trial_id: int, experiment_id: int = 1, *, step: int | None = None
    ) -> StubCheckpoint:
        """A checkpoint of the trial at ``step`` batches (default: the trial's batch count, or 0)."""
        with self.lock:
            trial = self.trials.get(trial_id)
            batches = step if step is not None else (trial.batches if trial is not None else 0)
            checkpoint = StubCheckpoint(uuid=uuid, trial_id=trial_id, experiment_id=experiment_id, batches=batches)
            self.checkpoints[uuid] = checkpoint
            return checkpoint

    def count(self, method: str, prefix: str) -> int:
        return sum(1 for entry in self.log if entry.method == method and entry.path.startswith(prefix))

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _new_trial(self, experiment_id: int, hparams: dict[str, Any]) -> StubTrial:
        trial = StubTrial(id=self._new_id(), experiment_id=experiment_id, hparams=hparams)
        self.trials[trial.id] = trial
        self.experiments[experiment_id].trials.append(trial.id)
        return trial

    # -- HTTP ---------------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                stub._dispatch(self, "GET")

            def do_POST(self) -> None:
                stub._dispatch(self, "POST")

        return Handler

    def _dispatch(self, request: BaseHTTPRequestHandler, method: str) -> None:
        parsed = urllib.parse.urlparse(request.path)
        path = parsed.path
        query = urllib.parse.parse_qs(parsed.query)
        length = int(request.headers.get("Content-Length") or 0)
        body = json.loads(request.rfile.read(length) or b"{}") if length else {}
        with self.lock:
            self.log.append(StubRequest(method, path, query))
            failure = next(
                (i for i, (prefix, _) in enumerate(self._failures) if prefix is None or path.startswith(prefix)), None
            )
            status = self._failures.pop(failure)[1] if failure is not None else None
            if status is None:
                status = self._broken(path)
        if status is not None:
            return _send(request, status, _error(status, "service unavailable (stub)"))
        if method == "POST" and path == "/api/v1/auth/login":
            return self._login(request, body)
        token = (request.headers.get("Authorization") or "").removeprefix("Bearer ")
        if token not in self.valid_tokens:
            return _send(request, 401, _error(401, "invalid credentials"))
        with self.lock:
            return self._route(request, method, path, query, body)

    def _broken(self, path: str) -> int | None:
        for rule in self._breaks:
            prefix, after, left, status, rounds = rule
            if rounds <= 0 or not path.startswith(prefix):
                continue
            if left > 0:
                rule[2] -= 1
                return None
            rule[2], rule[4] = after, rounds - 1
            return int(status)
        return None

    def _login(self, request: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        from determined.common.api import salt_and_hash

        if body.get("username") != self.username or body.get("password") != salt_and_hash(self.password):
            return _send(request, 401, _error(401, "invalid credentials"))
        with self.lock:
            self.logins += 1
            token = f"token-{self.logins}"
            self.valid_tokens.add(token)
        user = {"id": 2, "username": self.username, "admin": False, "active": True}
        return _send(request, 200, {"token": token, "user": user})

    def _route(
        self, request: BaseHTTPRequestHandler, method: str, path: str, query: dict[str, list[str]], body: Any
    ) -> None:
        parts = path.strip("/").split("/")
        if method == "GET" and path == "/api/v1/me":
            return _send(request, 200, {"user": {"id": 2, "username": self.username, "admin": False, "active": True}})
        if method == "POST" and path == "/api/v1/experiments":
            return self._create(request, body)
        if parts[:3] == ["api", "v1", "experiments"] and len(parts) >= 4:
            found = self.experiments.get(int(parts[3]))
            if found is None:
                return _send(request, 404, _error(404, "experiment not found"))
            experiment = found
            if method == "GET" and len(parts) == 4:
                return _send(
                    request, 200, {"experiment": self._experiment(experiment), "config": {}, "jobSummary": None}
                )
            if method == "GET" and parts[4:] == ["trials"]:
                offset = int((query.get("offset") or ["0"])[0])
                trials = [self._trial(self.trials[i]) for i in experiment.trials][offset:]
                pagination = {
                    "offset": offset,
                    "limit": 0,
                    "startIndex": offset,
                    "endIndex": offset + len(trials),
                    "total": len(experiment.trials),
                }
                return _send(request, 200, {"trials": trials, "pagination": pagination})
            if method == "POST" and parts[4:] in (["kill"], ["cancel"]):
                if experiment.state not in ("STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR"):
                    experiment.state = "STATE_STOPPING_KILLED"
                for trial_id in experiment.trials:
                    if self.trials[trial_id].state not in FINAL_TRIAL_STATES:
                        self.trials[trial_id].state = "STATE_STOPPING_KILLED"
                return _send(request, 200, {})
        if parts[:3] == ["api", "v1", "trials"] and len(parts) == 5 and parts[4] == "workloads" and method == "GET":
            return self._workloads(request, int(parts[3]), query)
        if parts[:3] == ["api", "v1", "checkpoints"] and len(parts) >= 4:
            checkpoint = self.checkpoints.get(urllib.parse.unquote(parts[3]))
            if checkpoint is None:
                return _send(request, 404, _error(404, f"checkpoint not found: {parts[3]}"))
            if method == "GET" and len(parts) == 4:
                return _send(request, 200, {"checkpoint": self._checkpoint(checkpoint)})
            if method == "POST" and parts[4:] == ["metadata"]:
                posted = (body.get("checkpoint") or {}).get("metadata")
                if not isinstance(posted, dict):
                    return _send(request, 400, _error(400, "checkpoint.metadata must be an object"))
                checkpoint.posted.append(posted)
                checkpoint.metadata = posted
                return _send(request, 200, {"checkpoint": self._checkpoint(checkpoint)})
        return _send(request, 404, _error(404, f"stub has no {method} {path}"))

    def _create(self, request: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        try:
            config = yaml.safe_load(body["config"])
        except yaml.YAMLError as exc:
            return _send(
                request, 500, _error(500, f"invalid experiment configuration: unable to convert yaml to json: {exc}")
            )
        errors = config_errors(config) if isinstance(config, dict) else ["<config>: must be an object"]
        if errors:
            # The master returns parseCreateExperiment's error as is: gRPC Unknown, HTTP 500.
            return _send(request, 500, _error(500, master_message(errors)))
        refusal = self._capacity_refusal(config)
        if refusal:
            return _send(request, 500, _error(500, refusal))
        experiment = StubExperiment(
            id=self._new_id(),
            config=body["config"],
            model_files=[f["path"] for f in body.get("modelDefinition") or []],
        )
        self.experiments[experiment.id] = experiment
        searcher = config["searcher"]
        count = 1 if searcher["name"] == "single" else int(searcher["max_trials"])
        rng = random.Random(experiment.id)
        for _ in range(count):
            hparams = {name: _draw(spec, rng) for name, spec in (config.get("hyperparameters") or {}).items()}
            self._new_trial(experiment.id, hparams)
        return _send(request, 200, {"experiment": self._experiment(experiment), "config": config})

    def _capacity_refusal(self, config: dict[str, Any]) -> str:
        resources = config.get("resources") or {}
        slots = int(resources.get("slots_per_trial") or 1)
        if resources.get("is_single_node") and slots > max(self.agent_slots, default=0):
            return "validating resources: request unfulfillable, please try requesting less slots"
        if slots > sum(self.agent_slots):
            return "slots requested exceeds cluster capacity"
        return ""

    def _workloads(self, request: BaseHTTPRequestHandler, trial_id: int, query: dict[str, list[str]]) -> None:
        if trial_id not in self.trials:
            return _send(request, 404, _error(404, f"trial {trial_id} workloads not found"))
        arg = {name: values[0] for name, values in query.items()}
        if arg.get("sortKey", "batches") not in ("", "batches"):
            return _send(request, 400, _error(400, "the stub sorts workloads by batches only"))
        wanted = {
            "FILTER_OPTION_VALIDATION": {"validation"},
            "FILTER_OPTION_CHECKPOINT": set(),
            "FILTER_OPTION_CHECKPOINT_OR_VALIDATION": {"validation"},
        }.get(arg.get("filter", ""), {"training", "validation"})
        reports = [
            report
            for report in self.metrics
            if report["trialId"] == trial_id and not report["archived"] and report["group"] in wanted
        ]
        rows: list[tuple[int, int, dict[str, Any]]] = [
            (report["totalBatches"], report["id"], {report["group"]: _workload(report)}) for report in reports
        ]
        if arg.get("filter", "") in (
            "",
            "FILTER_OPTION_UNSPECIFIED",
            "FILTER_OPTION_CHECKPOINT",
            "FILTER_OPTION_CHECKPOINT_OR_VALIDATION",
        ):
            rows += [
                (checkpoint.batches, 0, {"checkpoint": _checkpoint_workload(checkpoint)})
                for checkpoint in self.checkpoints.values()
                if checkpoint.trial_id == trial_id
            ]
        rows.sort(key=lambda row: (row[0], row[1]))
        if arg.get("orderBy") == "ORDER_BY_DESC":
            rows.reverse()
        offset, limit = int(arg.get("offset", 0)), int(arg.get("limit", 0))
        chosen = rows[offset : offset + limit] if limit > 0 else rows[offset:]
        self.workloads_served += len(chosen)
        workloads = [row[2] for row in chosen]
        pagination = {
            "offset": offset,
            "limit": limit,
            "startIndex": offset,
            "endIndex": offset + len(chosen),
            "total": len(rows),
        }
        return _send(request, 200, {"workloads": workloads, "pagination": pagination})

    def _experiment(self, experiment: StubExperiment) -> dict[str, Any]:
        return {
            "archived": False,
            "config": {},
            "id": experiment.id,
            "jobId": f"job-{experiment.id}",
            "name": f"experiment-{experiment.id}",
            "numTrials": len(experiment.trials),
            "originalConfig": experiment.config,
            "projectId": 1,
            "projectOwnerId": 1,
            "searcherType": "random",
            "startTime": START,
            "state": experiment.state,
            "username": self.username,
        }

    def _checkpoint(self, checkpoint: StubCheckpoint) -> dict[str, Any]:
        # v1Checkpoint: the fields the SDK's parser requires, and the training metadata its
        # Checkpoint class asserts (experimentConfig and experimentId whenever trialId is set).
        return {
            "uuid": checkpoint.uuid,
            "metadata": checkpoint.metadata,
            "resources": {"state_dict.pth": 1024},
            "state": "STATE_COMPLETED",
            "reportTime": START,
            "taskId": f"{checkpoint.experiment_id}.{checkpoint.trial_id}",
            "allocationId": f"{checkpoint.experiment_id}.{checkpoint.trial_id}.1",
            "training": {
                "trialId": checkpoint.trial_id,
                "experimentId": checkpoint.experiment_id,
                "experimentConfig": {"name": f"experiment-{checkpoint.experiment_id}"},
                "hparams": {},
            },
        }

    def _trial(self, trial: StubTrial) -> dict[str, Any]:
        out: dict[str, Any] = {
            "experimentId": trial.experiment_id,
            "hparams": trial.hparams,
            "id": trial.id,
            "restarts": trial.restarts,
            "startTime": START,
            "state": trial.state,
            "totalBatchesProcessed": trial.batches,
        }
        validations = [
            report
            for report in self.metrics
            if report["trialId"] == trial.id and report["group"] == "validation" and not report["archived"]
        ]
        if validations:
            out["latestValidation"] = _workload(max(validations, key=lambda report: report["totalBatches"]))
        saved = [checkpoint for checkpoint in self.checkpoints.values() if checkpoint.trial_id == trial.id]
        if saved:
            # The master picks the best by the searcher metric; the stub takes the latest.
            out["bestCheckpoint"] = _checkpoint_workload(max(saved, key=lambda checkpoint: checkpoint.batches))
        return out


def _workload(report: dict[str, Any]) -> dict[str, Any]:
    """A v1MetricsWorkload: the report's metrics as ``avgMetrics``."""
    values = next(iter(report["metrics"].values()))
    return {
        "endTime": report["endTime"],
        "metrics": {"avgMetrics": values},
        "numInputs": 0,
        "totalBatches": report["totalBatches"],
    }


def _checkpoint_workload(checkpoint: StubCheckpoint) -> dict[str, Any]:
    """A v1CheckpointWorkload (bindings: ``state`` and ``totalBatches`` required)."""
    return {
        "uuid": checkpoint.uuid,
        "state": "STATE_COMPLETED",
        "totalBatches": checkpoint.batches,
        "endTime": START,
        "resources": {"state_dict.pth": "1024"},
        "metadata": checkpoint.metadata,
    }


def _draw(spec: Any, rng: random.Random) -> Any:
    if not isinstance(spec, dict):
        return spec
    kind = spec.get("type")
    if kind == "const":
        return spec["val"]
    if kind == "categorical":
        return rng.choice(spec["vals"])
    if kind == "int":
        return rng.randint(spec["minval"], spec["maxval"])
    if kind == "double":
        return rng.uniform(spec["minval"], spec["maxval"])
    if kind == "log":
        return float(spec["base"]) ** rng.uniform(spec["minval"], spec["maxval"])
    return {name: _draw(value, rng) for name, value in spec.items()}


def _error(status: int, message: str) -> dict[str, Any]:
    # grpc-gateway's error body as the SDK reads it (determined/common/api/errors.py APIException).
    code = {400: 3, 401: 16, 403: 7, 404: 5, 500: 2, 503: 14}.get(status, 2)
    return {"error": {"code": code, "reason": "Unknown" if code == 2 else "", "error": message}}


def _send(request: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
    data = json.dumps(payload).encode()
    request.send_response(status)
    request.send_header("Content-Type", "application/json")
    request.send_header("Content-Length", str(len(data)))
    request.end_headers()
    request.wfile.write(data)
