"""Who may do what to a review request, in which state, and how the committee's votes decide it
(docs/approvals.md).

One source for the services, which raise the refusal, and for the selectors, which tell a page which
actions to offer and why the others are not offered. Checks run in this order: the role (403), the
separation of duties (403), the request's state (400). The decision rule (``decide``, ``quorum``,
``current_votes``, ``tally_votes``) is read by the services as they decide, by the selectors for the
tally a page shows, and by the decision's report context (approvals/context.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

from django.core.exceptions import PermissionDenied

from auditportal.accounts import rules as account_rules
from auditportal.accounts.models import Role, User
from auditportal.approvals.models import (
    RequestState,
    ReviewRequest,
    ReviewVote,
    RoundPause,
    VoteChoice,
    WaiverVote,
)
from auditportal.audits.models import PredictionAudit
from auditportal.datasets.models import DatasetVersion
from auditportal.evidence.models import VerdictDocument
from auditportal.fairness.errors import UserError
from auditportal.policies.selectors import policy_active

V = TypeVar("V", ReviewVote, WaiverVote)


class IllegalTransition(UserError):
    """The request (or waiver) is not in a state that allows the action; the message names its state."""


class ActionForbidden(PermissionDenied):
    """The user's roles do not allow the action."""


class SeparationOfDuties(PermissionDenied):
    """The user took part in making what is judged, so may not vote on it."""


class Who(Enum):
    REQUESTER = "the requester"
    NOT_REQUESTER = "anyone but the requester"
    ANYONE = "anyone"
    ELIGIBLE = "an eligible committee member"


@dataclass(frozen=True)
class Action:
    name: str
    # How messages say it: "submit", "start the review of".
    phrase: str
    states: tuple[RequestState, ...]
    # Roles that may act (any of them); empty: no role needed beyond ``who``.
    roles: tuple[Role, ...]
    who: Who


_OPEN = (RequestState.DRAFT, RequestState.SUBMITTED, RequestState.IN_REVIEW)
_ALL = tuple(RequestState)

ACTIONS: dict[str, Action] = {
    action.name: action
    for action in (
        Action("revise", "revise", (RequestState.DRAFT,), (), Who.REQUESTER),
        Action("submit", "submit", (RequestState.DRAFT,), (), Who.REQUESTER),
        Action("withdraw", "withdraw", _OPEN, (), Who.REQUESTER),
        Action(
            "start_review",
            "start the review of",
            (RequestState.SUBMITTED,),
            (Role.REVIEWER, Role.ETHICS_COMMITTEE),
            Who.NOT_REQUESTER,
        ),
        Action(
            "request_changes",
            "request changes to",
            (RequestState.SUBMITTED, RequestState.IN_REVIEW),
            (Role.REVIEWER,),
            Who.NOT_REQUESTER,
        ),
        Action("recommend", "recommend on", (RequestState.IN_REVIEW,), (Role.REVIEWER,), Who.NOT_REQUESTER),
        Action("vote", "vote on", (RequestState.IN_REVIEW,), (Role.ETHICS_COMMITTEE,), Who.ELIGIBLE),
        Action(
            "propose_waiver",
            "propose a waiver for",
            (RequestState.SUBMITTED, RequestState.IN_REVIEW),
            (Role.REVIEWER, Role.ETHICS_COMMITTEE),
            Who.ANYONE,
        ),
        Action("vote_waiver", "vote on a waiver of", (RequestState.IN_REVIEW,), (Role.ETHICS_COMMITTEE,), Who.ELIGIBLE),
        Action(
            "revoke",
            "revoke the approval of",
            (RequestState.APPROVED,),
            (Role.ETHICS_COMMITTEE, Role.ADMIN),
            Who.ANYONE,
        ),
        Action(
            "resume",
            "resume",
            (RequestState.SUBMITTED, RequestState.IN_REVIEW),
            (Role.ETHICS_COMMITTEE, Role.ADMIN),
            Who.ELIGIBLE,
        ),
        Action(
            "comment",
            "comment on",
            _ALL,
            (Role.ML_ENGINEER, Role.REVIEWER, Role.ETHICS_COMMITTEE),
            Who.ANYONE,
        ),
    )
}

# The requester may also propose a waiver and comment, whatever their roles.
_REQUESTER_MAY = frozenset({"propose_waiver", "comment"})

# What a paused round refuses: the actions that can decide the request or a waiver.
_PAUSED_REFUSES = frozenset({"vote", "vote_waiver"})


