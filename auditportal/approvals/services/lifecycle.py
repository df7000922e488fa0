"""A review request through its states: made, revised, submitted, taken into review, sent back for
changes, withdrawn, recommended on, commented on, revoked (docs/approvals.md). The committee's votes
decide it (votes.py, decision.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.approvals.models import OPEN_STATES, Comment, Recommendation, RequestState, ReviewRequest, SubjectKind
from auditportal.approvals.rules import check, check_create
from auditportal.approvals.services.common import (
    MAIL_DECIDED_TASK,
    MAIL_SUBMITTED_TASK,
    ApprovalError,
    _choice,
    _document_hashes,
    _locked,
    _move,
    _required,
)
from auditportal.approvals.services.decision import _after_decision
from auditportal.audits.models import PredictionAudit
from auditportal.comparisons.models import PairedComparison
from auditportal.evidence.models import VerdictDocument
from auditportal.experiments.models import Trial
from auditportal.lib.lengths import fit_column
from auditportal.outbox.services import task_enqueue
from auditportal.policies.models import FairnessPolicy


def review_request_create(
    *,
    user: User,
    title: str,
    intended_use: str,
    documents: Sequence[VerdictDocument],
    model_identifier: str = "",
) -> ReviewRequest:
    """A draft request to approve the subject of ``documents`` (one prediction audit, one trial with
    its checkpoint, or one paired comparison), bound to them and to the policy version they were judged
    under.

    ML engineers and reviewers make requests. ``model_identifier`` is what pipelines ask the gate
    about; for a trial it defaults to its checkpoint (the UUID on Determined, the folder's name
    locally); for a paired comparison to the challenger's column: the request says "challenger B
    replaces champion A", and the model approved is B. One model has at most one request that is open
    or approved.
    """
    check_create(user)
    title, intended_use = _required(title, "title"), _required(intended_use, "intended_use")
    fit_column(ReviewRequest, "title", title)
    subject, policy = _subject_of(documents)
    checkpoint = ""
    if isinstance(subject, Trial):
        checkpoint = subject.checkpoint
        if not checkpoint:
            raise ApprovalError(
                f"Trial {subject.number} of experiment {subject.experiment_id} has no checkpoint yet: "
                "a trial is approved with its checkpoint.",
                field="documents",
            )
        model_identifier = model_identifier.strip() or checkpoint.rstrip("/").rsplit("/", 1)[-1]
    elif isinstance(subject, PairedComparison):
        model_identifier = model_identifier.strip() or subject.challenger
    elif subject.is_retired:
        raise ApprovalError(
            f"Prediction audit #{subject.pk} was retired ({subject.retired_reason}); it cannot be approved.",
            field="documents",
        )
    model_identifier = _required(model_identifier, "model_identifier")
    fit_column(ReviewRequest, "model_identifier", model_identifier)
    try:
        with transaction.atomic():
            if ReviewRequest.objects.filter(model_identifier=model_identifier, state__in=_open_states()).exists():
                raise _model_taken(model_identifier)
            request = ReviewRequest.objects.create(
                title=title,
                intended_use=intended_use,
                model_identifier=model_identifier,
                subject_kind=_subject_kind(subject),
                trial=subject if isinstance(subject, Trial) else None,
                prediction_audit=subject if isinstance(subject, PredictionAudit) else None,
                paired_comparison=subject if isinstance(subject, PairedComparison) else None,
                checkpoint=checkpoint,
                policy=policy,
                requested_by=user,
            )
            request.documents.set(documents)
            event_record(
                actor=user,
                verb=Verb.REVIEW_REQUEST_CREATED,
                target=request,
                data={
                    "title": title,
                    "model_identifier": model_identifier,
                    "subject": request.subject_label,
                    "checkpoint": checkpoint or None,
                    "claim": request.claim or None,
                    "documents": _document_hashes(documents),
                    "policy": policy.version,
                },
            )
    except IntegrityError:
        if ReviewRequest.objects.filter(model_identifier=model_identifier, state__in=_open_states()).exists():
            raise _model_taken(model_identifier) from None
        raise
    return request


def review_request_revise(
    *,
    user: User,
    request: ReviewRequest,
    title: str | None = None,
    intended_use: str | None = None,
    documents: Sequence[VerdictDocument] | None = None,
) -> ReviewRequest:
    """The requester changes a draft: its title, intended use, or documents (of the same subject)."""
    with transaction.atomic():
        request = _locked(request)
        check(user, request, "revise")
        changes: dict[str, Any] = {}
        if title is not None and title.strip() != request.title:
            changes["title"] = [request.title, fit_column(ReviewRequest, "title", _required(title, "title"))]
            request.title = title.strip()
        if intended_use is not None and intended_use.strip() != request.intended_use:
            changes["intended_use"] = [request.intended_use, _required(intended_use, "intended_use")]
            request.intended_use = intended_use.strip()
        if documents is not None:
            subject, policy = _subject_of(documents)
            if subject != (request.trial or request.prediction_audit or request.paired_comparison):
                raise ApprovalError(
                    f"The documents must judge {request.subject_label}, the subject of review request #{request.pk}.",
                    field="documents",
                )
            before, after = _document_hashes(request.documents.all()), _document_hashes(documents)
            if before != after:
                changes["documents"] = [before, after]
                changes["policy"] = [request.policy.version, policy.version]
                request.policy = policy
                request.documents.set(documents)
        if not changes:
            raise ApprovalError("Nothing changed.")
        request.save(update_fields=["title", "intended_use", "policy"])
        event_record(actor=user, verb=Verb.REVIEW_REQUEST_REVISED, target=request, data={"changes": changes})
    return request


def review_request_submit(*, user: User, request: ReviewRequest) -> ReviewRequest:
    """Draft -> submitted (the requester); starts a new round and tells the committee."""
    with transaction.atomic():
        request = _locked(request)
        check(user, request, "submit")
        request.round += 1
        _move(request, user, RequestState.SUBMITTED, Verb.REVIEW_REQUEST_SUBMITTED, {"round": request.round})
        task_enqueue(name=MAIL_SUBMITTED_TASK, args=[request.pk])
    return request


def review_request_start_review(*, user: User, request: ReviewRequest) -> ReviewRequest:
    """Submitted -> in review (a reviewer or a committee member other than the requester)."""
    with transaction.atomic():
        request = _locked(request)
        check(user, request, "start_review")
        _move(request, user, RequestState.IN_REVIEW, Verb.REVIEW_REQUEST_REVIEW_STARTED, {"round": request.round})
    return request


def review_request_request_changes(*, user: User, request: ReviewRequest, reason: str) -> ReviewRequest:
    """Submitted or in review -> draft (a reviewer), with what to change; the round's votes stop counting."""
    reason = _required(reason, "reason")
    with transaction.atomic():
        request = _locked(request)
        check(user, request, "request_changes")
        _move(
            request,
            user,
            RequestState.DRAFT,
            Verb.REVIEW_REQUEST_CHANGES_REQUESTED,
            {"round": request.round, "reason": reason},
        )
        task_enqueue(name=MAIL_DECIDED_TASK, args=[request.pk, Verb.REVIEW_REQUEST_CHANGES_REQUESTED.value])
    return request


