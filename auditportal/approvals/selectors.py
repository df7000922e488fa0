"""Reads for the approval pages, the API and the gate (docs/approvals.md).

Every member may read every review request (whoever may see a prediction audit or an experiment may
see what is asked about it); an account without a role sees none (404).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import F, Prefetch, QuerySet
from django.http import Http404
from django.urls import reverse
from django.utils import timezone

from auditportal.accounts import rules as account_rules
from auditportal.accounts.models import Role, User
from auditportal.activity.models import Event, Verb
from auditportal.approvals import rules, services
from auditportal.approvals.models import (
    FINAL_STATES,
    ApprovalSuspension,
    Comment,
    Recommendation,
    RequestState,
    ReviewRequest,
    ReviewVote,
    RoundPause,
    VoteChoice,
    WaivedComparison,
    Waiver,
    WaiverState,
    WaiverVote,
)
from auditportal.audits import selectors as audit_selectors
from auditportal.audits.models import PredictionAudit
from auditportal.comparisons import selectors as comparison_selectors
from auditportal.comparisons.models import PairedComparison
from auditportal.evidence import selectors as evidence_selectors
from auditportal.evidence.models import VerdictDocument
from auditportal.experiments import selectors as experiment_selectors
from auditportal.experiments.models import Trial
from auditportal.fairness.documents.findings import FAIL, INCONCLUSIVE, Finding, document_attributes, document_findings
from auditportal.fairness.documents.report_context import signing_state
from auditportal.fairness.statistics.stats import Verdict

PASS = Verdict.PASS


def review_request_list(*, user: User, state: str | None = None) -> QuerySet[ReviewRequest]:
    if state and state not in RequestState.values:
        raise services.ApprovalError(
            f"The state is one of {', '.join(RequestState.values)}, not {state[:40]!r}.", field="state"
        )
    if not account_rules.can_view(user):
        return ReviewRequest.objects.none()
    requests = ReviewRequest.objects.select_related(
        "requested_by", "policy", "prediction_audit", "trial__experiment", "paired_comparison"
    ).order_by("-created_at", "-id")
    return requests.filter(state=state) if state else requests


def review_request_get(*, user: User, request_id: int) -> ReviewRequest:
    try:
        return (
            review_request_list(user=user)
            .select_related("trial__experiment__dataset_version__dataset")
            .get(pk=request_id)
        )
    except ReviewRequest.DoesNotExist:
        raise Http404("No such review request.") from None


def waiver_get(*, user: User, waiver_id: int) -> Waiver:
    try:
        return Waiver.objects.select_related("request").get(
            pk=waiver_id, request__in=review_request_list(user=user).values("pk")
        )
    except Waiver.DoesNotExist:
        raise Http404("No such waiver.") from None


def review_request_documents(*, request: ReviewRequest) -> list[VerdictDocument]:
    return list(request.documents.select_related("policy").order_by("id"))


@dataclass
class FindingStatus:
    """A finding of the request and where it stands in the current round."""

    finding: Finding
    document_id: int
    # FAIL: the current round's live waiver (proposed or approved), if any; ``waived`` when it is
    # approved and has not expired.
    waiver: Waiver | None = None
    waived: bool = False
    # INCONCLUSIVE: who among the current approving votes acknowledged it.
    acknowledged_by: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            **self.finding.as_json(),
            "document": self.document_id,
            "waiver": self.waiver.pk if self.waiver else None,
            "waived": self.waived,
            "acknowledged_by": self.acknowledged_by,
        }


def review_request_findings(
    *,
    request: ReviewRequest,
    documents: list[VerdictDocument] | None = None,
    votes: list[ReviewVote] | None = None,
) -> list[FindingStatus]:
    """The judged FAIL and INCONCLUSIVE comparisons of the request's documents, with their waivers and
    acknowledgements in the current round. ``documents`` and ``votes``: review_request_documents' and
    review_request_votes' answers, if read already."""
    # Each comparison of each live waiver's scope (one live waiver per comparison and round).
    waivers = {
        comparison.finding_key: comparison.waiver
        for comparison in WaivedComparison.objects.filter(
            waiver__request=request,
            waiver__round=request.round,
            waiver__state__in=[WaiverState.PROPOSED, WaiverState.APPROVED],
        )
        .select_related("waiver")
        .order_by("waiver_id", "id")
    }
    now = timezone.now()
    acknowledgements: dict[str, list[str]] = {}
    for vote in _current(request, votes).values():
        if vote.choice == VoteChoice.APPROVE:
            for key in (acknowledgement.finding_key for acknowledgement in vote.acknowledgements.all()):
                acknowledgements.setdefault(key, []).append(vote.voter.username)
    statuses = []
    for document in documents if documents is not None else review_request_documents(request=request):
        for finding in document_findings(document.document, sha256=document.sha256):
            waiver = waivers.get(finding.key) if finding.verdict == FAIL else None
            statuses.append(
                FindingStatus(
                    finding=finding,
                    document_id=document.pk,
                    waiver=waiver,
                    waived=waiver is not None and waiver.state == WaiverState.APPROVED and waiver.expires_at > now,
                    acknowledged_by=sorted(acknowledgements.get(finding.key, [])),
                )
            )
    return statuses


