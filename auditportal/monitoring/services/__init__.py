"""Deployments and their monitor policies (docs/monitoring.md), one module per job:

- ``deployments``: a deployment created, a model promoted into it, rolled back (or suspended), and
  reconciled with the gate;
- ``policy``: a deployment's monitor policy versions, and the proposals that loosen it;
- ``breach``: a confirmed breach: the model suspended, deployments rolled back, an incident opened;
- ``webhooks``: endpoints registered and deactivated, deliveries queued, signed and logged;
- ``batches``: production batches received, counted and judged (looks), and their late labels;
- ``common``: the errors users get, checked text, and the deployment's row lock (and the lock order).

Every write is one transaction with its activity event. Callers import this package
(``services.deployment_promote``); the names below are its public ones.
"""

from __future__ import annotations

from auditportal.monitoring.services.batches import (
    BatchConflict,
    BatchError,
    LookOutcome,
    Received,
    batch_count,
    batch_receive_counts,
    batch_receive_file,
    labels_count,
    labels_receive,
    look_judge,
    look_write,
    monitor_policy_of,
)
from auditportal.monitoring.services.breach import breach_confirm, incident_open
from auditportal.monitoring.services.common import (
    DeploymentError,
    MonitorPolicyError,
    deployment_lock,
)
from auditportal.monitoring.services.deployments import (
    approval_refusal,
    deployment_create,
    deployment_promote,
    deployment_rollback,
    deployments_reconcile,
)
from auditportal.monitoring.services.policy import (
    monitor_policy_create,
    monitor_policy_proposal_confirm,
    monitor_policy_proposal_withdraw,
)
from auditportal.monitoring.services.webhooks import (
    WebhookError,
    webhook_deactivate,
    webhook_register,
)

__all__ = [
    "BatchConflict",
    "BatchError",
    "DeploymentError",
    "LookOutcome",
    "MonitorPolicyError",
    "Received",
    "WebhookError",
    "approval_refusal",
    "batch_count",
    "batch_receive_counts",
    "batch_receive_file",
    "breach_confirm",
    "deployment_create",
    "deployment_lock",
    "deployment_promote",
    "deployment_rollback",
    "deployments_reconcile",
    "incident_open",
    "labels_count",
    "labels_receive",
    "look_judge",
    "look_write",
    "monitor_policy_create",
    "monitor_policy_of",
    "monitor_policy_proposal_confirm",
    "monitor_policy_proposal_withdraw",
    "webhook_deactivate",
    "webhook_register",
]
