from __future__ import annotations

from django.db.models import Q, QuerySet
from django.http import Http404

from auditportal.accounts.models import User
from auditportal.audits.models import PredictionAudit
from auditportal.audits.selectors import prediction_audit_list
from auditportal.evidence.models import VerdictDocument
from auditportal.experiments.models import Trial
from auditportal.experiments.selectors import experiment_list


def verdict_document_list(*, user: User) -> QuerySet[VerdictDocument]:
    """The documents of subjects ``user`` may see: whoever may see an audit or an experiment may see
    its documents."""
    visible = Q(prediction_audit__in=prediction_audit_list(user=user).values("pk")) | Q(
        trial__experiment__in=experiment_list(user=user).values("pk")
    )
    return (
        VerdictDocument.objects.filter(visible)
        .select_related("prediction_audit", "trial__experiment", "policy", "frozen_by")
        .order_by("-frozen_at", "-id")
    )


def verdict_document_get(*, user: User, document_id: int) -> VerdictDocument:
    try:
        return verdict_document_list(user=user).get(pk=document_id)
    except VerdictDocument.DoesNotExist:
        raise Http404("No such verdict document.") from None


def verdict_documents_of_audit(*, audit: PredictionAudit) -> QuerySet[VerdictDocument]:
    """Call with an audit the user may see (prediction_audit_get)."""
    return audit.verdict_documents.select_related("policy").order_by("-frozen_at", "-id")


def verdict_documents_of_trials(*, trials: list[Trial]) -> dict[int, list[VerdictDocument]]:
    """Per trial id, its documents, newest first; call with trials of an experiment the user may see."""
    found: dict[int, list[VerdictDocument]] = {trial.pk: [] for trial in trials}
    for document in (
        VerdictDocument.objects.filter(trial__in=[trial.pk for trial in trials])
        .select_related("policy")
        .order_by("-frozen_at", "-id")
    ):
        assert document.trial_id is not None
        found[document.trial_id].append(document)
    return found


def verdict_document_of_audit(*, audit: PredictionAudit) -> VerdictDocument:
    """The document frozen when ``audit`` was made (an audit is frozen exactly once)."""
    return verdict_documents_of_audit(audit=audit).earliest("frozen_at", "id")
