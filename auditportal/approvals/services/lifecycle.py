"""Review requests through their states, the committee's signed votes, waivers and comments
(docs/approvals.md).

Every write is one transaction with its activity event. A request's events all target the request, so
its timeline is one query. Notifications go out and the checkpoint is tagged only once the transaction
has committed (``transaction.on_commit``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final

from django.db import IntegrityError, transaction
from django.utils import timezone

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.activity.services import event_record
from auditportal.approvals import notifications, rules
from auditportal.approvals.context import review_request_context
from auditportal.approvals.models import (
    OPEN_STATES,
    Acknowledgement,
    Comment,
    Recommendation,
    RequestState,
    ReviewRequest,
    ReviewVote,
    SubjectKind,
    VoteChoice,
    Waiver,
    WaiverState,
    WaiverVote,
)
from auditportal.approvals.rules import IllegalTransition, check, current_votes, decide, quorum, tally_votes
from auditportal.audits.models import PredictionAudit
from auditportal.celery import app
from auditportal.evidence.models import VerdictDocument
from auditportal.experiments import services as experiment_services
from auditportal.experiments.models import Trial
from auditportal.fairness.errors import UserError
from auditportal.fairness.findings import FAIL, INCONCLUSIVE, Finding, document_findings
from auditportal.fairness.report_context import ReportContext
from auditportal.lib.lengths import fit_column
from auditportal.lib.transactions import inside_atomic_block
from auditportal.policies.models import FairnessPolicy

logger = logging.getLogger(__name__)

# A wrong password at a vote is recorded; this many within the window lock the voter's votes until
# the oldest of them leaves the window (a guessed password must not sign a vote).
PASSWORD_FAILURES_ALLOWED: Final = 5
PASSWORD_FAILURE_WINDOW: Final = timedelta(minutes=15)

CHECKPOINT_METADATA_KEY: Final = "bias_audit"

# The registered name of reports.tasks.report_generate_task: the reports app sits above approvals, so
# the decision names the task that renders its report instead of importing it.
REPORT_GENERATE_TASK: Final = "reports.generate"


class ApprovalError(UserError):
    """Something about the request, vote or waiver the user must fix; ``field`` names it."""


class ReauthenticationFailed(UserError):
    """The password given with a vote is not the voter's."""


# -- review requests -----------------------------------------------------------------------------


def review_request_create(
    *,
    user: User,
    title: str,
    intended_use: str,
    documents: Sequence[VerdictDocument],
    model_identifier: str = "",
) -> ReviewRequest:
    """A draft request to approve the subject of ``documents`` (one prediction audit, or one trial with
    its checkpoint), bound to them and to the policy version they were judged under.

    ML engineers and reviewers make requests. ``model_identifier`` is what pipelines ask the gate
    about; for a trial it defaults to its checkpoint (the UUID on Determined, the folder's name
    locally). One model has at most one request that is open or approved.
    """
    rules.check_create(user)
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
                subject_kind=SubjectKind.TRIAL if isinstance(subject, Trial) else SubjectKind.PREDICTION_AUDIT,
                trial=subject if isinstance(subject, Trial) else None,
                prediction_audit=subject if isinstance(subject, PredictionAudit) else None,
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
            if subject != (request.trial or request.prediction_audit):
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
        pk = request.pk
        transaction.on_commit(lambda: notifications.request_submitted(request_id=pk))
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
        pk = request.pk
        transaction.on_commit(
            lambda: notifications.request_decided(request_id=pk, verb=Verb.REVIEW_REQUEST_CHANGES_REQUESTED)
        )
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


# -- votes ---------------------------------------------------------------------------------------


