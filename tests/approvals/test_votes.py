"""Votes: quorum, changes of mind, the reject rule, separation of duties, the password at each vote,
and waivers."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from django.utils import timezone as django_timezone

from auditportal.accounts.models import Role, User
from auditportal.accounts.services import role_grant, role_revoke
from auditportal.activity.models import Event, Verb
from auditportal.approvals import rules, selectors, services
from auditportal.approvals.models import RequestState, ReviewRequest, ReviewVote, Waiver, WaiverState
from auditportal.datasets.models import DatasetVersion
from auditportal.evidence.selectors import verdict_document_of_audit
from auditportal.fairness.documents.findings import FAIL, INCONCLUSIVE
from auditportal.policies.services import policy_create
from tests.approvals.conftest import days_from_now, hashes, in_review, keys, trial_document, vote
from tests.evidence.helpers import FAIR
from tests.factories import PASSWORD, PredictionAuditFactory, make_user


@pytest.mark.parametrize(
    ("choices", "state"),
    [
        (["approve"], RequestState.IN_REVIEW),
        (["approve", "approve"], RequestState.APPROVED),
        (["reject"], RequestState.IN_REVIEW),
        (["reject", "reject"], RequestState.REJECTED),
        (["approve", "reject"], RequestState.IN_REVIEW),
        (["approve", "reject", "approve"], RequestState.IN_REVIEW),  # an outstanding reject blocks approval
        (["reject", "approve", "reject"], RequestState.REJECTED),
    ],
)
def test_the_quorum_rule(
    choices: list[str],
    state: RequestState,
    audit_request: ReviewRequest,
    carol: User,
    dave: User,
    frank: User,
    gina: User,
) -> None:
    request = in_review(audit_request, carol)
    for member, choice in zip([dave, frank, gina], choices, strict=False):
        if request.state != RequestState.IN_REVIEW:
            break
        vote(request, member, choice=choice)
    assert request.state == state


def test_a_member_may_change_their_vote_until_the_decision_and_the_earlier_vote_stays(
    audit_request: ReviewRequest, carol: User, dave: User, frank: User
) -> None:
    request = in_review(audit_request, carol)
    vote(request, dave, choice="reject", reason="the intended use is vague")
    vote(request, frank)
    assert request.state == RequestState.IN_REVIEW  # dave's reject stands
    vote(request, dave, reason="clarified in the comments")
    assert request.state == RequestState.APPROVED
    first, second = ReviewVote.objects.filter(voter=dave).order_by("cast_at", "id")
    assert (first.choice, second.choice, second.supersedes) == ("reject", "approve", first)
    assert first.reason == "the intended use is vague"  # never rewritten
    with pytest.raises(rules.IllegalTransition, match="is approved"):
        vote(request, frank, choice="reject")


def test_the_quorum_comes_from_the_policy_and_raising_it_applies_at_once(
    audit_request: ReviewRequest, carol: User, dave: User, frank: User, gina: User, erin: User
) -> None:
    request = in_review(audit_request, carol)
    vote(request, dave)
    policy_create(user=erin, approval_quorum=3, reason="three signatures from now on")
    vote(request, frank)
    assert request.state == RequestState.IN_REVIEW
    assert selectors.review_request_tally(request=request).quorum == 3
    vote(request, gina)
    assert request.state == RequestState.APPROVED
    assert Event.objects.get(verb=Verb.REVIEW_REQUEST_APPROVED).data["quorum"] == 3


def test_a_vote_by_someone_who_lost_the_committee_role_later_counts_as_cast_once_the_round_is_resumed(
    audit_request: ReviewRequest, carol: User, dave: User, frank: User, gina: User, erin: User
) -> None:
    # Until issue 26 a revoked role dropped the vote; now the change pauses the round (test_votes_roles_evidence).
    request = in_review(audit_request, carol)
    vote(request, dave)
    role_revoke(user=dave, role=Role.ETHICS_COMMITTEE, revoked_by=erin)
    services.review_round_resume(user=gina, request=request, reason="dave left the committee; his vote stands")
    assert selectors.review_request_tally(request=request).approve == ["dave"]
    vote(request, frank)
    assert request.state == RequestState.APPROVED


# -- separation of duties ------------------------------------------------------------------------


def _committee(user: User) -> User:
    role_grant(user=user, role=Role.ETHICS_COMMITTEE, granted_by=None)
    user.forget_roles()
    return user


def _refused_vote(request: ReviewRequest, user: User, why: str) -> None:
    before = Event.objects.count()
    with pytest.raises(rules.SeparationOfDuties, match=f"cannot vote on review request #{request.pk}: {why}"):
        vote(request, user)
    assert Event.objects.count() == before
    assert not request.votes.filter(voter=user).exists()
    assert rules.refusal(user, request, "vote") is not None


def test_the_requester_can_never_vote_on_their_request(audit_request: ReviewRequest, bob: User, carol: User) -> None:
    request = in_review(audit_request, carol)
    _refused_vote(request, _committee(bob), f"they made review request #{request.pk} \\(separation of duties\\)")


def test_whoever_ran_the_prediction_audit_can_never_vote_on_it(
    dataset_storage: Path, bob: User, carol: User, dave: User
) -> None:
    runner = _committee(make_user("rita", [Role.ML_ENGINEER]))
    audit = PredictionAuditFactory.create(created_by=runner)
    request = services.review_request_create(
        user=carol,
        title="t",
        intended_use="u",
        documents=[verdict_document_of_audit(audit=audit)],
        model_identifier="m:1",
    )
    services.review_request_submit(user=carol, request=request)
    services.review_request_start_review(user=dave, request=request)
    request.refresh_from_db()
    _refused_vote(request, runner, f"they ran prediction audit #{audit.pk}")


def test_the_engineer_who_launched_the_experiment_can_never_vote_on_it(
    demo_version: DatasetVersion, runs: Path, carol: User, dave: User
) -> None:
    launcher = make_user("lee", [Role.ML_ENGINEER])
    document = trial_document(demo_version, launcher, FAIR, runs)
    request = services.review_request_create(user=carol, title="t", intended_use="u", documents=[document])
    request = in_review(request, dave)
    assert request.trial is not None
    _refused_vote(request, _committee(launcher), f"they launched experiment {request.trial.experiment_id}")


def test_the_steward_who_registered_the_dataset_can_never_vote_on_it(
    demo_version: DatasetVersion, runs: Path, bob: User, carol: User
) -> None:
    document = trial_document(demo_version, bob, FAIR, runs)
    request = services.review_request_create(user=bob, title="t", intended_use="u", documents=[document])
    request = in_review(request, carol)
    steward = _committee(demo_version.created_by)
    _refused_vote(request, steward, "they registered dataset")


def test_those_excluded_from_a_request_cannot_vote_on_its_waivers(
    unfair_trial_request: ReviewRequest, bob: User, carol: User, dave: User
) -> None:
    request = in_review(unfair_trial_request, carol)
    waiver = services.waiver_propose(
        user=bob,  # the requester may propose one
        request=request,
        finding_key=keys(request, FAIL)[0],
        reason="known data gap",
        compensating_measures="human review",
        expires_on=days_from_now(30),
    )
    _committee(bob)
    with pytest.raises(rules.SeparationOfDuties, match="they made review request"):
        services.waiver_vote_cast(
            user=bob, waiver=waiver, choice="approve", reason="mine", password=PASSWORD, document_sha256=hashes(request)
        )
    assert not waiver.votes.exists()


# -- the password at each vote -------------------------------------------------------------------


def test_a_wrong_password_refuses_the_vote_and_the_refusal_is_recorded(
    audit_request: ReviewRequest, carol: User, dave: User
) -> None:
    request = in_review(audit_request, carol)
    for password in ("not my password", ""):
        with pytest.raises(services.ReauthenticationFailed) as refused:
            services.review_vote_cast(
                user=dave,
                request=request,
                choice="approve",
                reason="fine",
                password=password,
                document_sha256=hashes(request),
                acknowledged=keys(request, INCONCLUSIVE),
            )
        assert refused.value.field == "password"
    assert not request.votes.exists()
    failures = Event.objects.filter(verb=Verb.REVIEW_VOTE_REAUTH_FAILED, actor=dave)
    assert [event.data["empty"] for event in failures.order_by("seq")] == [False, True]
    vote(request, dave)  # the right password signs
    assert request.votes.get().voter == dave


def test_five_wrong_passwords_lock_the_voters_votes_for_fifteen_minutes(
    audit_request: ReviewRequest, carol: User, dave: User
) -> None:
    request = in_review(audit_request, carol)

    def attempt(password: str) -> None:
        services.review_vote_cast(
            user=dave,
            request=request,
            choice="reject",
            reason="no",
            password=password,
            document_sha256=hashes(request),
        )

    for _ in range(services.PASSWORD_FAILURES_ALLOWED):
        with pytest.raises(services.ReauthenticationFailed, match="That password is not correct"):
            attempt("guess")
    with pytest.raises(services.ReauthenticationFailed, match="your votes are locked until"):
        attempt(PASSWORD)
    assert not request.votes.exists()
    # Once the failures are older than the window, the right password signs again.
    later = timezone.now() + services.PASSWORD_FAILURE_WINDOW + timedelta(seconds=1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(django_timezone, "now", lambda: later)
        attempt(PASSWORD)
    assert request.votes.get().choice == "reject"


def test_a_vote_names_the_documents_the_voter_saw_and_must_match_the_request(
    audit_request: ReviewRequest, carol: User, dave: User
) -> None:
    request = in_review(audit_request, carol)
    with pytest.raises(services.ApprovalError, match="Reload the request") as refused:
        services.review_vote_cast(
            user=dave,
            request=request,
            choice="approve",
            reason="fine",
            password=PASSWORD,
            document_sha256=["0" * 64],
            acknowledged=keys(request, INCONCLUSIVE),
        )
    assert refused.value.field == "document_sha256"
    vote(request, dave)
    assert request.votes.get().document_sha256 == hashes(request)
    event = Event.objects.get(verb=Verb.REVIEW_VOTE_CAST)
    assert event.data["document_sha256"] == hashes(request)
    assert {a["key"] for a in event.data["acknowledged"]} == set(keys(request, INCONCLUSIVE))


# -- waivers -------------------------------------------------------------------------------------


def test_a_waiver_needs_the_quorum_and_a_rejected_one_can_be_proposed_again(
    unfair_trial_request: ReviewRequest, carol: User, dave: User, frank: User, gina: User
) -> None:
    request = in_review(unfair_trial_request, carol)
    key = keys(request, FAIL)[0]

    def propose() -> Waiver:
        return services.waiver_propose(
            user=carol,
            request=request,
            finding_key=key,
            reason="gap explained by a sampling artefact",
            compensating_measures="monthly monitoring",
            expires_on=days_from_now(90),
        )

    def cast(waiver: Waiver, member: User, choice: str) -> None:
        services.waiver_vote_cast(
            user=member,
            waiver=waiver,
            choice=choice,
            reason="considered",
            password=PASSWORD,
            document_sha256=hashes(request),
        )
        waiver.refresh_from_db()

    waiver = propose()
    with pytest.raises(services.ApprovalError, match="is already proposed"):
        propose()
    cast(waiver, dave, "approve")
    assert waiver.state == WaiverState.PROPOSED
    cast(waiver, frank, "reject")
    cast(waiver, gina, "reject")
    assert waiver.state == WaiverState.REJECTED
    with pytest.raises(rules.IllegalTransition, match="only a proposed waiver"):
        cast(waiver, dave, "approve")
    second = propose()
    cast(second, dave, "approve")
    cast(second, frank, "approve")
    assert second.state == WaiverState.APPROVED
    status = next(s for s in selectors.review_request_findings(request=request) if s.finding.key == key)
    assert (status.waiver, status.waived) == (second, True)
    verbs = list(selectors.review_request_timeline(request=request).values_list("verb", flat=True))
    assert verbs.count(Verb.WAIVER_REJECTED) == 1
    assert verbs.count(Verb.WAIVER_APPROVED) == 1
