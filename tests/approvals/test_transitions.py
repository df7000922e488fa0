"""Every transition and action against every role, and every action in a state that does not allow it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta

import pytest
from django.core.exceptions import PermissionDenied

from auditportal.accounts.models import User
from auditportal.activity.models import Event
from auditportal.approvals import rules, services
from auditportal.approvals.models import RequestState, ReviewRequest
from auditportal.fairness.documents.findings import INCONCLUSIVE
from tests.approvals.conftest import hashes, in_review, keys, vote
from tests.factories import PASSWORD

ROLES = ["requester", "engineer", "steward", "reviewer", "committee", "admin", "outsider"]
FIXTURE = {
    "requester": "bob",
    "engineer": "ed",
    "steward": "alice",
    "reviewer": "carol",
    "committee": "dave",
    "admin": "erin",
    "outsider": "oscar",
}


def _to_state(request: ReviewRequest, state: RequestState, fixtures: pytest.FixtureRequest) -> ReviewRequest:
    carol: User = fixtures.getfixturevalue("carol")
    if state in (RequestState.SUBMITTED, RequestState.IN_REVIEW, RequestState.APPROVED):
        services.review_request_submit(user=request.requested_by, request=request)
    if state in (RequestState.IN_REVIEW, RequestState.APPROVED):
        services.review_request_start_review(user=carol, request=request)
    request.refresh_from_db()
    if state == RequestState.APPROVED:
        for name in ("frank", "gina"):
            vote(request, fixtures.getfixturevalue(name))
    if state == RequestState.REJECTED:
        in_review(request, carol)
        for name in ("frank", "gina"):
            vote(request, fixtures.getfixturevalue(name), choice="reject", reason="not fit")
    if state == RequestState.WITHDRAWN:
        services.review_request_withdraw(user=request.requested_by, request=request)
    if state == RequestState.REVOKED:
        _to_state(request, RequestState.APPROVED, fixtures)
        services.review_request_revoke(user=fixtures.getfixturevalue("frank"), request=request, reason="recalled")
    if state == RequestState.SUSPENDED:
        _to_state(request, RequestState.APPROVED, fixtures)
        services.approval_suspend(request=request, reason="its audit was retired", by=None, cause={"kind": "test"})
    request.refresh_from_db()
    assert request.state == state
    return request


Call = Callable[[User, ReviewRequest], object]

# action: (the state it starts from, the state it leads to (None: stays), who may, the call)
CASES: dict[str, tuple[RequestState, RequestState | None, set[str], Call]] = {
    "revise": (
        RequestState.DRAFT,
        None,
        {"requester"},
        lambda u, r: services.review_request_revise(user=u, request=r, title="Credit model v3, revised"),
    ),
    "submit": (
        RequestState.DRAFT,
        RequestState.SUBMITTED,
        {"requester"},
        lambda u, r: services.review_request_submit(user=u, request=r),
    ),
    "withdraw": (
        RequestState.SUBMITTED,
        RequestState.WITHDRAWN,
        {"requester"},
        lambda u, r: services.review_request_withdraw(user=u, request=r, reason="superseded"),
    ),
    "start_review": (
        RequestState.SUBMITTED,
        RequestState.IN_REVIEW,
        {"reviewer", "committee"},
        lambda u, r: services.review_request_start_review(user=u, request=r),
    ),
    "request_changes": (
        RequestState.IN_REVIEW,
        RequestState.DRAFT,
        {"reviewer"},
        lambda u, r: services.review_request_request_changes(user=u, request=r, reason="state the intended use"),
    ),
    "recommend": (
        RequestState.IN_REVIEW,
        None,
        {"reviewer"},
        lambda u, r: services.review_request_recommend(user=u, request=r, choice="approve", reason="sound"),
    ),
    "vote": (
        RequestState.IN_REVIEW,
        None,
        {"committee"},
        lambda u, r: services.review_vote_cast(
            user=u,
            request=r,
            choice="approve",
            reason="fine",
            password=PASSWORD,
            document_sha256=hashes(r),
            acknowledged=keys(r, INCONCLUSIVE),
        ),
    ),
    "comment": (
        RequestState.IN_REVIEW,
        None,
        {"requester", "engineer", "reviewer", "committee"},
        lambda u, r: services.review_comment_add(user=u, request=r, body="Which threshold was used?"),
    ),
    "revoke": (
        RequestState.APPROVED,
        RequestState.REVOKED,
        {"committee", "admin"},
        lambda u, r: services.review_request_revoke(user=u, request=r, reason="the vendor changed the model"),
    ),
}


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("action", list(CASES))
def test_each_action_is_allowed_to_its_roles_only(
    action: str, role: str, audit_request: ReviewRequest, request: pytest.FixtureRequest
) -> None:
    start, end, allowed, call = CASES[action]
    for name in ("carol", "frank", "gina"):
        request.getfixturevalue(name)
    review_request = _to_state(audit_request, start, request)
    user: User = request.getfixturevalue(FIXTURE[role])
    before = Event.objects.count()
    if role in allowed:
        call(user, review_request)
        review_request.refresh_from_db()
        assert review_request.state == (end or start)
        assert Event.objects.count() > before
    else:
        with pytest.raises(PermissionDenied) as refused:
            call(user, review_request)
        assert str(refused.value)
        review_request.refresh_from_db()
        assert review_request.state == start
        assert Event.objects.count() == before


WRONG_STATES = [
    (action, state)
    for action, (start, _, _, _) in CASES.items()
    for state in RequestState
    if state not in rules.ACTIONS[action].states
]


@pytest.mark.parametrize(("action", "state"), WRONG_STATES, ids=[f"{a}-from-{s.value}" for a, s in WRONG_STATES])
def test_an_action_in_a_state_that_does_not_allow_it_is_refused_naming_the_state(
    action: str, state: RequestState, audit_request: ReviewRequest, request: pytest.FixtureRequest
) -> None:
    _, _, allowed, call = CASES[action]
    for name in ("carol", "frank", "gina", "dave", "erin", "ed"):
        request.getfixturevalue(name)
    review_request = _to_state(audit_request, state, request)
    user: User = request.getfixturevalue(FIXTURE[sorted(allowed)[0]])
    before = Event.objects.count()
    with pytest.raises(rules.IllegalTransition) as refused:
        call(user, review_request)
    assert f"is {state.label.lower()}:" in str(refused.value)
    assert Event.objects.count() == before
    review_request.refresh_from_db()
    assert review_request.state == state


def test_requesting_changes_sends_the_request_back_to_draft_and_a_new_round_starts_afresh(
    audit_request: ReviewRequest, carol: User, dave: User, frank: User
) -> None:
    request = in_review(audit_request, carol)
    vote(request, dave)
    services.review_request_request_changes(user=carol, request=request, reason="name the threshold")
    request.refresh_from_db()
    assert (request.state, request.round) == (RequestState.DRAFT, 1)
    request = in_review(request, carol)
    assert request.round == 2
    vote(request, frank)
    assert request.state == RequestState.IN_REVIEW  # dave's approval was in round 1
    vote(request, dave)
    assert request.state == RequestState.APPROVED


def test_a_model_has_one_open_request_and_may_have_another_once_it_is_final(
    audit_request: ReviewRequest, bob: User
) -> None:
    document = audit_request.documents.get()
    with pytest.raises(services.ApprovalError, match="already has review request") as refused:
        services.review_request_create(
            user=bob, title="again", intended_use="x", documents=[document], model_identifier="vendor-score:2.1"
        )
    assert refused.value.field == "model_identifier"
    services.review_request_withdraw(user=bob, request=audit_request)
    again = services.review_request_create(
        user=bob, title="again", intended_use="x", documents=[document], model_identifier="vendor-score:2.1"
    )
    assert again.state == RequestState.DRAFT


def test_only_engineers_and_reviewers_create_requests(
    audit_request: ReviewRequest, alice: User, dave: User, carol: User
) -> None:
    document = audit_request.documents.get()
    for user in (alice, dave):
        with pytest.raises(PermissionDenied, match="Only an ML engineer or a reviewer"):
            services.review_request_create(user=user, title="t", intended_use="u", documents=[document])
    made = services.review_request_create(
        user=carol, title="t", intended_use="u", documents=[document], model_identifier="other:1"
    )
    assert made.requested_by == carol


def test_a_waiver_needs_a_fail_comparison_and_a_future_expiry(audit_request: ReviewRequest, carol: User) -> None:
    request = in_review(audit_request, carol)
    with pytest.raises(services.ApprovalError, match="has passed") as past:
        services.waiver_propose(
            user=carol,
            request=request,
            finding_key=keys(request, INCONCLUSIVE)[0],
            reason="r",
            compensating_measures="m",
            expires_on=date.today() - timedelta(days=1),
        )
    assert past.value.field == "expires_on"
    with pytest.raises(services.ApprovalError, match="only a judged FAIL comparison can be waived"):
        services.waiver_propose(
            user=carol,
            request=request,
            finding_key=keys(request, INCONCLUSIVE)[0],
            reason="r",
            compensating_measures="m",
            expires_on=date.today() + timedelta(days=10),
        )