def review_vote_cast(
    *,
    user: User,
    request: ReviewRequest,
    choice: str,
    reason: str,
    password: str,
    document_sha256: Collection[str],
    acknowledged: Collection[str] = (),
) -> ReviewVote:
    """A committee member's signed vote (approve or reject, with a written reason) on a request in review.

    ``password`` must be the voter's own, checked now: a wrong one is refused and recorded
    (REVIEW_VOTE_REAUTH_FAILED, committed although the vote is refused; five within 15 minutes lock the
    voter's votes for the rest of that window). ``document_sha256`` are the documents the voter saw,
    and must be the request's. An approving vote needs every judged FAIL comparison covered by an
    approved, unexpired waiver, and must acknowledge (``acknowledged``: finding keys) every judged
    INCONCLUSIVE one. A member's later vote supersedes their earlier one until the request is decided;
    the vote that meets the rule decides it (docs/approvals.md).

    Must not run inside an open transaction (the failure record must commit).
    """
    choice, reason = _choice(choice), _required(reason, "reason")
    request = _fresh(request)
    check(user, request, "vote")
    _reauthenticate(user=user, password=password, request=request)
    with transaction.atomic():
        request = _locked(request)
        check(user, request, "vote")
        documents = list(request.documents.order_by("id"))
        hashes = _confirmed_hashes(request, documents, document_sha256)
        findings = _findings(documents)
        keys = {finding.key: finding for finding in findings}
        unknown = sorted(set(acknowledged) - set(keys))
        if unknown:
            raise ApprovalError(
                f"No comparison of review request #{request.pk} has the key {unknown[0]}.", field="acknowledged"
            )
        acknowledged_inconclusive = [keys[key] for key in acknowledged if keys[key].verdict == INCONCLUSIVE]
        if choice == VoteChoice.APPROVE:
            _check_approvable(request, findings, set(acknowledged))
        previous = _current_vote(request, user)
        vote = ReviewVote.objects.create(
            request=request,
            round=request.round,
            voter=user,
            choice=choice,
            reason=reason,
            document_sha256=hashes,
            supersedes=previous,
        )
        by_hash = {document.sha256: document for document in documents}
        Acknowledgement.objects.bulk_create(
            Acknowledgement(
                vote=vote,
                finding_key=finding.key,
                document=by_hash[finding.document_sha256],
                attribute=finding.attribute,
                metric=finding.metric,
                group=finding.group,
                positives_needed=finding.positives_needed,
                needed_reason=finding.needed_reason or "",
            )
            for finding in acknowledged_inconclusive
        )
        event_record(
            actor=user,
            verb=Verb.REVIEW_VOTE_CAST,
            target=request,
            data={
                "vote": vote.pk,
                "round": request.round,
                "choice": choice,
                "reason": reason,
                "document_sha256": hashes,
                "acknowledged": [
                    {"key": f.key, "comparison": f.label, "positives_needed": f.positives_needed}
                    for f in acknowledged_inconclusive
                ],
                "supersedes": previous.pk if previous else None,
            },
        )
        _decide(request, documents, findings)
    return vote


def waiver_propose(
    *,
    user: User,
    request: ReviewRequest,
    finding_key: str,
    reason: str,
    compensating_measures: str,
    expires_on: date,
) -> Waiver:
    """Propose a waiver of one judged FAIL comparison (``finding_key``) of a submitted or in-review
    request: why, the compensating measures, and the date it expires (at 00:00 UTC that day). The
    committee votes on it like on a request, with the same quorum."""
    reason = _required(reason, "reason")
    compensating_measures = _required(compensating_measures, "compensating_measures")
    expires_at = datetime.combine(expires_on, datetime.min.time(), tzinfo=UTC)
    if expires_at <= timezone.now():
        raise ApprovalError(
            f"The expiry date {expires_on.isoformat()} has passed; give a later one.", field="expires_on"
        )
    with transaction.atomic():
        request = _locked(request)
        check(user, request, "propose_waiver")
        documents = list(request.documents.order_by("id"))
        finding = next((f for f in _findings(documents) if f.key == finding_key), None)
        if finding is None or finding.verdict != FAIL:
            raise ApprovalError(
                f"Review request #{request.pk} has no FAIL comparison with the key {finding_key!r}: only a "
                "judged FAIL comparison can be waived.",
                field="finding_key",
            )
        live = request.waivers.filter(
            round=request.round, finding_key=finding_key, state__in=[WaiverState.PROPOSED, WaiverState.APPROVED]
        ).first()
        if live is not None:
            raise ApprovalError(
                f"Waiver #{live.pk} of {finding.label} is already {live.get_state_display().lower()}.",
                field="finding_key",
            )
        document = next(d for d in documents if d.sha256 == finding.document_sha256)
        waiver = Waiver.objects.create(
            request=request,
            round=request.round,
            finding_key=finding.key,
            document=document,
            attribute=finding.attribute,
            metric=finding.metric,
            group=finding.group,
            reference=finding.reference,
            reason=reason,
            compensating_measures=compensating_measures,
            expires_at=expires_at,
            proposed_by=user,
        )
        event_record(
            actor=user,
            verb=Verb.WAIVER_PROPOSED,
            target=request,
            data={
                "waiver": waiver.pk,
                "round": request.round,
                "comparison": finding.label,
                "document_sha256": finding.document_sha256,
                "reason": reason,
                "compensating_measures": compensating_measures,
                "expires_at": expires_at.isoformat(),
            },
        )
    return waiver