@dataclass
class FindingGroup:
    """The judged comparisons of one attribute and metric (over the request's documents), as the
    request page folds them: its FAIL and INCONCLUSIVE findings with their status, how many PASS, the
    live waivers that cover its FAILs and those no live waiver covers yet (``waivable``)."""

    attribute: str
    metric: str
    fails: list[FindingStatus] = field(default_factory=list)
    inconclusive: list[FindingStatus] = field(default_factory=list)
    passes: int = 0

    @property
    def slug(self) -> str:
        """An id for the page, the same for the same attribute and metric: ``g-`` and a short hash."""
        digest = hashlib.sha256(f"{self.attribute}\0{self.metric}".encode()).hexdigest()[:10]
        return f"g-{digest}"

    @property
    def waivable(self) -> list[FindingStatus]:
        return [status for status in self.fails if status.waiver is None]

    @property
    def waived(self) -> int:
        return sum(status.waived for status in self.fails)

    @property
    def waivers(self) -> list[Waiver]:
        """The live waivers covering its FAILs, each once, in the order of their ids."""
        found = {status.waiver.pk: status.waiver for status in self.fails if status.waiver is not None}
        return [found[pk] for pk in sorted(found)]

    @property
    def worst(self) -> str:
        return FAIL if self.fails else INCONCLUSIVE if self.inconclusive else PASS


def review_request_finding_groups(
    *,
    request: ReviewRequest,
    statuses: list[FindingStatus] | None = None,
    documents: list[VerdictDocument] | None = None,
) -> list[FindingGroup]:
    """The request's judged comparisons grouped by attribute and metric, worst first: groups with a
    FAIL by how many FAIL (most first), then groups with an INCONCLUSIVE by how many, then those that
    only PASS; ties in document order. ``statuses`` and ``documents``: review_request_findings' and
    review_request_documents' answers, if read already."""
    if documents is None:
        documents = review_request_documents(request=request)
    if statuses is None:
        statuses = review_request_findings(request=request, documents=documents)
    groups: dict[tuple[str, str], FindingGroup] = {}
    for document in documents:
        for attribute, section in document_attributes(document.document).items():
            for comparison in section.get("comparisons") or []:
                if not comparison.get("judged", True) or comparison.get("verdict") is None:
                    continue
                metric = str(comparison.get("metric"))
                group = groups.setdefault((attribute, metric), FindingGroup(attribute=attribute, metric=metric))
                if comparison.get("verdict") == PASS:
                    group.passes += 1
    for status in statuses:
        finding = status.finding
        group = groups.setdefault(
            (finding.attribute, finding.metric), FindingGroup(attribute=finding.attribute, metric=finding.metric)
        )
        (group.fails if finding.verdict == FAIL else group.inconclusive).append(status)
    ranked = [
        ((not group.fails, -len(group.fails), not group.inconclusive, -len(group.inconclusive), index), group)
        for index, group in enumerate(groups.values())
    ]
    return [group for _, group in sorted(ranked, key=lambda item: item[0])]