def ineligible_voters(request: ReviewRequest) -> dict[int, str]:
    """Who may never vote on ``request`` or its waivers, by user id, with why (separation of duties):
    the requester, whoever ran the prediction audit or launched the experiment, and the data stewards
    who registered the dataset and its version; and, keyed on the evidence rather than on its rows,
    whoever ran another audit or launched another trial whose frozen document has the same SHA-256 as
    one the request rests on, ran an audit of the same predictions file (its SHA-256), or registered a
    dataset version of the same file."""
    reasons: dict[int, str] = {}

    def add(user_id: int | None, why: str) -> None:
        if user_id is not None:
            reasons.setdefault(user_id, why)

    add(request.requested_by_id, f"made review request #{request.pk}")
    audit_ids: set[int] = set()
    version: DatasetVersion | None = None
    if request.prediction_audit is not None:
        add(request.prediction_audit.created_by_id, f"ran prediction audit #{request.prediction_audit_id}")
        audit_ids.add(request.prediction_audit.pk)
    if request.paired_comparison is not None:
        add(request.paired_comparison.created_by_id, f"made paired comparison #{request.paired_comparison_id}")
    if request.trial is not None:
        experiment = request.trial.experiment
        add(experiment.launched_by_id, f"launched experiment {experiment.pk}")
        version = experiment.dataset_version
        add(version.created_by_id, f"registered dataset version {version.dataset.name} v{version.number}")
        add(version.dataset.created_by_id, f"registered dataset {version.dataset.name}")
    if request.pk is None:
        return reasons
    hashes = set(request.documents.values_list("sha256", flat=True))
    audit_ids |= set(
        request.documents.filter(prediction_audit__isnull=False).values_list("prediction_audit_id", flat=True)
    )
    same_document = VerdictDocument.objects.filter(sha256__in=hashes).exclude(prediction_audit_id__in=audit_ids)
    if request.trial_id is not None:
        same_document = same_document.exclude(trial_id=request.trial_id)
    if request.paired_comparison_id is not None:
        same_document = same_document.exclude(paired_comparison_id=request.paired_comparison_id)
    for document in same_document.select_related("prediction_audit", "trial__experiment", "paired_comparison").order_by(
        "id"
    ):
        same = f"whose verdict document has the same SHA-256 ({document.short_hash})"
        if document.prediction_audit is not None:
            add(
                document.prediction_audit.created_by_id, f"ran prediction audit #{document.prediction_audit_id}, {same}"
            )
        elif document.trial is not None:
            experiment = document.trial.experiment
            add(experiment.launched_by_id, f"launched experiment {experiment.pk}, {same}")
        elif document.paired_comparison is not None:
            add(
                document.paired_comparison.created_by_id,
                f"made paired comparison #{document.paired_comparison_id}, {same}",
            )
    files = set(PredictionAudit.objects.filter(pk__in=audit_ids).values_list("sha256", flat=True))
    for audit in PredictionAudit.objects.filter(sha256__in=files).exclude(pk__in=audit_ids).order_by("id"):
        add(audit.created_by_id, f"ran prediction audit #{audit.pk} of the same file (SHA-256 {audit.sha256[:12]})")
    if version is not None:
        for other in (
            DatasetVersion.objects.filter(sha256=version.sha256)
            .exclude(pk=version.pk)
            .select_related("dataset")
            .order_by("id")
        ):
            add(
                other.created_by_id,
                f"registered dataset version {other.dataset.name} v{other.number} of the same file "
                f"(SHA-256 {other.sha256[:12]})",
            )
    return reasons


def open_pauses(request: ReviewRequest) -> list[RoundPause]:
    """The pauses of the request's current round that no one has resumed yet (oldest first); none for a
    request that is not submitted or in review."""
    if request.pk is None or request.state not in (RequestState.SUBMITTED, RequestState.IN_REVIEW):
        return []
    return list(
        RoundPause.objects.filter(request=request, round=request.round, resumptions__isnull=True)
        .select_related("user", "changed_by")
        .order_by("paused_at", "id")
    )


def pause_message(pauses: list[RoundPause]) -> str | None:
    """What a page and the API say about a paused round: whose role changed, how, when and by whom, and
    who resumes it; None when ``pauses`` is empty."""
    if not pauses:
        return None
    changes = ", and ".join(
        f"the role of {pause.user.username} ({Role(pause.role).noun}) was {pause.change} on "
        f"{pause.paused_at:%Y-%m-%d %H:%M} UTC by {pause.changed_by.username if pause.changed_by else 'a command'}"
        for pause in pauses
    )
    return (
        f"paused: {changes}; an administrator or a committee member resumes it after review "
        "(not the person whose role changed, nor who changed it)"
    )