def waiver_vote_cast(
    *,
    user: User,
    waiver: Waiver,
    choice: str,
    reason: str,
    password: str,
    document_sha256: Collection[str],
) -> WaiverVote:
    """A committee member's signed vote on a proposed waiver; the same re-authentication, separation of
    duties, quorum and rule as a request's vote. Must not run inside an open transaction."""
    choice, reason = _choice(choice), _required(reason, "reason")
    request = _fresh(waiver.request)
    check(user, request, "vote_waiver")
    _reauthenticate(user=user, password=password, request=request)
    with transaction.atomic():
        request = _locked(request)
        check(user, request, "vote_waiver")
        waiver = Waiver.objects.select_for_update().get(pk=waiver.pk)
        if waiver.state != WaiverState.PROPOSED or waiver.round != request.round:
            state = "from an earlier round" if waiver.round != request.round else waiver.get_state_display().lower()
            raise IllegalTransition(f"Waiver #{waiver.pk} is {state}: only a proposed waiver can be voted on.")
        hashes = _confirmed_hashes(request, list(request.documents.order_by("id")), document_sha256)
        previous = waiver.votes.filter(voter=user).order_by("-cast_at", "-id").first()
        vote = WaiverVote.objects.create(
            waiver=waiver, voter=user, choice=choice, reason=reason, document_sha256=hashes, supersedes=previous
        )
        event_record(
            actor=user,
            verb=Verb.WAIVER_VOTE_CAST,
            target=request,
            data={
                "waiver": waiver.pk,
                "vote": vote.pk,
                "choice": choice,
                "reason": reason,
                "document_sha256": hashes,
                "supersedes": previous.pk if previous else None,
            },
        )
        approvals, rejections = tally_votes(list(waiver.votes.all()), request)
        outcome = decide(approvals=len(approvals), rejections=len(rejections), quorum=quorum(request))
        if outcome is not None:
            waiver.state = WaiverState.APPROVED if outcome == VoteChoice.APPROVE else WaiverState.REJECTED
            waiver.decided_at = timezone.now()
            waiver.save(update_fields=["state", "decided_at"])
            event_record(
                actor=user,
                verb=Verb.WAIVER_APPROVED if outcome == VoteChoice.APPROVE else Verb.WAIVER_REJECTED,
                target=request,
                data={
                    "waiver": waiver.pk,
                    "comparison": waiver.label,
                    "approve": sorted(approvals),
                    "reject": sorted(rejections),
                    "quorum": quorum(request),
                    "expires_at": waiver.expires_at.isoformat(),
                },
            )
    return vote


# -- the decision ---------------------------------------------------------------------------------


def _decide(request: ReviewRequest, documents: list[VerdictDocument], findings: list[Finding]) -> None:
    votes = list(request.votes.filter(round=request.round).select_related("voter"))
    approvals, rejections = tally_votes(votes, request)
    needed = quorum(request)
    outcome = decide(approvals=len(approvals), rejections=len(rejections), quorum=needed)
    if outcome is None:
        return
    if outcome == VoteChoice.APPROVE:
        # What the votes checked, checked again as the request is decided: waivers may have expired.
        try:
            _check_approvable(request, findings, acknowledged=None)
        except ApprovalError:
            return
    now = timezone.now()
    request.decided_at = now
    verb = Verb.REVIEW_REQUEST_APPROVED if outcome == VoteChoice.APPROVE else Verb.REVIEW_REQUEST_REJECTED
    waivers = _valid_waivers(request) if outcome == VoteChoice.APPROVE else []
    _move(
        request,
        None,
        RequestState.APPROVED if outcome == VoteChoice.APPROVE else RequestState.REJECTED,
        verb,
        {
            "round": request.round,
            "approve": sorted(approvals),
            "reject": sorted(rejections),
            "quorum": needed,
            "document_sha256": _document_hashes(documents),
            "policy": request.policy.version,
            "waivers": [waiver.pk for waiver in waivers],
            "expires": waivers[0].expires_at.isoformat() if waivers else None,
        },
        fields=["decided_at"],
    )
    _after_decision(request, verb)