@dataclass(frozen=True)
class MailRecord:
    """What a mail about the request did (a ``review_request.mail_sent`` event): who was told (empty
    when the mail server failed), and who was not, with why."""

    at: datetime
    sent: int
    to: list[str]
    not_notified: dict[str, str]


def review_request_submission_mail(*, request: ReviewRequest) -> MailRecord | None:
    """The mail that told the committee of the current round's submission, once it has gone out (or
    failed); None until the worker has sent it."""
    event = (
        Event.objects.filter(
            target_type=ReviewRequest._meta.label_lower,
            target_id=str(request.pk),
            verb=Verb.REVIEW_REQUEST_MAIL_SENT,
        )
        .order_by("-seq")
        .only("at", "data")
    )
    for item in event:
        data = item.data if isinstance(item.data, dict) else {}
        if data.get("mail") == "submitted" and data.get("round") == request.round:
            return MailRecord(
                at=item.at,
                sent=int(data.get("sent") or 0),
                to=[str(name) for name in data.get("to") or []],
                not_notified={str(k): str(v) for k, v in (data.get("not_notified") or {}).items()},
            )
    return None


@dataclass(frozen=True)
class ReportLink:
    id: int
    url: str
    title: str
    outcome: str

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "url": self.url, "title": self.title, "outcome": self.outcome}


def _report_created_events(request: ReviewRequest) -> QuerySet[Event]:
    return Event.objects.filter(
        verb=Verb.REPORT_CREATED, target_type="reports.report", data__review_request=request.pk
    ).order_by("seq")


def review_request_report_links(*, request: ReviewRequest) -> list[ReportLink]:
    """The signed reports of the request's decisions that exist so far, oldest first, read from their
    ``report.created`` events (the reports app sits above approvals: its models are not read here).
    Empty while the worker is still generating the first."""
    links = []
    for event in _report_created_events(request):
        data = event.data if isinstance(event.data, dict) else {}
        links.append(
            ReportLink(
                id=int(event.target_id),
                url=reverse("reports:detail", args=[int(event.target_id)]),
                title=str(data.get("title") or f"Report #{event.target_id}"),
                outcome=str(data.get("outcome") or ""),
            )
        )
    return links


@dataclass(frozen=True)
class ReportRef:
    """A report of the request's decisions as the API names it (its ``url`` there tells the rest)."""

    id: int
    decision: str
    state: str

    def as_json(self) -> dict[str, Any]:
        url = reverse("api-report", args=[self.id])
        return {"id": self.id, "decision": self.decision or None, "state": self.state, "url": url}


def review_request_report_refs(*, request: ReviewRequest) -> list[ReportRef]:
    """The request's reports that exist so far, oldest first, with their signing state: from the events
    their service records with them (``report.created`` names the signatories, each ``report.signed`` is
    one of their signatures), as the reports API tells it from the reports' rows. Two queries."""
    created = [
        (int(event.target_id), event.data) for event in _report_created_events(request).only("target_id", "data")
    ]
    if not created:
        return []
    signed = Counter(
        Event.objects.filter(
            verb=Verb.REPORT_SIGNED, target_type="reports.report", target_id__in=[str(pk) for pk, _ in created]
        ).values_list("target_id", flat=True)
    )
    refs = []
    for pk, data in created:
        data = data if isinstance(data, dict) else {}
        signatories = len(data.get("signatories") or [])
        state = signing_state(signatories=signatories, signed=signed[str(pk)])
        refs.append(ReportRef(id=pk, decision=str(data.get("outcome") or ""), state=state))
    return refs