def refusal(
    user: User,
    request: ReviewRequest,
    name: str,
    *,
    ineligible: Mapping[int, str] | None = None,
    pauses: list[RoundPause] | None = None,
) -> Exception | None:
    """Why ``user`` may not take action ``name`` on ``request`` now, as the exception a service raises;
    None when they may. ``ineligible`` and ``pauses``: ineligible_voters(request) and
    open_pauses(request), when the caller has read them already for the request's present state (a
    page asks about every action)."""
    action = ACTIONS[name]
    is_requester = user.pk == request.requested_by_id
    label = f"review request #{request.pk}"
    if not account_rules.can_view(user):
        return ActionForbidden(account_rules.NO_ROLE)
    if action.who is Who.REQUESTER and not is_requester:
        return ActionForbidden(f"Only the requester ({request.requested_by.username}) can {action.phrase} {label}.")
    has_role = any(user.has_role(role) for role in action.roles)
    if action.roles and not has_role and not (is_requester and name in _REQUESTER_MAY):
        roles = " or ".join(role.with_article for role in action.roles)
        return ActionForbidden(f"Only {roles} can {action.phrase} {label}.")
    if action.who is Who.NOT_REQUESTER and is_requester:
        return ActionForbidden(f"You made {label}: someone else must {action.phrase} it.")
    if action.who is Who.ELIGIBLE:
        why = (ineligible if ineligible is not None else ineligible_voters(request)).get(user.pk)
        if why is not None:
            return SeparationOfDuties(
                f"{user.username} cannot {action.phrase} {label}: they {why} (separation of duties)."
            )
    if name != "resume" and name not in _PAUSED_REFUSES:
        pauses = []
    elif pauses is None:
        pauses = open_pauses(request)
    if name == "resume":
        for pause in pauses:
            if user.pk == pause.user_id:
                return ActionForbidden(f"{user.username}'s role changed: someone else must resume {label}.")
            if user.pk == pause.changed_by_id:
                return ActionForbidden(
                    f"{user.username} changed the role of {pause.user.username}: someone else must resume {label}."
                )
    if request.state not in action.states:
        allowed = " or ".join(RequestState(state).label.lower() for state in action.states)
        return IllegalTransition(
            f"Review request #{request.pk} is {request.get_state_display().lower()}: "
            f"only a request that is {allowed} can be {_past(name)}.",
            field="state",
        )
    if name == "resume" and not pauses:
        return IllegalTransition(
            f"Review request #{request.pk} is not paused: there is nothing to resume.", field="state"
        )
    if name in _PAUSED_REFUSES and pauses:
        return IllegalTransition(f"Review request #{request.pk} is {pause_message(pauses)}.", field="state")
    return None


def check(user: User, request: ReviewRequest, name: str) -> None:
    problem = refusal(user, request, name)
    if problem is not None:
        raise problem


def can_create(user: User) -> bool:
    """Those who make evidence ask for its review: ML engineers and reviewers."""
    return account_rules.can_author(user)


def check_create(user: User) -> None:
    if not can_create(user):
        raise ActionForbidden("Only an ML engineer or a reviewer can request a review.")


# -- the decision rule ---------------------------------------------------------------------------


def decide(*, approvals: int, rejections: int, quorum: int) -> VoteChoice | None:
    """The rule (docs/approvals.md), over the current votes of distinct committee members: rejected
    once ``quorum`` members reject; approved once ``quorum`` members approve and none rejects;
    otherwise undecided (an outstanding reject blocks approval until it is changed)."""
    if rejections >= quorum:
        return VoteChoice.REJECT
    if approvals >= quorum and rejections == 0:
        return VoteChoice.APPROVE
    return None


def quorum(request: ReviewRequest) -> int:
    """The larger of the request's policy version's quorum and the active version's: raising the quorum
    applies to requests under review at once, lowering it does not loosen them."""
    return max(request.policy.approval_quorum, policy_active().approval_quorum)


def current_votes(votes: Iterable[V]) -> dict[int, V]:
    """Each voter's latest vote among ``votes``."""
    latest: dict[int, V] = {}
    for vote in sorted(votes, key=lambda v: (v.cast_at, v.pk)):
        latest[vote.voter_id] = vote
    return latest


def tally_votes(
    votes: Iterable[V], request: ReviewRequest, *, ineligible: Mapping[int, str] | None = None
) -> tuple[list[str], list[str]]:
    """Usernames of the current approving and rejecting votes, counted as cast: by members who held the
    committee role when they voted (``voter_role``, recorded with the vote). A role revoked later does
    not drop the vote (the change pauses the round instead, services.review_round_pause); a voter whom
    the separation of duties excludes does not count, whenever that became known. ``ineligible``:
    ineligible_voters(request), when the caller has read it already."""
    if ineligible is None:
        ineligible = ineligible_voters(request)
    approvals: list[str] = []
    rejections: list[str] = []
    for voter_id, vote in current_votes(votes).items():
        if vote.voter_role != Role.ETHICS_COMMITTEE or voter_id in ineligible:
            continue
        (approvals if vote.choice == VoteChoice.APPROVE else rejections).append(vote.voter.username)
    return approvals, rejections


def _past(name: str) -> str:
    return {
        "revise": "revised",
        "submit": "submitted",
        "withdraw": "withdrawn",
        "start_review": "taken into review",
        "request_changes": "sent back for changes",
        "recommend": "given a recommendation",
        "vote": "voted on",
        "propose_waiver": "given a waiver",
        "vote_waiver": "voted on for a waiver",
        "resume": "resumed",
        "revoke": "revoked",
        "comment": "commented on",
    }[name]
