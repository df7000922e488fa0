from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from auditportal.accounts.models import User
from auditportal.audits import rules
from auditportal.audits.models import PredictionAudit, QueuedPredictionAudit


def prediction_audit_list(*, user: User) -> QuerySet[PredictionAudit]:
    # Every member may read every audit; an account without a role sees none.
    if not rules.can_read(user):
        return PredictionAudit.objects.none()
    return PredictionAudit.objects.select_related("created_by", "retired_by", "policy").order_by("-created_at", "-id")


def prediction_audit_get(*, user: User, audit_id: int) -> PredictionAudit:
    try:
        return prediction_audit_list(user=user).get(pk=audit_id)
    except PredictionAudit.DoesNotExist:
        raise Http404("No such audit.") from None


def queued_prediction_audit_get(*, user: User, queued_id: str) -> QueuedPredictionAudit:
    """A queued audit, for the account that queued it only (it holds that account's file until the
    audit is made); 404 for everyone else."""
    try:
        return QueuedPredictionAudit.objects.select_related("audit").get(pk=queued_id, owner_id=user.pk)
    except (QueuedPredictionAudit.DoesNotExist, ValueError):
        raise Http404("No such queued audit.") from None