@dataclass
class Tally:
    quorum: int
    approve: list[str]
    reject: list[str]
    # Committee members who may vote on it (active, holding the role, not excluded by duty).
    eligible: list[str]
    # Who may not, with why (separation of duties), by username.
    ineligible: dict[str, str]
    # Fewer eligible members than the quorum: who could vote and why the other committee members
    # cannot; None when the quorum can be reached.
    quorum_warning: str | None = None

    @property
    def outcome(self) -> str | None:
        decided = rules.decide(approvals=len(self.approve), rejections=len(self.reject), quorum=self.quorum)
        return decided.value if decided else None

    def as_json(self) -> dict[str, Any]:
        return {
            "quorum": self.quorum,
            "approve": self.approve,
            "reject": self.reject,
            "eligible": self.eligible,
            "ineligible": self.ineligible,
            "quorum_warning": self.quorum_warning,
        }


def review_request_tally(
    *,
    request: ReviewRequest,
    ineligible: Mapping[int, str] | None = None,
    votes: list[ReviewVote] | None = None,
) -> Tally:
    """The current round's current votes that count, against the quorum; and a warning when fewer
    committee members may vote than the quorum needs (eligible: active, holding the committee role,
    not excluded by the separation of duties). ``ineligible`` and ``votes``: rules.ineligible_voters'
    and review_request_votes' answers, if read already."""
    if ineligible is None:
        ineligible = rules.ineligible_voters(request)
    members = list(User.objects.filter(role_grants__role=Role.ETHICS_COMMITTEE).order_by("username").distinct())
    if votes is None:
        votes = list(request.votes.filter(round=request.round).select_related("voter"))
    approve, reject = rules.tally_votes(
        [vote for vote in votes if vote.round == request.round], request, ineligible=ineligible
    )
    eligible = [member.username for member in members if member.is_active and member.pk not in ineligible]
    needed = rules.quorum(request)
    warning = None
    if len(eligible) < needed and request.state not in (*FINAL_STATES, RequestState.APPROVED):
        others = [
            f"{member.username} ({'account deactivated' if not member.is_active else ineligible[member.pk]})"
            for member in members
            if member.username not in eligible
        ]
        warning = (
            f"The quorum cannot be reached: {needed} approving committee members are needed and "
            + (
                f"only {_count(len(eligible), 'member')} may vote ({', '.join(eligible)})"
                if eligible
                else "no committee member may vote"
            )
            + (f". Other committee members cannot: {'; '.join(others)}" if others else "")
            + ". An administrator grants the committee role to a member who had no part in this request, or a "
            "loosening of the quorum is confirmed by a second administrator."
        )
    return Tally(
        quorum=needed,
        approve=sorted(approve),
        reject=sorted(reject),
        eligible=eligible,
        ineligible={
            user.username: why for user in User.objects.filter(pk__in=list(ineligible)) for why in [ineligible[user.pk]]
        },
        quorum_warning=warning,
    )


