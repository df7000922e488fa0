"""The experiments app's writes, one module per job; callers import them from here.

create     experiment_create, experiment_config_preview: check, store, queue the launch
launch     experiment_launch: claim, integrity check, shards, submission, heartbeat
poll       experiment_poll: apply the backend's snapshot, pass a cancel on, finish
search     the local ASHA search's rung entries and early stops (called by poll)
periodic   experiments_poll_active: the periodic task's work
cancel     experiment_cancel
queueing   the launch and stop tasks, queued through the outbox
metadata   checkpoint_metadata_set: a checkpoint's metadata (approvals)
documents  verdict_document_freeze_trial(_completed): a trial's validation frozen (evidence stores it)
"""

from __future__ import annotations

from auditportal.experiments.services.cancel import experiment_cancel
from auditportal.experiments.services.create import experiment_config_preview, experiment_create
from auditportal.experiments.services.documents import (
    NoValidation,
    verdict_document_freeze_trial,
    verdict_document_freeze_trial_completed,
)
from auditportal.experiments.services.launch import experiment_launch
from auditportal.experiments.services.metadata import CheckpointMetadataError, checkpoint_metadata_set
from auditportal.experiments.services.periodic import experiments_poll_active
from auditportal.experiments.services.poll import experiment_poll

__all__ = [
    "CheckpointMetadataError",
    "NoValidation",
    "checkpoint_metadata_set",
    "experiment_cancel",
    "experiment_config_preview",
    "experiment_create",
    "experiment_launch",
    "experiment_poll",
    "experiments_poll_active",
    "verdict_document_freeze_trial",
    "verdict_document_freeze_trial_completed",
]
