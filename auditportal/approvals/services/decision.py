"""The decision: a request approved or rejected once its current votes meet the rule (rules.decide),
checked again against waivers and acknowledgements as it is decided; and what follows every decision
and revocation once its transaction commits: the requester's mail, the signed report (by the task's
name: the reports app sits above approvals) and the trial's checkpoint tag."""

from __future__ import annotations

from typing import Final

from django.utils import timezone

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.approvals.context import review_request_context
from auditportal.approvals.models import RequestState, ReviewRequest, ReviewVote, VoteChoice, Waiver, WaiverState
from auditportal.approvals.rules import current_votes, decide, quorum, tally_votes
from auditportal.approvals.services.common import (
    MAIL_DECIDED_TASK,
    TAG_CHECKPOINT_TASK,
    ApprovalError,
    _document_hashes,
    _move,
)
from auditportal.evidence.models import VerdictDocument
from auditportal.fairness.documents.findings import FAIL, INCONCLUSIVE, Finding
from auditportal.outbox.services import task_enqueue

# The registered name of reports.tasks.report_generate_task: the reports app sits above approvals, so
# the decision names the task that renders its report instead of importing it.
REPORT_GENERATE_TASK: Final = "reports.generate"


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


def _after_decision(request: ReviewRequest, verb: Verb, *, revoked_by: User | None = None) -> None:
    """Queue, in the deciding transaction, what follows a decision or a revocation (the outbox hands
    each task to the broker once the transaction commits, or later if the broker is down)."""
    pk = request.pk
    # The decision's report (docs/reports.md): its context is read now, inside the deciding transaction
    # (the chain head includes the decision's event); the worker draws its figures, renders and certifies
    # it. The arguments: the context as JSON, no actor (the system), the request, and draw the figures.
    # A revocation adds a new report; the approval's report stays.
    context = review_request_context(request=request, revoked_by=revoked_by)
    task_enqueue(name=REPORT_GENERATE_TASK, args=[context.as_json(), None, pk, True])
    task_enqueue(name=MAIL_DECIDED_TASK, args=[pk, verb.value])
    if request.trial_id is not None:
        task_enqueue(name=TAG_CHECKPOINT_TASK, args=[pk])
