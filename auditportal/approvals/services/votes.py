"""The committee's signed votes on a request: the voter's password checked again at each vote by
accounts' re-authentication service (a wrong one recorded, committed although the vote is refused; five
within 15 minutes, votes and report signatures together, lock their votes);
the vote that meets the rule decides the request (decision.py)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Final

from django.db import transaction

from auditportal.accounts.models import Role, User
from auditportal.accounts.services import PASSWORD_FAILURE_WINDOW as PASSWORD_FAILURE_WINDOW
from auditportal.accounts.services import PASSWORD_FAILURES_ALLOWED as PASSWORD_FAILURES_ALLOWED
from auditportal.accounts.services import ReauthenticationFailed as ReauthenticationFailed
from auditportal.accounts.services import user_reauthenticate
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.approvals.models import Acknowledgement, ReviewRequest, ReviewVote, VoteChoice
from auditportal.approvals.rules import check
from auditportal.approvals.services.common import (
    ApprovalError,
    _choice,
    _document_hashes,
    _findings,
    _fresh,
    _locked,
    _required,
)
from auditportal.approvals.services.decision import _check_approvable, _decide
from auditportal.evidence.models import VerdictDocument
from auditportal.fairness.documents.findings import INCONCLUSIVE

# PASSWORD_FAILURE_WINDOW, PASSWORD_FAILURES_ALLOWED and ReauthenticationFailed are accounts' (the
# re-authentication service), re-exported where votes' callers have always found them.

# The role a vote is cast through (rules.ACTIONS["vote"]), recorded on the vote: it counts as cast,
# whatever happens to the voter's roles later.
VOTER_ROLE: Final = Role.ETHICS_COMMITTEE


def review_vote_cast(
    *,
    user: User,
    request: ReviewRequest,
    choice: str,
    reason: str,
    password: str,
    document_sha256: Collection[str],
    acknowledged: Collection[str] = (),
    acknowledge_all: bool = False,
) -> ReviewVote:
    """A committee member's signed vote (approve or reject, with a written reason) on a request in review.

    ``password`` must be the voter's own, checked now: a wrong one is refused and recorded
    (REVIEW_VOTE_REAUTH_FAILED, committed although the vote is refused; five within 15 minutes lock the
    voter's votes for the rest of that window). ``document_sha256`` are the documents the voter saw,
    and must be the request's. An approving vote needs every judged FAIL comparison covered by an
    approved, unexpired waiver, and must acknowledge (``acknowledged``: finding keys; or
    ``acknowledge_all``: every one the request has now, filled in under the request's lock) every judged
    INCONCLUSIVE one; either way an Acknowledgement row names each comparison with its positives
    needed. A member's later vote supersedes their earlier one until the request is decided; the vote
    that meets the rule decides it (docs/approvals.md).

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
        if acknowledge_all:
            if acknowledged:
                raise ApprovalError(
                    "Give acknowledged (finding keys) or acknowledge_all, not both.", field="acknowledged"
                )
            acknowledged = [finding.key for finding in findings if finding.verdict == INCONCLUSIVE]
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
            voter_role=VOTER_ROLE,
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
                "voter_role": VOTER_ROLE.value,
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


def _reauthenticate(*, user: User, password: str, request: ReviewRequest) -> None:
    """Check the voter's password now (accounts' one re-authentication service, whose failures votes
    and report signatures count together); a failure commits its event and raises."""
    user_reauthenticate(user=user, password=password, purpose="vote", target=request, data={"round": request.round})


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


def _current_vote(request: ReviewRequest, user: User) -> ReviewVote | None:
    return request.votes.filter(round=request.round, voter=user).order_by("-cast_at", "-id").first()