def review_request_withdraw(*, user: User, request: ReviewRequest, reason: str = "") -> ReviewRequest:
    """Draft, submitted or in review -> withdrawn (the requester). Final."""
    with transaction.atomic():
        request = _locked(request)
        check(user, request, "withdraw")
        _move(request, user, RequestState.WITHDRAWN, Verb.REVIEW_REQUEST_WITHDRAWN, {"reason": reason.strip()})
    return request


def review_request_recommend(*, user: User, request: ReviewRequest, choice: str, reason: str) -> Recommendation:
    """A reviewer's recommendation to the committee (approve or reject, with why); a later one replaces
    theirs as current."""
    choice, reason = _choice(choice), _required(reason, "reason")
    with transaction.atomic():
        request = _locked(request)
        check(user, request, "recommend")
        recommendation = Recommendation.objects.create(
            request=request, round=request.round, reviewer=user, choice=choice, reason=reason
        )
        event_record(
            actor=user,
            verb=Verb.REVIEW_REQUEST_RECOMMENDED,
            target=request,
            data={"recommendation": recommendation.pk, "round": request.round, "choice": choice, "reason": reason},
        )
    return recommendation


def review_request_revoke(*, user: User, request: ReviewRequest, reason: str) -> ReviewRequest:
    """Approved -> revoked (a committee member or an administrator), with why. The gate answers
    ``approved: false`` from then on and the checkpoint's metadata is updated."""
    reason = _required(reason, "reason")
    with transaction.atomic():
        request = _locked(request)
        check(user, request, "revoke")
        request.revoked_at = timezone.now()
        request.revoked_reason = reason
        _move(request, user, RequestState.REVOKED, Verb.REVIEW_REQUEST_REVOKED, {"reason": reason})
        _after_decision(request, Verb.REVIEW_REQUEST_REVOKED, revoked_by=user)
    return request


