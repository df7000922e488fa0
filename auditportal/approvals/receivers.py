"""What the approvals app does when something below it changes (connected in apps.ApprovalsConfig.ready).
Each receiver runs inside the sender's transaction and calls one service: a failure undoes the change
that sent it. The lower apps define the signals (they must not import approvals)."""

from __future__ import annotations

from typing import Any

from auditportal.accounts.models import Role, User
from auditportal.approvals import services
from auditportal.audits.models import PredictionAudit
from auditportal.datasets.models import DatasetVersion


def on_role_changed(sender: Any, *, user: User, role: Role, change: str, by: User | None, **kwargs: Any) -> None:
    services.review_round_pause(user=user, role=role, change=change, by=by)


def on_prediction_audit_retired(
    sender: Any, *, audit: PredictionAudit, by: User | None, reason: str, **kwargs: Any
) -> None:
    services.approvals_suspend_for_audit(audit=audit, by=by, reason=reason)


def on_dataset_version_retired(
    sender: Any, *, version: DatasetVersion, by: User | None, reason: str, **kwargs: Any
) -> None:
    services.approvals_suspend_for_dataset_version(version=version, by=by, reason=reason)
