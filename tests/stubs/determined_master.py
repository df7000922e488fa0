"""A stub of the Determined master's REST API, for contract tests of the portal's Determined backend.

This is a stand-in, not a master: a Determined master cannot run on our machines (no Docker, no Go).
It serves the endpoints the SDK (determined==0.38.1) calls, listed in ../shared/DETERMINED.md, with
the fields the SDK's parsers require, on 127.0.0.1 and a random port. Faults are scriptable:

- ``fail_next(n, status=503)``: the next ``n`` requests answer ``status``.
- ``expire_tokens()``: every token issued so far answers 401 (forces a re-login).
- ``add_metrics(trial_id, group, step, metrics)``: the metrics snapshot grows between polls.
- ``add_checkpoint(uuid, trial_id)``: a completed checkpoint whose metadata the portal may read
  (GET /api/v1/checkpoints/{uuid}) and replace (POST /api/v1/checkpoints/{uuid}/metadata: the master
  stores the body's ``checkpoint.metadata`` whole, master/internal/api_checkpoint.go).
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

START = "2026-01-01T00:00:00Z"


@dataclass
class StubTrial:
    id: int
    experiment_id: int
    hparams: dict[str, Any]
    state: str = "STATE_ACTIVE"
    batches: int = 0


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
    # Every metadata body the portal posted, in order.
    posted: list[dict[str, Any]] = field(default_factory=list)


class DeterminedMasterStub:
    def __init__(self, *, username: str, password: str) -> None:
        self.username = username
        self.password = password
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []
        self.experiments: dict[int, StubExperiment] = {}
        self.trials: dict[int, StubTrial] = {}
        self.metrics: list[dict[str, Any]] = []
        self.checkpoints: dict[str, StubCheckpoint] = {}
        self.valid_tokens: set[str] = set()
        self.logins = 0
        self._failures: list[int] = []
        self._next_id = 100
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> DeterminedMasterStub:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- scripting ---------------------------------------------------------------------------

    def fail_next(self, count: int, status: int = 503) -> None:
        with self.lock:
            self._failures.extend([status] * count)

    def expire_tokens(self) -> None:
        with self.lock:
            self.valid_tokens.clear()

    def add_trial(self, experiment_id: int, hparams: dict[str, Any]) -> StubTrial:
        with self.lock:
            trial = StubTrial(id=self._new_id(), experiment_id=experiment_id, hparams=hparams)
            self.trials[trial.id] = trial
            self.experiments[experiment_id].trials.append(trial.id)
            return trial

    def add_metrics(self, trial_id: int, group: str, step: int, metrics: dict[str, Any]) -> None:
        with self.lock:
            key = "validation_metrics" if group == "validation" else "avg_metrics"
            self.metrics.append(
                {
                    "archived": False,
                    "endTime": START,
                    "group": group,
                    "id": len(self.metrics) + 1,
                    "metrics": {key: metrics},
                    "totalBatches": step,
                    "trialId": trial_id,
                    "trialRunId": 1,
                }
            )
            self.trials[trial_id].batches = max(self.trials[trial_id].batches, step)

    def add_checkpoint(self, uuid: str, trial_id: int, experiment_id: int = 1) -> StubCheckpoint:
        with self.lock:
            checkpoint = StubCheckpoint(uuid=uuid, trial_id=trial_id, experiment_id=experiment_id)
            self.checkpoints[uuid] = checkpoint
            return checkpoint

    def count(self, method: str, prefix: str) -> int:
        return sum(1 for m, p in self.requests if m == method and p.startswith(prefix))

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

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
            self.requests.append((method, path))
            failure = self._failures.pop(0) if self._failures else None
        if failure is not None:
            return _send(request, failure, {"error": {"error": "service unavailable (stub)"}})
        if method == "POST" and path == "/api/v1/auth/login":
            return self._login(request, body)
        token = (request.headers.get("Authorization") or "").removeprefix("Bearer ")
        if token not in self.valid_tokens:
            return _send(request, 401, {"error": {"error": "invalid credentials"}})
        with self.lock:
            return self._route(request, method, path, query, body)

    def _login(self, request: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        from determined.common.api import salt_and_hash

        if body.get("username") != self.username or body.get("password") != salt_and_hash(self.password):
            return _send(request, 401, {"error": {"error": "invalid credentials"}})
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
            experiment = StubExperiment(
                id=self._new_id(),
                config=body["config"],
                model_files=[f["path"] for f in body.get("modelDefinition") or []],
            )
            self.experiments[experiment.id] = experiment
            return _send(request, 200, {"experiment": self._experiment(experiment), "config": {}})
        if parts[:3] == ["api", "v1", "experiments"] and len(parts) >= 4:
            found = self.experiments.get(int(parts[3]))
            if found is None:
                return _send(request, 404, {"error": {"error": "experiment not found"}})
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
                experiment.state = "STATE_CANCELED"
                for trial_id in experiment.trials:
                    self.trials[trial_id].state = "STATE_CANCELED"
                return _send(request, 200, {})
        if parts[:3] == ["api", "v1", "checkpoints"] and len(parts) >= 4:
            checkpoint = self.checkpoints.get(urllib.parse.unquote(parts[3]))
            if checkpoint is None:
                return _send(request, 404, {"error": {"error": f"checkpoint not found: {parts[3]}"}})
            if method == "GET" and len(parts) == 4:
                return _send(request, 200, {"checkpoint": self._checkpoint(checkpoint)})
            if method == "POST" and parts[4:] == ["metadata"]:
                posted = (body.get("checkpoint") or {}).get("metadata")
                if not isinstance(posted, dict):
                    return _send(request, 400, {"error": {"error": "checkpoint.metadata must be an object"}})
                checkpoint.posted.append(posted)
                checkpoint.metadata = posted
                return _send(request, 200, {"checkpoint": self._checkpoint(checkpoint)})
        if method == "GET" and path == "/api/v1/trials/metrics/trial_metrics":
            trial_ids = {int(t) for t in query.get("trialIds", [])}
            group = (query.get("group") or [""])[0]
            chosen = [m for m in self.metrics if m["trialId"] in trial_ids and m["group"] == group]
            request.send_response(200)
            request.send_header("Content-Type", "application/json")
            request.end_headers()
            # A snapshot, streamed as NDJSON pages, then closed.
            for start in range(0, len(chosen), 2):
                line = json.dumps({"result": {"metrics": chosen[start : start + 2]}}) + "\n"
                request.wfile.write(line.encode())
            return None
        return _send(request, 404, {"error": {"error": f"stub has no {method} {path}"}})

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
        return {
            "experimentId": trial.experiment_id,
            "hparams": trial.hparams,
            "id": trial.id,
            "restarts": 0,
            "startTime": START,
            "state": trial.state,
            "totalBatchesProcessed": trial.batches,
        }


def _send(request: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
    data = json.dumps(payload).encode()
    request.send_response(status)
    request.send_header("Content-Type", "application/json")
    request.send_header("Content-Length", str(len(data)))
    request.end_headers()
    request.wfile.write(data)
