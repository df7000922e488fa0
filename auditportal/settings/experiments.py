"""Experiment settings: training backend, Determined credentials, Celery beat schedule.

Imported at the end of ``base.py``; plain module-level names, parsed strictly from the environment
(see the configuration table in README.md).
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from auditportal.lib.env import EnvError, env_float, env_int, env_optional, env_str

_BASE_DIR = Path(__file__).resolve().parent.parent.parent
_VAR_DIR = Path(env_str("PORTAL_VAR_DIR", str(_BASE_DIR / "var"))).resolve()

# Determined master (cluster mode). Setting DET_MASTER switches the default backend to "determined".
DET_MASTER = env_optional("DET_MASTER")
DET_USER = env_str("DET_USER", "determined")
DET_PASSWORD = env_optional("DET_PASSWORD") or ""
DET_PROJECT_ID = env_int("DET_PROJECT_ID", 1, minimum=1)
DET_REQUEST_TIMEOUT = env_int("DET_REQUEST_TIMEOUT", 15, minimum=1)
DET_RETRY_ATTEMPTS = env_int("DET_RETRY_ATTEMPTS", 4, minimum=1)
DET_RETRY_BACKOFF_MS = env_int("DET_RETRY_BACKOFF_MS", 1000, minimum=0)
# The image trial containers run in: Determined's PyTorch image plus the trainer's own dependencies
# (trainer/Dockerfile; pyarrow is not in Determined's default image).
DET_TRAINER_IMAGE = env_str("DET_TRAINER_IMAGE", "auditportal/trainer:0.38.1")
# The shard directory as the agent hosts see it, when it is not SHARD_DIR itself (the portal in a
# container, the shards on a host directory or shared filesystem mounted at the same path on every
# agent host): docs/determined-cluster.md.
SHARD_HOST_DIR = env_optional("SHARD_HOST_DIR")
if SHARD_HOST_DIR is not None and not SHARD_HOST_DIR.startswith("/"):
    raise EnvError(f"SHARD_HOST_DIR={SHARD_HOST_DIR!r} must be an absolute path on the agent hosts")

# The cluster's checkpoint storage (shared_fs) as the portal's processes see it, read-only: a cluster
# trial's checkpoint is the folder named by its UUID under here. Set, the portal runs a cluster trial's
# checkpoint as a local one's (comparisons, attributions); unset, it refuses them, saying so
# (docker-compose.yml mounts /srv/auditportal/checkpoints at /shared/checkpoints; docs/determined-cluster.md).
DET_CHECKPOINT_DIR = env_optional("DET_CHECKPOINT_DIR")
if DET_CHECKPOINT_DIR is not None and not DET_CHECKPOINT_DIR.startswith("/"):
    raise EnvError(f"DET_CHECKPOINT_DIR={DET_CHECKPOINT_DIR!r} must be an absolute path (the checkpoint storage)")

EXPERIMENT_BACKENDS = ("local", "determined")
EXPERIMENT_BACKEND = env_str("EXPERIMENT_BACKEND", "determined" if DET_MASTER else "local")
if EXPERIMENT_BACKEND not in EXPERIMENT_BACKENDS:
    raise EnvError(f"EXPERIMENT_BACKEND={EXPERIMENT_BACKEND!r} is not one of: {', '.join(EXPERIMENT_BACKENDS)}")
if EXPERIMENT_BACKEND == "determined" and not DET_MASTER:
    raise EnvError("EXPERIMENT_BACKEND=determined needs DET_MASTER (e.g. http://master:8080)")

# Local backend: one trainer subprocess per trial, run from a small working folder under here.
EXPERIMENT_RUN_DIR = Path(env_str("EXPERIMENT_RUN_DIR", str(_VAR_DIR / "experiments"))).resolve()
# Trainer processes (slots) the local backend runs at once, over every experiment: by default one per
# core (each trainer runs on one thread). A search's own max_concurrent_trials defaults to this divided
# by its slots_per_trial (configs.default_max_concurrent_trials).
EXPERIMENT_LOCAL_CONCURRENCY = env_int("EXPERIMENT_LOCAL_CONCURRENCY", os.cpu_count() or 1, minimum=1)
# How often a trial's runner (backends/runner.py) looks for its stop request (a cancel, an early stop):
# the longest a trainer goes on once a worker asked it to stop.
EXPERIMENT_RUNNER_CHECK_SECONDS = env_float("EXPERIMENT_RUNNER_CHECK_SECONDS", 0.5, minimum=0.01, maximum=60)
EXPERIMENT_TRAINER_PYTHON = env_str("EXPERIMENT_TRAINER_PYTHON", sys.executable)
EXPERIMENT_TRAINER_MODULE = env_str("EXPERIMENT_TRAINER_MODULE", "trainer.train")
EXPERIMENT_MODEL_DIR = Path(env_str("EXPERIMENT_MODEL_DIR", str(_BASE_DIR / "trainer"))).resolve()

EXPERIMENT_MAX_TRIALS = env_int("EXPERIMENT_MAX_TRIALS", 32, minimum=1)
EXPERIMENT_MAX_BATCHES = env_int("EXPERIMENT_MAX_BATCHES", 100_000, minimum=1)
EXPERIMENT_LOG_TAIL_LINES = env_int("EXPERIMENT_LOG_TAIL_LINES", 40, minimum=1)
EXPERIMENT_INGEST_BATCH_SIZE = env_int("EXPERIMENT_INGEST_BATCH_SIZE", 20000, minimum=1)

# The periodic poll: how often, and how long one poller holds an experiment before another may take
# it over (a killed worker's claim expires after this).
EXPERIMENT_POLL_SECONDS = env_int("EXPERIMENT_POLL_SECONDS", 2, minimum=1)
EXPERIMENT_POLL_LEASE_SECONDS = env_int("EXPERIMENT_POLL_LEASE_SECONDS", 30, minimum=1)
# Launches: a launching worker stamps a heartbeat this often; a launch without one for the stale
# time lost its worker and fails; a queued launch not claimed for the requeue time is queued again.
EXPERIMENT_LAUNCH_HEARTBEAT_SECONDS = env_int("EXPERIMENT_LAUNCH_HEARTBEAT_SECONDS", 10, minimum=1)
EXPERIMENT_LAUNCH_STALE_SECONDS = env_int("EXPERIMENT_LAUNCH_STALE_SECONDS", 120, minimum=2)
EXPERIMENT_LAUNCH_REQUEUE_SECONDS = env_int("EXPERIMENT_LAUNCH_REQUEUE_SECONDS", 600, minimum=1)
if EXPERIMENT_LAUNCH_STALE_SECONDS <= EXPERIMENT_LAUNCH_HEARTBEAT_SECONDS:
    raise EnvError(
        f"EXPERIMENT_LAUNCH_STALE_SECONDS={EXPERIMENT_LAUNCH_STALE_SECONDS} must be longer than "
        f"EXPERIMENT_LAUNCH_HEARTBEAT_SECONDS={EXPERIMENT_LAUNCH_HEARTBEAT_SECONDS}"
    )

CELERY_BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    "experiments-poll-active": {
        "task": "experiments.poll_active",
        "schedule": timedelta(seconds=EXPERIMENT_POLL_SECONDS),
        # A poll that could not run in time is superseded by the next one.
        "options": {"expires": max(EXPERIMENT_POLL_SECONDS * 2, 5)},
    },
}
