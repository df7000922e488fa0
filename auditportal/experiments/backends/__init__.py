"""The training-backend interface: ``submit``, ``poll``, ``cancel``.

``local`` runs trainer/ in Determined's local training mode, one subprocess per trial
(backends/local.py); ``determined`` talks to a Determined master through the SDK
(backends/determined.py, the only module that does). Backends return plain snapshots; the
services write them to the database.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from django.conf import settings

from auditportal.fairness.files.metricsfile import MetricRecord

if TYPE_CHECKING:
    from auditportal.experiments.models import Experiment


class BackendError(Exception):
    """The backend refused or failed; ``reason`` is shown to users ("master unreachable: ...")."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BackendUnavailable(BackendError):
    """Transient: the master could not be reached (connection errors, 502-504, a broken stream or
    timeouts), even after retries."""


class BackendAuthError(BackendError):
    pass


@dataclass(frozen=True)
class TrialPlan:
    number: int
    hparams: dict[str, Any]
    steps_planned: int
    # The local ASHA search's bracket of the trial (asha.py); None elsewhere.
    asha_bracket: int | None = None


@dataclass(frozen=True)
class Submission:
    det_experiment_id: int | None
    trials: list[TrialPlan]


@dataclass
class TrialSnapshot:
    """What the backend knows of one trial now. ``None`` fields are left as they are."""

    number: int | None = None  # local: the Trial.number
    det_trial_id: int | None = None  # determined: the master's trial id
    state: str | None = None
    hparams: dict[str, Any] | None = None
    steps_done: int | None = None
    steps_planned: int | None = None
    checkpoint: str | None = None
    error: str | None = None
    log_tail: str | None = None
    records: Iterable[MetricRecord] = field(default_factory=list)
    # Determined: the highest training step read from the master so far, stored once ``records``
    # are ingested (the next poll reads only what lies above it).
    metrics_cursor: int | None = None
    # Determined: the trial went back to a checkpoint at this step (a resume); what was recorded
    # after it is dropped, as the master archives it, and recorded again by the new run.
    rewind_to: int | None = None
    # When a trial that ended did (local: when its last process was gone); None: now.
    ended_at: datetime | None = None


@dataclass
class ExperimentSnapshot:
    trials: list[TrialSnapshot]
    # The backend's word that no trial will start or report any more.
    finished: bool = False
    error: str = ""


class TrainingBackend(Protocol):
    name: str

    def submit(self, experiment: Experiment, *, shard_dir: Path) -> Submission: ...

    def poll(self, experiment: Experiment) -> ExperimentSnapshot: ...

    def cancel(self, experiment: Experiment) -> None: ...

    def checkpoint_metadata_set(self, checkpoint: str, *, key: str, value: dict[str, Any]) -> None: ...


def backend_for(name: str | None = None) -> TrainingBackend:
    chosen = name or settings.EXPERIMENT_BACKEND
    if chosen == "local":
        from auditportal.experiments.backends.local import LocalBackend

        return LocalBackend()
    if chosen == "determined":
        from auditportal.experiments.backends.determined import DeterminedBackend

        return DeterminedBackend.from_settings()
    raise BackendError(f"unknown experiment backend {chosen!r}")
