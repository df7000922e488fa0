"""Writing a checkpoint's metadata (approvals record an approval, and its revocation, on the model)."""

from __future__ import annotations

from typing import Any

from auditportal.experiments.backends import BackendError, BackendUnavailable, backend_for
from auditportal.experiments.models import Experiment


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
