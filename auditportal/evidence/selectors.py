from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Model, QuerySet
from django.http import Http404

from auditportal.accounts.models import User
from auditportal.evidence import rules
from auditportal.evidence.models import VerdictDocument
from auditportal.fairness.documents.findings import document_attributes
from auditportal.fairness.figures.audit import references, verdict_document_forest_plot
from auditportal.fairness.figures.serialize import kept_figure_json

# The subjects (audits.PredictionAudit, experiments.Trial) are the apps' above this one: the functions
# that take one read only its primary key.


def verdict_document_list(*, user: User) -> QuerySet[VerdictDocument]:
    """The documents of subjects ``user`` may see (evidence.rules.can_read)."""
    if not rules.can_read(user):
        return VerdictDocument.objects.none()
    return VerdictDocument.objects.select_related(
        "prediction_audit", "trial__experiment", "paired_comparison", "policy", "frozen_by"
    ).order_by("-frozen_at", "-id")


def verdict_document_search(
    *,
    user: User,
    audit: int | None = None,
    audit_ids: Sequence[int] | None = None,
    trial: int | None = None,
    experiment: int | None = None,
    sha256: str | None = None,
    policy_version: int | None = None,
    kind: str | None = None,
) -> QuerySet[VerdictDocument]:
    """The documents of verdict_document_list that match every filter given (an id that names nothing
    matches nothing), newest first, without their content (``canonical`` is read on first use): what
    the API's list and the answers that name documents show of each."""
    # Neither the content nor the audit's row (its result is the size of the content) is read.
    documents = verdict_document_list(user=user).select_related(None).select_related("trial", "policy", "frozen_by")
    documents = documents.defer("canonical")
    if audit is not None:
        documents = documents.filter(prediction_audit_id=audit)
    if audit_ids is not None:
        documents = documents.filter(prediction_audit_id__in=audit_ids)
    if trial is not None:
        documents = documents.filter(trial_id=trial)
    if experiment is not None:
        documents = documents.filter(trial__experiment_id=experiment)
    if sha256 is not None:
        documents = documents.filter(sha256=sha256.lower())
    if policy_version is not None:
        documents = documents.filter(policy__version=policy_version)
    if kind is not None:
        documents = documents.filter(kind=kind)
    return documents


def verdict_documents_by_audit(*, user: User, audit_ids: Sequence[int]) -> dict[int, list[VerdictDocument]]:
    """Per prediction audit id, the documents of it that ``user`` may read, newest first (one query
    for a page of audits)."""
    found: dict[int, list[VerdictDocument]] = {pk: [] for pk in audit_ids}
    for document in verdict_document_search(user=user, audit_ids=list(audit_ids)):
        assert document.prediction_audit_id is not None
        found[document.prediction_audit_id].append(document)
    return found


def verdict_document_get(*, user: User, document_id: int) -> VerdictDocument:
    try:
        return verdict_document_list(user=user).get(pk=document_id)
    except VerdictDocument.DoesNotExist:
        raise Http404("No such verdict document.") from None


def verdict_documents_of_audit(*, audit: Model) -> QuerySet[VerdictDocument]:
    """The documents of a prediction audit, newest first; call with an audit the user may see
    (audits.selectors.prediction_audit_get)."""
    return (
        VerdictDocument.objects.filter(prediction_audit_id=audit.pk)
        .select_related("policy")
        .order_by("-frozen_at", "-id")
    )


def verdict_documents_of_trials(*, trials: Sequence[Model]) -> dict[int, list[VerdictDocument]]:
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


def verdict_document_ids_of_trials(*, trials: Sequence[Model]) -> dict[int, list[int]]:
    """Per trial id, the ids of its documents (ascending): what a live page compares to learn that a
    document was frozen, without reading any document."""
    found: dict[int, list[int]] = {trial.pk: [] for trial in trials}
    rows = VerdictDocument.objects.filter(trial__in=[trial.pk for trial in trials]).values_list("trial_id", "pk")
    for trial_id, document_id in rows.order_by("pk"):
        found[trial_id].append(document_id)
    return found


def verdict_document_of_audit(*, audit: Model) -> VerdictDocument:
    """The document frozen when ``audit`` was made (an audit is frozen exactly once)."""
    return verdict_documents_of_audit(audit=audit).earliest("frozen_at", "id")


def verdict_document_of_comparison(*, comparison: Model) -> VerdictDocument | None:
    """The document frozen when the paired ``comparison`` was made (None for a comparison stored before
    comparisons were frozen); call with a comparison the user may see (comparisons.selectors)."""
    return (
        VerdictDocument.objects.filter(paired_comparison_id=comparison.pk)
        .select_related("policy")
        .order_by("frozen_at", "id")
        .first()
    )


def verdict_document_references(*, document: VerdictDocument) -> list[str]:
    """Each judged attribute's reference group, as "gender = male": the forest plot's caption."""
    return references(document_attributes(document.document))


def verdict_document_forest(*, document: VerdictDocument) -> dict[str, Any] | None:
    """The forest plot of ``document`` as the JSON the page draws (None when nothing was compared). A
    frozen document never changes (its bytes are its SHA-256), so neither does its plot: the pages that
    draw one (the document's, every review request's) build it once per process (``kept_figure_json``,
    keyed by the SHA-256); each caller gets its own copy."""
    return kept_figure_json(verdict_document_forest_plot, document.document, kept_as=document.sha256)
