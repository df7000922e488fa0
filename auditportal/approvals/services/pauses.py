"""A round paused when the committee or reviewer role of someone who voted or could vote in it
changes, and resumed by someone else after review (docs/approvals.md, "Votes, roles and evidence").

Votes count as cast (rules.tally_votes): a role revoked later does not drop a vote. The pause exists
so that a change in who may vote is looked at by a person before the round can reach a decision."""

from __future__ import annotations

from django.db import transaction

from auditportal.accounts.models import Role, User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.approvals.models import (
    RequestState,
    ReviewRequest,
    RoleChange,
    RoundPause,
    RoundResumption,
    WaiverVote,
)
from auditportal.approvals.rules import check, ineligible_voters, open_pauses
from auditportal.approvals.services.common import _RELATED, _findings, _locked, _required
from auditportal.approvals.services.decision import _decide

# The roles whose change pauses a round: the committee votes, reviewers recommend.
PAUSING_ROLES = (Role.ETHICS_COMMITTEE, Role.REVIEWER)


def review_round_pause(*, user: User, role: Role | str, change: RoleChange | str, by: User | None) -> list[RoundPause]:
    """``user``'s ``role`` was granted or revoked (``change``) by ``by``: pause every submitted or
    in-review request's round in which they voted, voted on a waiver or recommended, or (for the
    committee role) could vote, unless the separation of duties keeps them out of it anyway. Each pause
    is a record and an event on the request. Runs inside the role change's transaction (the approvals
    app receives accounts.signals.role_changed), so a failure here undoes the role change."""
    role, change = Role(role), RoleChange(change)
    if role not in PAUSING_ROLES:
        return []
    pauses: list[RoundPause] = []
    with transaction.atomic():
        requests = (
            ReviewRequest.objects.select_for_update(of=("self",))
            .select_related(*_RELATED)
            .filter(state__in=[RequestState.SUBMITTED, RequestState.IN_REVIEW])
            .order_by("id")
        )
        for request in requests:
            if user.pk in ineligible_voters(request):
                continue
            took_part = (
                request.votes.filter(round=request.round, voter=user).exists()
                or WaiverVote.objects.filter(waiver__request=request, waiver__round=request.round, voter=user).exists()
                or request.recommendations.filter(round=request.round, reviewer=user).exists()
            )
            if not took_part and role != Role.ETHICS_COMMITTEE:
                continue
            pause = RoundPause.objects.create(
                request=request, round=request.round, user=user, role=role, change=change, changed_by=by
            )
            event_record(
                actor=by,
                verb=Verb.REVIEW_REQUEST_PAUSED,
                target=request,
                data={
                    "pause": pause.pk,
                    "round": request.round,
                    "user": user.username,
                    "role": role.value,
                    "change": change.value,
                    "took_part": took_part,
                },
            )
            pauses.append(pause)
    return pauses


def review_round_resume(*, user: User, request: ReviewRequest, reason: str) -> ReviewRequest:
    """Resume a paused round (an ethics-committee member or an administrator who may vote on it, and is
    neither a person whose role changed nor who changed it), saying what was reviewed. Every open pause
    of the round is resumed; the votes cast before the pause stand as cast, and the rule is applied to
    them at once (the round may be decided by the resumption if they already meet it, e.g. after the
    quorum changed)."""
    reason = _required(reason, "reason")
    with transaction.atomic():
        request = _locked(request)
        check(user, request, "resume")
        pauses = open_pauses(request)
        resumption = RoundResumption.objects.create(
            request=request, round=request.round, resumed_by=user, reason=reason
        )
        resumption.pauses.set(pauses)
        event_record(
            actor=user,
            verb=Verb.REVIEW_REQUEST_RESUMED,
            target=request,
            data={
                "resumption": resumption.pk,
                "round": request.round,
                "pauses": [pause.pk for pause in pauses],
                "changes": [f"{pause.user.username}: {pause.role} {pause.change}" for pause in pauses],
                "reason": reason,
            },
        )
        if request.state == RequestState.IN_REVIEW:
            documents = list(request.documents.order_by("id"))
            _decide(request, documents, _findings(documents))
    return request