def _check_approvable(request: ReviewRequest, findings: list[Finding], acknowledged: set[str] | None) -> None:
    waived = {waiver.finding_key for waiver in _valid_waivers(request)}
    for finding in findings:
        if finding.verdict == FAIL and finding.key not in waived:
            raise ApprovalError(
                f"{finding.label} is FAIL: review request #{request.pk} can be approved only once a waiver of "
                "it is approved (and while it has not expired).",
                field="choice",
            )
    inconclusive = [finding for finding in findings if finding.verdict == INCONCLUSIVE]
    if acknowledged is not None:
        missing = [finding for finding in inconclusive if finding.key not in acknowledged]
        if missing:
            first = missing[0]
            needed = (
                f"{first.positives_needed} label positives in the group would decide it"
                if first.positives_needed is not None
                else (first.needed_reason or "no sample size is given")
            )
            raise ApprovalError(
                f"{first.label} is INCONCLUSIVE ({needed}): acknowledge it to approve "
                f"({len(missing)} INCONCLUSIVE comparison{'s' if len(missing) != 1 else ''} not acknowledged).",
                field="acknowledged",
            )
        return
    # At the decision: every current approving vote acknowledged every INCONCLUSIVE comparison.
    keys = {finding.key for finding in inconclusive}
    for vote in current_votes(list(request.votes.filter(round=request.round))).values():
        if vote.choice == VoteChoice.APPROVE:
            assert isinstance(vote, ReviewVote)
            if not keys <= set(vote.acknowledgements.values_list("finding_key", flat=True)):
                raise ApprovalError("an approving vote did not acknowledge every INCONCLUSIVE comparison")


def _valid_waivers(request: ReviewRequest) -> list[Waiver]:
    return list(
        request.waivers.filter(round=request.round, state=WaiverState.APPROVED, expires_at__gt=timezone.now()).order_by(
            "expires_at", "id"
        )
    )


def _current_vote(request: ReviewRequest, user: User) -> ReviewVote | None:
    return request.votes.filter(round=request.round, voter=user).order_by("-cast_at", "-id").first()


def _findings(documents: Sequence[VerdictDocument]) -> list[Finding]:
    found: list[Finding] = []
    for document in documents:
        found.extend(document_findings(document.document, sha256=document.sha256))
    return found


# -- the checkpoint ------------------------------------------------------------------------------


def checkpoint_metadata(request: ReviewRequest) -> dict[str, Any]:
    """What the checkpoint of an approved (or revoked) trial carries under ``bias_audit``."""
    return {
        "request": request.pk,
        "approved": request.state == RequestState.APPROVED,
        "document_sha256": _document_hashes(request.documents.all()),
    }


def review_request_tag_checkpoint(*, request_id: int) -> bool:
    """Write the request's current answer into its trial's checkpoint metadata (Determined: through the
    SDK; locally: a JSON file beside the checkpoint) and record it. False when there is nothing to tag
    (a prediction audit, or a request neither approved nor revoked).

    Called by approvals.tasks after an approval or a revocation commits; it writes the state as it is
    when it runs, so a retried or late task never writes an outdated answer. Raises
    experiments.services.CheckpointMetadataError (``transient`` says whether to retry).
    """
    request = ReviewRequest.objects.select_related("trial__experiment").get(pk=request_id)
    if request.trial is None or request.state not in (RequestState.APPROVED, RequestState.REVOKED):
        return False
    metadata = checkpoint_metadata(request)
    experiment_services.checkpoint_metadata_set(
        experiment=request.trial.experiment, checkpoint=request.checkpoint, key=CHECKPOINT_METADATA_KEY, value=metadata
    )
    with transaction.atomic():
        event_record(
            actor=None,
            verb=Verb.REVIEW_REQUEST_CHECKPOINT_TAGGED,
            target=request,
            data={"checkpoint": request.checkpoint, CHECKPOINT_METADATA_KEY: metadata},
        )
    return True


# -- helpers -------------------------------------------------------------------------------------


def _reauthenticate(*, user: User, password: str, request: ReviewRequest) -> None:
    """Check the voter's password now; a failure commits its event and raises."""
    if inside_atomic_block():
        raise RuntimeError(
            "a vote must not be cast inside an atomic block: a wrong password's record must commit although "
            "the vote is refused"
        )
    since = timezone.now() - PASSWORD_FAILURE_WINDOW
    failures = list(
        Event.objects.filter(verb=Verb.REVIEW_VOTE_REAUTH_FAILED, actor=user, at__gte=since)
        .order_by("at")
        .values_list("at", flat=True)
    )
    if len(failures) >= PASSWORD_FAILURES_ALLOWED:
        until = failures[-PASSWORD_FAILURES_ALLOWED] + PASSWORD_FAILURE_WINDOW
        raise ReauthenticationFailed(
            f"{len(failures)} wrong passwords in {PASSWORD_FAILURE_WINDOW.seconds // 60} minutes: your votes are "
            f"locked until {until:%H:%M} UTC.",
            field="password",
        )
    if password and user.check_password(password):
        return
    with transaction.atomic(durable=True):
        event_record(
            actor=user,
            verb=Verb.REVIEW_VOTE_REAUTH_FAILED,
            target=request,
            data={"round": request.round, "empty": not password},
        )
    raise ReauthenticationFailed(
        "The password is not yours: a vote is signed by entering your password again."
        if password
        else "Enter your password: a vote is signed by entering it again.",
        field="password",
    )