def review_comment_add(*, user: User, request: ReviewRequest, body: str, parent: Comment | None = None) -> Comment:
    """A comment, or a reply to ``parent`` (a comment on the same request)."""
    body = _required(body, "body")
    with transaction.atomic():
        request = _locked(request)
        check(user, request, "comment")
        if parent is not None and parent.request_id != request.pk:
            raise ApprovalError(f"Comment #{parent.pk} belongs to another request.", field="parent")
        comment = Comment.objects.create(request=request, parent=parent, author=user, body=body, round=request.round)
        event_record(
            actor=user,
            verb=Verb.REVIEW_COMMENT_ADDED,
            target=request,
            data={"comment": comment.pk, "parent": parent.pk if parent else None, "round": request.round},
        )
    return comment


Subject = PredictionAudit | Trial | PairedComparison


def _subject_kind(subject: Subject) -> SubjectKind:
    if isinstance(subject, Trial):
        return SubjectKind.TRIAL
    if isinstance(subject, PairedComparison):
        return SubjectKind.PAIRED_COMPARISON
    return SubjectKind.PREDICTION_AUDIT


def _subject_of(documents: Sequence[VerdictDocument]) -> tuple[Subject, FairnessPolicy]:
    if not documents:
        raise ApprovalError("Choose at least one frozen verdict document.", field="documents")
    subjects = {(d.prediction_audit_id, d.trial_id, d.paired_comparison_id) for d in documents}
    if len(subjects) != 1:
        raise ApprovalError(
            "All documents of a review request must judge one subject: one prediction audit, one trial, or "
            "one paired comparison.",
            field="documents",
        )
    policies = {d.policy_id for d in documents}
    if len(policies) != 1:
        versions = sorted({d.policy.version for d in documents})
        raise ApprovalError(
            f"The documents were judged under policy versions {', '.join(map(str, versions))}: a request binds "
            "one version. Choose documents frozen under the same version.",
            field="documents",
        )
    first = documents[0]
    subject: Subject | None = first.prediction_audit or first.trial or first.paired_comparison
    assert subject is not None
    return subject, first.policy


def _open_states() -> list[str]:
    return [state.value for state in OPEN_STATES]


def _model_taken(model_identifier: str) -> ApprovalError:
    taken = ReviewRequest.objects.filter(model_identifier=model_identifier, state__in=_open_states()).first()
    assert taken is not None
    return ApprovalError(
        f"Model {model_identifier!r} already has review request #{taken.pk} ({taken.get_state_display().lower()}); "
        "withdraw it, or wait for its decision, before requesting another.",
        field="model_identifier",
    )
