"""A request from draft to approval and revocation, and the event chain after it."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.activity.selectors import chain_verify
from auditportal.approvals import selectors, services
from auditportal.approvals.models import RequestState, ReviewRequest, VoteChoice, WaiverState
from auditportal.fairness.documents.findings import FAIL, INCONCLUSIVE
from tests.approvals.conftest import approved, hashes, in_review, keys, vote, waive_all
from tests.approvals.conftest import days_from_now as approval_days


def _verbs(request: ReviewRequest) -> list[str]:
    return list(selectors.review_request_timeline(request=request).values_list("verb", flat=True))


def test_a_fair_trial_is_approved_by_two_committee_members_and_the_chain_verifies(
    fair_trial_request: ReviewRequest, carol: User, dave: User, frank: User
) -> None:
    request = fair_trial_request
    assert request.state == RequestState.DRAFT
    assert request.model_identifier == request.checkpoint.rsplit("/", 1)[-1]
    assert selectors.review_request_findings(request=request) == []
    in_review(request, carol)
    vote(request, dave)
    assert request.state == RequestState.IN_REVIEW  # one approval of a quorum of two
    vote(request, frank)
    assert request.state == RequestState.APPROVED
    assert request.decided_at is not None
    assert _verbs(request) == [
        Verb.REVIEW_REQUEST_CREATED,
        Verb.REVIEW_REQUEST_SUBMITTED,
        Verb.REVIEW_REQUEST_REVIEW_STARTED,
        Verb.REVIEW_VOTE_CAST,
        Verb.REVIEW_VOTE_CAST,
        Verb.REVIEW_REQUEST_APPROVED,
    ]
    decision = Event.objects.get(verb=Verb.REVIEW_REQUEST_APPROVED)
    assert decision.data["approve"] == ["dave", "frank"]
    assert decision.data["document_sha256"] == hashes(request)
    assert decision.data["quorum"] == 2
    services.review_request_revoke(user=dave, request=request, reason="the data set was found to be mislabelled")
    request.refresh_from_db()
    assert request.state == RequestState.REVOKED
    verification = chain_verify()
    assert verification.ok, verification


def test_an_unfair_trial_needs_a_waiver_of_each_fail_before_an_approving_vote(
    unfair_trial_request: ReviewRequest, carol: User, dave: User, frank: User
) -> None:
    request = in_review(unfair_trial_request, carol)
    fails = keys(request, FAIL)
    assert fails
    with pytest.raises(services.ApprovalError, match=r"every FAIL comparison has a waiver \(a proposed one"):
        vote(request, dave)
    waive_all(request, carol, [dave, frank])
    assert set(request.waivers.values_list("state", flat=True)) == {WaiverState.APPROVED}
    vote(request, dave)
    vote(request, frank)
    assert request.state == RequestState.APPROVED
    assert chain_verify().ok


def test_approving_votes_may_rest_on_a_proposed_waiver_and_the_request_is_decided_when_it_is_approved(
    unfair_trial_request: ReviewRequest, carol: User, dave: User, frank: User
) -> None:
    """One visit per member: each votes on the waiver and on the request; the quorum of approving votes
    waits for the waiver, and the waiver vote that approves it decides the request."""
    from tests.factories import PASSWORD

    request = in_review(unfair_trial_request, carol)
    waiver = services.waiver_propose(
        user=carol,
        request=request,
        finding_keys=keys(request, FAIL),
        reason="the gap is explained by the vendor's data",
        compensating_measures="manual review of every rejection",
        expires_on=date.today() + timedelta(days=30),
    )

    def waiver_vote(member: User, choice: str = VoteChoice.APPROVE) -> None:
        services.waiver_vote_cast(
            user=member, waiver=waiver, choice=choice, reason="acceptable", password=PASSWORD,
            document_sha256=hashes(request),
        )  # fmt: skip

    waiver_vote(dave)
    vote(request, dave)
    vote(request, frank)
    assert request.state == RequestState.IN_REVIEW, "the waiver is not approved yet"
    assert not Event.objects.filter(verb=Verb.REVIEW_REQUEST_APPROVED).exists()
    waiver_vote(frank)
    request.refresh_from_db()
    waiver.refresh_from_db()
    assert (waiver.state, request.state) == (WaiverState.APPROVED, RequestState.APPROVED)
    decision = Event.objects.get(verb=Verb.REVIEW_REQUEST_APPROVED)
    assert decision.data["waivers"] == [waiver.pk]
    assert chain_verify().ok


def test_a_rejected_waiver_leaves_the_approving_votes_undecided_and_refuses_new_ones(
    unfair_trial_request: ReviewRequest, carol: User, dave: User, frank: User
) -> None:
    from tests.factories import PASSWORD

    request = in_review(unfair_trial_request, carol)
    waiver = services.waiver_propose(
        user=carol, request=request, finding_keys=keys(request, FAIL), reason="explained",
        compensating_measures="manual review", expires_on=date.today() + timedelta(days=30),
    )  # fmt: skip
    vote(request, dave)
    for member in (dave, frank):
        services.waiver_vote_cast(
            user=member, waiver=waiver, choice=VoteChoice.REJECT, reason="not acceptable", password=PASSWORD,
            document_sha256=hashes(request),
        )  # fmt: skip
    waiver.refresh_from_db()
    request.refresh_from_db()
    assert (waiver.state, request.state) == (WaiverState.REJECTED, RequestState.IN_REVIEW)
    with pytest.raises(services.ApprovalError, match="not waived"):
        vote(request, frank)


def test_inconclusive_comparisons_must_be_acknowledged_by_each_approving_vote(
    audit_request: ReviewRequest, carol: User, dave: User
) -> None:
    from tests.factories import PASSWORD

    request = in_review(audit_request, carol)
    inconclusive = keys(request, INCONCLUSIVE)
    assert inconclusive
    with pytest.raises(services.ApprovalError, match="1 INCONCLUSIVE comparison not acknowledged") as refused:
        services.review_vote_cast(
            user=dave,
            request=request,
            choice="approve",
            reason="ok",
            password=PASSWORD,
            document_sha256=hashes(request),
            acknowledged=inconclusive[1:],
        )
    assert refused.value.field == "acknowledged"
    vote(request, dave)
    status = next(s for s in selectors.review_request_findings(request=request) if s.finding.key == inconclusive[0])
    assert status.acknowledged_by == ["dave"]
    ack = request.votes.get().acknowledgements.get(finding_key=inconclusive[0])
    assert ack.positives_needed == status.finding.positives_needed


def test_approved_helper_reaches_approval(
    unfair_trial_request: ReviewRequest, carol: User, dave: User, frank: User
) -> None:
    assert approved(unfair_trial_request, carol, [dave, frank]).state == RequestState.APPROVED


def test_each_role_finds_what_waits_for_it_in_its_queue(
    unfair_trial_request: ReviewRequest, bob: User, carol: User, dave: User, frank: User
) -> None:
    request = unfair_trial_request
    assert selectors.review_queue(user=bob).my_drafts == [request]
    services.review_request_submit(user=bob, request=request)
    assert selectors.review_queue(user=carol).to_start == [request]
    assert selectors.review_queue(user=bob).to_start == []  # not for the requester
    services.review_request_start_review(user=carol, request=request)
    assert selectors.review_queue(user=carol).to_recommend == [request]
    assert selectors.review_queue(user=dave).to_vote == [request]
    waiver = services.waiver_propose(
        user=carol,
        request=request,
        finding_key=keys(request, FAIL)[0],
        reason="r",
        compensating_measures="m",
        expires_on=approval_days(30),
    )
    assert selectors.review_queue(user=dave).waivers_to_vote == [waiver]
    request.refresh_from_db()
    vote(request, dave, choice="reject", reason="too large a gap")
    assert selectors.review_queue(user=dave).to_vote == []
    assert selectors.review_queue(user=frank).to_vote == [request]
    assert selectors.review_queue(user=bob).my_open == [request]