def _count(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def waiver_tally(
    *,
    waiver: Waiver,
    base: Tally | None = None,
    ineligible: Mapping[int, str] | None = None,
    votes: list[WaiverVote] | None = None,
) -> Tally:
    """The waiver's current votes that count, against its request's quorum, with the request's eligible
    members and warning. ``base``, ``ineligible``, ``votes``: the request's tally, rules.ineligible_voters'
    answer and the waiver's votes (waiver_votes), if read already."""
    request = waiver.request
    if ineligible is None:
        ineligible = rules.ineligible_voters(request)
    if base is None:
        base = review_request_tally(request=request, ineligible=ineligible)
    if votes is None:
        votes = list(waiver_votes(waiver=waiver))
    approve, reject = rules.tally_votes(votes, request, ineligible=ineligible)
    return Tally(
        quorum=base.quorum,
        approve=sorted(approve),
        reject=sorted(reject),
        eligible=base.eligible,
        ineligible=base.ineligible,
        quorum_warning=base.quorum_warning,
    )


def review_request_votes(*, request: ReviewRequest) -> QuerySet[ReviewVote]:
    """Every vote ever cast on the request, oldest first (superseded ones included: ``superseded_by``)."""
    return (
        request.votes.select_related("voter", "superseded_by")
        .prefetch_related("acknowledgements")
        .order_by("round", "cast_at", "id")
    )


def review_request_current_votes(*, request: ReviewRequest, votes: list[ReviewVote] | None = None) -> list[ReviewVote]:
    """Each member's latest vote in the current round, by username. ``votes``: review_request_votes'
    answer, if read already."""
    return sorted(_current(request, votes).values(), key=lambda vote: vote.voter.username)


def review_request_recommendations(*, request: ReviewRequest) -> QuerySet[Recommendation]:
    return request.recommendations.select_related("reviewer").order_by("round", "created_at", "id")


def review_request_waivers(*, request: ReviewRequest) -> QuerySet[Waiver]:
    """Every waiver of the request, oldest first, with its scope (``comparisons``, their documents)
    and votes (``votes.all()``: waiver_votes' answer)."""
    return (
        request.waivers.select_related("proposed_by", "document")
        .prefetch_related(
            Prefetch("votes", _waiver_votes(WaiverVote.objects.all())),
            Prefetch("comparisons", WaivedComparison.objects.select_related("document")),
        )
        .order_by("round", "proposed_at", "id")
    )


def waiver_votes(*, waiver: Waiver) -> QuerySet[WaiverVote]:
    """The waiver's votes in the order they were cast, superseded ones included (``superseded_by``)."""
    return _waiver_votes(waiver.votes.all())


def _waiver_votes(votes: QuerySet[WaiverVote]) -> QuerySet[WaiverVote]:
    return votes.select_related("voter", "superseded_by").order_by("cast_at", "id")


@dataclass
class Thread:
    comment: Comment
    replies: list[Thread]


def review_request_comments(*, request: ReviewRequest) -> list[Thread]:
    """The comments as threads: top-level comments oldest first, each with its replies (nested)."""
    comments = list(request.comments.select_related("author").order_by("created_at", "id"))
    threads = {comment.pk: Thread(comment=comment, replies=[]) for comment in comments}
    roots: list[Thread] = []
    for comment in comments:
        thread = threads[comment.pk]
        if comment.parent_id is not None and comment.parent_id in threads:
            threads[comment.parent_id].replies.append(thread)
        else:
            roots.append(thread)
    return roots


def review_request_timeline(*, request: ReviewRequest) -> QuerySet[Event]:
    """Every activity event about the request (all approvals events target it), oldest first."""
    return Event.objects.filter(target_type=ReviewRequest._meta.label_lower, target_id=str(request.pk)).order_by("seq")


def review_request_pause(*, request: ReviewRequest) -> str | None:
    """Why the request's round is paused ("paused: the role of frank (...) was revoked on ... by erin;
    an administrator or a committee member resumes it after review ..."), or None when it is not."""
    return rules.pause_message(rules.open_pauses(request))


def review_request_suspension(*, request: ReviewRequest) -> ApprovalSuspension | None:
    """The request's suspension (what was retired, by whom, why), or None when it is not suspended."""
    if request.state != RequestState.SUSPENDED:
        return None
    return ApprovalSuspension.objects.select_related("suspended_by").filter(request=request).first()


def suspension_as_json(suspension: ApprovalSuspension) -> dict[str, Any]:
    return {
        "reason": suspension.reason,
        "cause": suspension.cause,
        "at": suspension.suspended_at.isoformat(),
        "by": suspension.suspended_by.username if suspension.suspended_by else None,
        "was": suspension.state_before,
        "next": services.SUSPENSION_NEXT,
    }


def review_request_actions(
    *, user: User, request: ReviewRequest, ineligible: Mapping[int, str] | None = None
) -> dict[str, str | None]:
    """Per action (rules.ACTIONS), None when ``user`` may take it now, or why not: for pages to offer
    only what the services would accept. ``ineligible``: rules.ineligible_voters' answer, if read
    already; it and the open pauses are read once here otherwise, not once per action."""
    if ineligible is None:
        ineligible = rules.ineligible_voters(request)
    pauses = rules.open_pauses(request)
    return {
        name: _message(rules.refusal(user, request, name, ineligible=ineligible, pauses=pauses))
        for name in rules.ACTIONS
    }


QUEUE_DECIDED_SHOWN = 20


@dataclass
class Queue:
    """What waits for one user, per role they hold."""

    to_vote: list[ReviewRequest] = field(default_factory=list)
    # Paused rounds (a role changed) that this user may resume.
    to_resume: list[ReviewRequest] = field(default_factory=list)
    waivers_to_vote: list[Waiver] = field(default_factory=list)
    to_start: list[ReviewRequest] = field(default_factory=list)
    to_recommend: list[ReviewRequest] = field(default_factory=list)
    my_drafts: list[ReviewRequest] = field(default_factory=list)
    my_open: list[ReviewRequest] = field(default_factory=list)
    # The user's own requests that are decided or closed, newest decision first (QUEUE_DECIDED_SHOWN).
    my_decided: list[ReviewRequest] = field(default_factory=list)

    @property
    def count(self) -> int:
        return sum(
            len(items)
            for items in (
                self.to_vote,
                self.to_resume,
                self.waivers_to_vote,
                self.to_start,
                self.to_recommend,
                self.my_drafts,
            )
        )


def review_queue(*, user: User) -> Queue:
    """Committee members and administrators: paused rounds they may resume; committee members: requests in
    review and proposed waivers they may vote on and have not; reviewers
    (and committee members): submitted requests to take into review, and requests in review without
    their recommendation; requesters: their drafts (new or sent back) and their open requests.

    The requests under way (submitted or in review) are read once for every section that lists them,
    and what the user did on them (votes, waiver votes, recommendations) and their open pauses in one
    query each, not one per request."""
    queue = Queue()
    requests = review_request_list(user=user)
    if not account_rules.can_view(user):
        return queue
    under_way = list(
        requests.filter(state__in=[RequestState.SUBMITTED, RequestState.IN_REVIEW]).select_related(
            "trial__experiment__dataset_version__dataset"
        )
    )
    in_review = [request for request in under_way if request.state == RequestState.IN_REVIEW]
    if user.has_role(Role.ETHICS_COMMITTEE):
        votable = [request for request in in_review if rules.refusal(user, request, "vote") is None]
        voted = set(
            ReviewVote.objects.filter(voter=user, request__in=[request.pk for request in votable]).values_list(
                "request_id", "round"
            )
        )
        by_pk = {request.pk: request for request in votable}
        # The proposed waivers of each request's current round, in the order they were proposed.
        waivers: dict[int, list[Waiver]] = {}
        for waiver in (
            Waiver.objects.filter(request__in=list(by_pk), state=WaiverState.PROPOSED)
            .select_related("proposed_by")
            .prefetch_related(Prefetch("comparisons", queryset=WaivedComparison.objects.select_related("document")))
            .order_by("proposed_at", "id")
        ):
            request = by_pk[waiver.request_id]
            if waiver.round == request.round:
                waiver.request = request
                waivers.setdefault(request.pk, []).append(waiver)
        waiver_voted = set(
            WaiverVote.objects.filter(
                voter=user, waiver__in=[waiver.pk for proposed in waivers.values() for waiver in proposed]
            ).values_list("waiver_id", flat=True)
        )
        for request in votable:
            if (request.pk, request.round) not in voted:
                queue.to_vote.append(request)
            queue.waivers_to_vote += [waiver for waiver in waivers.get(request.pk, []) if waiver.pk not in waiver_voted]
    if user.has_role(Role.ETHICS_COMMITTEE) or user.has_role(Role.ADMIN):
        paused = set(
            RoundPause.objects.filter(
                request__in=[request.pk for request in under_way],
                round=F("request__round"),
                resumptions__isnull=True,
            ).values_list("request_id", flat=True)
        )
        queue.to_resume = [
            request for request in under_way if request.pk in paused and rules.refusal(user, request, "resume") is None
        ]
    if user.has_role(Role.REVIEWER) or user.has_role(Role.ETHICS_COMMITTEE):
        queue.to_start = [
            request
            for request in under_way
            if request.state == RequestState.SUBMITTED and rules.refusal(user, request, "start_review") is None
        ]
    if user.has_role(Role.REVIEWER):
        others = [request for request in in_review if request.requested_by_id != user.pk]
        recommended = set(
            Recommendation.objects.filter(reviewer=user, request__in=[request.pk for request in others]).values_list(
                "request_id", "round"
            )
        )
        queue.to_recommend = [request for request in others if (request.pk, request.round) not in recommended]
    mine = requests.filter(requested_by=user)
    queue.my_drafts = list(mine.filter(state=RequestState.DRAFT))
    queue.my_open = [request for request in under_way if request.requested_by_id == user.pk]
    queue.my_decided = list(
        mine.filter(state__in=[state.value for state in (*FINAL_STATES, RequestState.APPROVED)]).order_by(
            "-state_changed_at", "-id"
        )[:QUEUE_DECIDED_SHOWN]
    )
    return queue


def can_request_review(*, user: User) -> bool:
    """Whether ``user`` may make review requests (pages offer "Request review" only to them)."""
    return rules.can_create(user)


@dataclass(frozen=True)
class RequestSubject:
    """What a new review request would be about: one prediction audit, or one trial with its checkpoint,
    with the subject's frozen verdict documents (newest first) and the ones to offer ticked."""

    prediction_audit: PredictionAudit | None
    trial: Trial | None
    documents: list[VerdictDocument]
    chosen: list[VerdictDocument]
    paired_comparison: PairedComparison | None = None

    @property
    def label(self) -> str:
        if self.prediction_audit is not None:
            return f"prediction audit #{self.prediction_audit.pk} of {self.prediction_audit.original_name}"
        if self.paired_comparison is not None:
            return f"paired comparison #{self.paired_comparison.pk} of {self.paired_comparison.original_name}"
        assert self.trial is not None
        return f"trial {self.trial.number} of experiment {self.trial.experiment.name}"

    @property
    def suggested_title(self) -> str:
        if self.prediction_audit is not None:
            return f"{self.prediction_audit.original_name} (prediction audit #{self.prediction_audit.pk})"
        if self.paired_comparison is not None:
            return f"{self.claim[0].upper()}{self.claim[1:]} (paired comparison #{self.paired_comparison.pk})"
        assert self.trial is not None
        return f"{self.trial.experiment.name}, trial {self.trial.number}"

    @property
    def claim(self) -> str:
        """What the committee would vote on for a paired comparison; empty for other subjects."""
        comparison = self.paired_comparison
        if comparison is None:
            return ""
        return f"challenger {comparison.challenger} replaces champion {comparison.champion}"


def review_request_subject(
    *,
    user: User,
    audit_id: int | None = None,
    trial_id: int | None = None,
    document_id: int | None = None,
    comparison_id: int | None = None,
) -> RequestSubject | None:
    """The subject named by one of the ids (a document names its own subject, and is the one ticked),
    as ``user`` may see it (404 otherwise); None when no id is given."""
    chosen: VerdictDocument | None = None
    if document_id is not None:
        chosen = evidence_selectors.verdict_document_get(user=user, document_id=document_id)
        audit_id, trial_id = chosen.prediction_audit_id, chosen.trial_id
        comparison_id = chosen.paired_comparison_id
    if comparison_id is not None:
        comparison = comparison_selectors.comparison_get(user=user, comparison_id=comparison_id)
        document = evidence_selectors.verdict_document_of_comparison(comparison=comparison)
        documents = [document] if document is not None else []
        return RequestSubject(None, None, documents, [chosen or documents[0]] if documents else [], comparison)
    if audit_id is not None:
        audit = audit_selectors.prediction_audit_get(user=user, audit_id=audit_id)
        documents = list(evidence_selectors.verdict_documents_of_audit(audit=audit))
        return RequestSubject(audit, None, documents, [chosen or documents[0]] if documents else [])
    if trial_id is not None:
        trial = experiment_selectors.trial_get(user=user, trial_id=trial_id)
        documents = evidence_selectors.verdict_documents_of_trials(trials=[trial])[trial.pk]
        return RequestSubject(None, trial, documents, [chosen or documents[0]] if documents else [])
    return None


# -- the gate ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GateAnswer:
    approved: bool
    request: int
    state: str
    decided_at: datetime | None
    document_sha256: list[str]
    policy_version: int
    # When the approval lapses (the earliest expiry of the waivers it rests on); None: it does not.
    expires: datetime | None
    revoked_at: datetime | None
    # Why the approval was suspended and how it comes back (suspension_as_json); None unless suspended.
    suspension: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "approved": self.approved,
            "request": self.request,
            "state": self.state,
            "decided_at": _iso(self.decided_at),
            "document_sha256": self.document_sha256,
            "policy_version": self.policy_version,
            "expires": _iso(self.expires),
            "revoked_at": _iso(self.revoked_at),
            "suspension": self.suspension,
        }


