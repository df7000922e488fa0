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
from auditportal.approvals.models import (
    RequestState,
    ReviewRequest,
    ReviewVote,
    VoteChoice,
    WaivedComparison,
    Waiver,
    WaiverState,
)
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
from auditportal.fairness.text import numbers
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
    """Refuse an approval while anything is missing, saying everything that is at once: every FAIL
    comparison without a waiver (by attribute and metric, with counts and groups) and, for a vote
    (``acknowledged``: the keys it acknowledges), how many INCONCLUSIVE comparisons it leaves
    unacknowledged. A vote may rest on a proposed waiver of the current round; ``acknowledged`` None:
    the decision's check, which needs every FAIL covered by an approved, unexpired waiver and every
    current approving vote to acknowledge every INCONCLUSIVE comparison."""
    # A vote may rest on a waiver still being voted on (the member votes on it in the same visit); the
    # decision needs each of them approved and unexpired, and is reached when the last one is.
    waived = waived_keys(request, pending=acknowledged is not None)
    unwaived = [finding for finding in findings if finding.verdict == FAIL and finding.key not in waived]
    inconclusive = [finding for finding in findings if finding.verdict == INCONCLUSIVE]
    if acknowledged is None:
        if unwaived:
            raise ApprovalError(missing_message(request, unwaived, []), field="choice")
        # At the decision: every current approving vote acknowledged every INCONCLUSIVE comparison.
        keys = {finding.key for finding in inconclusive}
        for vote in current_votes(list(request.votes.filter(round=request.round))).values():
            if vote.choice == VoteChoice.APPROVE:
                assert isinstance(vote, ReviewVote)
                if not keys <= set(vote.acknowledgements.values_list("finding_key", flat=True)):
                    raise ApprovalError("an approving vote did not acknowledge every INCONCLUSIVE comparison")
        return
    unacknowledged = [finding for finding in inconclusive if finding.key not in acknowledged]
    if unwaived or unacknowledged:
        raise ApprovalError(
            missing_message(request, unwaived, unacknowledged, pending_allowed=True),
            field="choice" if unwaived else "acknowledged",
        )


def missing_message(
    request: ReviewRequest, unwaived: list[Finding], unacknowledged: list[Finding], *, pending_allowed: bool = False
) -> str:
    """Everything an approval still lacks, in one message: "Review request #3 can be approved only once
    every FAIL comparison has an approved waiver (and while it has not expired) and every INCONCLUSIVE
    one is acknowledged. Still missing: gender: tpr — 3 FAIL comparisons not waived (female, nonbinary,
    other); 51 INCONCLUSIVE comparisons not acknowledged."""
    parts: list[str] = []
    families: dict[tuple[str, str], list[Finding]] = {}
    for finding in unwaived:
        families.setdefault((finding.attribute, finding.metric), []).append(finding)
    for (attribute, metric), items in sorted(families.items(), key=lambda item: (-len(item[1]), item[0])):
        groups = [finding.group for finding in items]
        shown = ", ".join(groups[:GROUPS_NAMED]) + (", ..." if len(groups) > GROUPS_NAMED else "")
        parts.append(f"{attribute}: {metric} — {numbers.plural(len(items), 'FAIL comparison')} not waived ({shown})")
    if unacknowledged:
        parts.append(
            f"{numbers.plural(len(unacknowledged), 'INCONCLUSIVE comparison')} not acknowledged (an approving vote "
            "acknowledges them all: tick the acknowledgement)"
        )
    waiver = (
        "a waiver (a proposed one is enough for a vote; the decision waits until it is approved)"
        if pending_allowed
        else "an approved waiver (and while it has not expired)"
    )
    return (
        f"Review request #{request.pk} can be approved only once every FAIL comparison has {waiver} "
        "and every INCONCLUSIVE one is acknowledged. Still missing: " + "; ".join(parts) + "."
    )


# How many groups a family's line in the refusal names before "...".
GROUPS_NAMED = 5


def waived_keys(request: ReviewRequest, *, pending: bool = False) -> set[str]:
    """The finding keys of every comparison that an approved, unexpired waiver of the current round covers;
    with ``pending``, also those a proposed (not yet decided, unexpired) waiver of the round covers."""
    waivers: list[Waiver] = _valid_waivers(request)
    if pending:
        waivers += list(
            request.waivers.filter(round=request.round, state=WaiverState.PROPOSED, expires_at__gt=timezone.now())
        )
    return set(WaivedComparison.objects.filter(waiver__in=waivers).values_list("finding_key", flat=True))


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
