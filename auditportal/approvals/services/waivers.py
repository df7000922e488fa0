"""Waivers of judged FAIL comparisons: proposed on a submitted or in-review request, voted on by the
committee like the request itself (signed votes, the same quorum and rule)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, date, datetime

from django.db import transaction
from django.utils import timezone

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.approvals.models import ReviewRequest, VoteChoice, Waiver, WaiverState, WaiverVote
from auditportal.approvals.rules import IllegalTransition, check, decide, quorum, tally_votes
from auditportal.approvals.services.common import ApprovalError, _choice, _findings, _fresh, _locked, _required
from auditportal.approvals.services.votes import VOTER_ROLE, _confirmed_hashes, _reauthenticate
from auditportal.fairness.documents.findings import FAIL


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
            waiver=waiver,
            voter=user,
            voter_role=VOTER_ROLE,
            choice=choice,
            reason=reason,
            document_sha256=hashes,
            supersedes=previous,
        )
        event_record(
            actor=user,
            verb=Verb.WAIVER_VOTE_CAST,
            target=request,
            data={
                "waiver": waiver.pk,
                "vote": vote.pk,
                "voter_role": VOTER_ROLE.value,
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