def _confirmed_hashes(
    request: ReviewRequest, documents: Sequence[VerdictDocument], confirmed: Collection[str]
) -> list[str]:
    hashes = _document_hashes(documents)
    given = sorted({str(value).strip().lower() for value in confirmed})
    if given != hashes:
        raise ApprovalError(
            f"Review request #{request.pk} binds the documents {', '.join(h[:12] for h in hashes)}; the vote names "
            f"{', '.join(h[:12] for h in given) or 'none'}. Reload the request and vote on what it shows.",
            field="document_sha256",
        )
    return hashes


def _subject_of(documents: Sequence[VerdictDocument]) -> tuple[PredictionAudit | Trial, FairnessPolicy]:
    if not documents:
        raise ApprovalError("Choose at least one frozen verdict document.", field="documents")
    subjects = {(d.prediction_audit_id, d.trial_id) for d in documents}
    if len(subjects) != 1:
        raise ApprovalError(
            "All documents of a review request must judge one subject: one prediction audit, or one trial.",
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
    subject: PredictionAudit | Trial | None = first.prediction_audit or first.trial
    assert subject is not None
    return subject, first.policy


def _document_hashes(documents: Any) -> list[str]:
    return sorted(document.sha256 for document in documents)


def _fresh(request: ReviewRequest) -> ReviewRequest:
    return ReviewRequest.objects.select_related(*_RELATED).get(pk=request.pk)


_RELATED = ("requested_by", "policy", "prediction_audit", "trial__experiment__dataset_version__dataset")


def _locked(request: ReviewRequest) -> ReviewRequest:
    """The request re-read under a row lock: concurrent transitions and votes queue. Services work on
    this copy and return it; the caller's instance is not refreshed."""
    return (
        ReviewRequest.objects.select_for_update(of=("self",))
        .select_related(
            "requested_by",
            "policy",
            "prediction_audit",
            "trial__experiment__dataset_version__dataset",
        )
        .get(pk=request.pk)
    )


def _move(
    request: ReviewRequest,
    actor: User | None,
    state: RequestState,
    verb: Verb,
    data: dict[str, Any],
    *,
    fields: Sequence[str] = (),
) -> None:
    before = request.state
    request.state = state
    request.state_changed_at = timezone.now()
    request.save(update_fields=["state", "state_changed_at", "round", "revoked_at", "revoked_reason", *fields])
    event_record(actor=actor, verb=verb, target=request, data={"from": before, "to": state.value, **data})


def _after_decision(request: ReviewRequest, verb: Verb, *, revoked_by: User | None = None) -> None:
    pk = request.pk
    # The decision's report (docs/reports.md): its context is read now, inside the deciding transaction
    # (the chain head includes the decision's event); the worker draws its figures, renders and certifies
    # it once this transaction commits. A revocation adds a new report; the approval's report stays.
    _report_generate_queue(review_request_context(request=request, revoked_by=revoked_by), request_id=pk)
    transaction.on_commit(lambda: notifications.request_decided(request_id=pk, verb=verb))
    if request.trial_id is not None:
        transaction.on_commit(lambda: _tag_checkpoint_queue(pk))


def _report_generate_queue(context: ReportContext, *, request_id: int) -> None:
    # The task's arguments: the context as JSON, no actor (the system), the request, and the figures to
    # draw in the worker. Queued by name: sent to the broker, or run here in Celery's eager mode when
    # this process has the task registered (the tests).
    args = (context.as_json(), None, request_id, True)
    transaction.on_commit(lambda: app.signature(REPORT_GENERATE_TASK, args=args).apply_async())


def _tag_checkpoint_queue(request_id: int) -> None:
    # tasks.py imports this module; importing it when the task is queued keeps the import one-way.
    from auditportal.approvals.tasks import review_request_tag_checkpoint_task

    review_request_tag_checkpoint_task.delay(request_id)


def _required(value: str, field: str) -> str:
    value = (value or "").strip()
    if not value:
        raise ApprovalError(f"The {field.replace('_', ' ')} is required.", field=field)
    return value


def _choice(choice: str) -> VoteChoice:
    try:
        return VoteChoice(choice)
    except ValueError:
        raise ApprovalError(f"Choose approve or reject, not {choice!r}.", field="choice") from None


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