def gate_answer(*, model_identifier: str) -> GateAnswer | None:
    """Is this model approved? The answer comes from its approved request if it has one, otherwise from
    its latest request (approved: false); None when no request names the model.

    Approved means: the request is approved, not revoked or suspended, and none of the waivers it rests
    on has expired. A suspended request's answer says why and how the model comes back (``suspension``).
    Not scoped by user: pipelines ask with a gate token (apis.GateApi).
    """
    if "\x00" in model_identifier:  # PostgreSQL cannot even compare text holding one
        raise services.ApprovalError("A model identifier cannot contain NUL characters.", field="model")
    requests = ReviewRequest.objects.filter(model_identifier=model_identifier).select_related("policy")
    request = requests.filter(state=RequestState.APPROVED).first() or requests.order_by("-created_at", "-id").first()
    if request is None:
        return None
    expires = None
    if request.state == RequestState.APPROVED:
        waiver = request.waivers.filter(round=request.round, state=WaiverState.APPROVED).order_by("expires_at").first()
        expires = waiver.expires_at if waiver is not None else None
    approved = request.state == RequestState.APPROVED and (expires is None or timezone.now() < expires)
    suspension = review_request_suspension(request=request)
    return GateAnswer(
        approved=approved,
        request=request.pk,
        state=request.state,
        decided_at=request.decided_at,
        document_sha256=sorted(request.documents.values_list("sha256", flat=True)),
        policy_version=request.policy.version,
        expires=expires,
        revoked_at=request.revoked_at,
        suspension=suspension_as_json(suspension) if suspension is not None else None,
    )


def _current(request: ReviewRequest, votes: list[ReviewVote] | None = None) -> dict[int, ReviewVote]:
    """The current round's latest vote of each member, from ``votes`` (of any rounds) when given."""
    if votes is None:
        return rules.current_votes(
            request.votes.filter(round=request.round).select_related("voter").prefetch_related("acknowledgements")
        )
    return rules.current_votes(vote for vote in votes if vote.round == request.round)


def _message(problem: Exception | None) -> str | None:
    return None if problem is None else str(problem)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
