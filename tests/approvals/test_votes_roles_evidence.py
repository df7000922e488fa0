"""Votes, roles and evidence (docs/approvals.md): a vote counts as cast by a member who held the role
then; a role change during a round pauses it until someone else resumes it; the separation of duties
follows the evidence (document and source-file hashes), not the audit row; retiring evidence an
approval rests on suspends it, and the gate says why."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.db import transaction

from auditportal.accounts import services as account_services
from auditportal.accounts.models import Role, User
from auditportal.activity.models import Event, Verb
from auditportal.approvals import selectors, services
from auditportal.approvals.models import ApprovalSuspension, RequestState, ReviewRequest, RoundPause, VoteChoice
from auditportal.approvals.rules import ActionForbidden, IllegalTransition, SeparationOfDuties
from auditportal.audits import services as audit_services
from auditportal.audits.models import PredictionAudit
from auditportal.datasets.models import DatasetVersion
from auditportal.datasets.services import dataset_version_retire
from auditportal.evidence.selectors import verdict_document_of_audit
from tests.approvals.conftest import approved, hashes, in_review, keys, vote
from tests.factories import PASSWORD, PredictionAuditFactory, client_for, make_user

# -- finding 1: votes count as cast; a role change pauses the round ------------------------------


@pytest.fixture
def hank(db: None) -> User:
    """A third ethics-committee member."""
    return make_user("hank", [Role.ETHICS_COMMITTEE])


def test_a_reject_stands_when_the_voters_role_is_revoked_later(
    audit_request: ReviewRequest, carol: User, frank: User, gina: User, hank: User, erin: User
) -> None:
    request = in_review(audit_request, carol)
    vote(request, frank, VoteChoice.REJECT, "the intended use is not covered by the evidence")

    account_services.role_revoke(user=frank, role=Role.ETHICS_COMMITTEE, revoked_by=erin)
    services.review_round_resume(user=hank, request=request, reason="frank left the committee; his vote stands")
    vote(request, gina)
    vote(request, hank)

    request.refresh_from_db()
    assert request.state == RequestState.IN_REVIEW
    tally = selectors.review_request_tally(request=request)
    assert (tally.approve, tally.reject) == (["gina", "hank"], ["frank"])


def test_a_vote_records_the_role_its_voter_held_when_it_was_cast(
    audit_request: ReviewRequest, carol: User, frank: User
) -> None:
    request = vote(in_review(audit_request, carol), frank, VoteChoice.REJECT)
    cast = request.votes.get()
    assert cast.voter_role == Role.ETHICS_COMMITTEE
    assert Event.objects.get(verb=Verb.REVIEW_VOTE_CAST).data["voter_role"] == Role.ETHICS_COMMITTEE


def test_revoking_a_voters_role_pauses_the_round_and_no_decision_is_reached_until_it_is_resumed(
    audit_request: ReviewRequest, carol: User, frank: User, gina: User, hank: User, erin: User
) -> None:
    request = in_review(audit_request, carol)
    vote(request, frank, VoteChoice.REJECT)

    account_services.role_revoke(user=frank, role=Role.ETHICS_COMMITTEE, revoked_by=erin)

    pause = RoundPause.objects.get(request=request)
    assert (pause.round, pause.user, pause.role, pause.change, pause.changed_by) == (
        request.round,
        frank,
        Role.ETHICS_COMMITTEE,
        "revoked",
        erin,
    )
    event = Event.objects.get(verb=Verb.REVIEW_REQUEST_PAUSED)
    assert event.target_id == str(request.pk)
    assert (event.data["user"], event.data["role"], event.data["change"]) == ("frank", "ethics_committee", "revoked")
    paused = selectors.review_request_pause(request=request)
    assert paused is not None
    assert paused.startswith("paused: the role of frank (ethics-committee member) was revoked on ")
    assert "an administrator or a committee member resumes it after review" in paused

    with pytest.raises(IllegalTransition, match="is paused: the role of frank"):
        vote(request, gina)
    answer = client_for(gina).get(f"/api/v1/review-requests/{request.pk}/").json()
    assert answer["paused"] == paused
    assert answer["actions"]["vote"].startswith(f"Review request #{request.pk} is paused")
    assert "paused: the role of frank" in client_for(gina).get(request.get_absolute_url()).content.decode()


def test_granting_the_committee_role_during_a_round_pauses_it(
    audit_request: ReviewRequest, carol: User, frank: User, erin: User
) -> None:
    request = in_review(audit_request, carol)
    account_services.role_grant(user=carol, role=Role.ETHICS_COMMITTEE, granted_by=erin)
    assert RoundPause.objects.filter(request=request, user=carol, change="granted").exists()
    with pytest.raises(IllegalTransition, match="is paused"):
        vote(request, frank)


def test_a_role_change_of_someone_who_may_not_vote_does_not_pause(
    audit_request: ReviewRequest, carol: User, bob: User, erin: User
) -> None:
    request = in_review(audit_request, carol)
    # bob made the request: separation of duties keeps him out whatever roles he holds.
    account_services.role_grant(user=bob, role=Role.ETHICS_COMMITTEE, granted_by=erin)
    # A new data steward neither voted nor could vote.
    account_services.role_grant(user=make_user("sam"), role=Role.DATA_STEWARD, granted_by=erin)
    assert selectors.review_request_pause(request=request) is None


def test_a_round_is_resumed_by_someone_other_than_whose_role_changed_or_who_changed_it(
    audit_request: ReviewRequest, carol: User, frank: User, gina: User, hank: User, erin: User, bob: User
) -> None:
    request = in_review(audit_request, carol)
    vote(request, frank, VoteChoice.REJECT)
    account_services.role_revoke(user=frank, role=Role.ETHICS_COMMITTEE, revoked_by=erin)

    with pytest.raises(ActionForbidden, match="erin changed the role of frank: someone else must resume"):
        services.review_round_resume(user=erin, request=request, reason="reviewed")
    account_services.role_grant(user=frank, role=Role.ADMIN, granted_by=make_user("root", [Role.ADMIN]))
    with pytest.raises(ActionForbidden, match="frank's role changed: someone else must resume"):
        services.review_round_resume(user=frank, request=request, reason="reviewed")
    with pytest.raises(ActionForbidden, match="Only an ethics-committee member or an administrator can resume"):
        services.review_round_resume(user=carol, request=request, reason="reviewed")
    with pytest.raises(services.ApprovalError, match="reason is required"):
        services.review_round_resume(user=hank, request=request, reason=" ")

    services.review_round_resume(user=hank, request=request, reason="frank left the committee")

    assert selectors.review_request_pause(request=request) is None
    event = Event.objects.get(verb=Verb.REVIEW_REQUEST_RESUMED)
    assert (event.actor, event.data["reason"], event.data["pauses"]) == (
        hank,
        "frank left the committee",
        list(RoundPause.objects.filter(request=request).values_list("pk", flat=True)),
    )
    with pytest.raises(IllegalTransition, match="is not paused"):
        services.review_round_resume(user=gina, request=request, reason="again")
    vote(request, gina)
    assert request.state == RequestState.IN_REVIEW


def test_the_page_and_the_api_resume_a_paused_round(
    audit_request: ReviewRequest, carol: User, hank: User, erin: User
) -> None:
    request = in_review(audit_request, carol)
    account_services.role_grant(user=carol, role=Role.ETHICS_COMMITTEE, granted_by=erin)
    assert selectors.review_queue(user=hank).to_resume == [request]
    assert selectors.review_queue(user=erin).to_resume == []  # erin made the change
    assert 'id="queue-to-resume"' in client_for(hank).get("/approvals/").content.decode()
    page = client_for(hank).get(request.get_absolute_url()).content.decode()
    assert 'id="pause-banner"' in page
    assert 'id="resume"' in page
    assert 'id="resume"' not in client_for(carol).get(request.get_absolute_url()).content.decode()

    response = client_for(hank).post(f"/approvals/{request.pk}/resume/", {"resume-reason": "carol joined"})
    assert response.status_code == 302
    assert selectors.review_request_pause(request=request) is None
    assert 'id="pause-banner"' not in client_for(hank).get(request.get_absolute_url()).content.decode()

    account_services.role_revoke(user=carol, role=Role.ETHICS_COMMITTEE, revoked_by=erin)
    api = client_for(hank).post(
        f"/api/v1/review-requests/{request.pk}/resume/", {"reason": "carol left"}, content_type="application/json"
    )
    assert api.status_code == 200, api.content
    assert api.json()["paused"] is None
    refused = client_for(erin).post(
        f"/api/v1/review-requests/{request.pk}/resume/", {"reason": "x"}, content_type="application/json"
    )
    assert refused.status_code == 400
    assert "is not paused" in refused.json()["detail"]


def test_a_waiver_vote_is_refused_while_the_round_is_paused(
    unfair_trial_request: ReviewRequest, carol: User, frank: User, gina: User, erin: User
) -> None:
    from datetime import date, timedelta

    from auditportal.fairness.documents.findings import FAIL

    request = in_review(unfair_trial_request, carol)
    waiver = services.waiver_propose(
        user=frank,
        request=request,
        finding_key=keys(request, FAIL)[0],
        reason="explained",
        compensating_measures="manual review",
        expires_on=date.today() + timedelta(days=30),
    )
    account_services.role_grant(user=carol, role=Role.ETHICS_COMMITTEE, granted_by=erin)
    with pytest.raises(IllegalTransition, match="is paused"):
        services.waiver_vote_cast(
            user=gina,
            waiver=waiver,
            choice=VoteChoice.APPROVE,
            reason="fine",
            password=PASSWORD,
            document_sha256=hashes(request),
        )


def test_a_role_change_rolls_back_with_its_pause(
    audit_request: ReviewRequest, carol: User, frank: User, erin: User
) -> None:
    request = in_review(audit_request, carol)

    def revoke_then_fail() -> None:
        with transaction.atomic():
            account_services.role_revoke(user=frank, role=Role.ETHICS_COMMITTEE, revoked_by=erin)
            assert RoundPause.objects.filter(request=request).exists()  # written in the same transaction
            raise RuntimeError("the caller's transaction fails")

    with pytest.raises(RuntimeError, match="the caller's transaction fails"):
        revoke_then_fail()
    assert not RoundPause.objects.filter(request=request).exists()
    assert frank.role_grants.filter(role=Role.ETHICS_COMMITTEE).exists()


# -- finding 2: separation of duties on the evidence's hashes ------------------------------------


def test_who_audited_the_same_file_may_not_vote(audit_request: ReviewRequest, carol: User) -> None:
    # ivy ran her own audit of the very file the request rests on (under another name, so her document
    # differs), and sits on the committee.
    ivy = make_user("ivy", [Role.ML_ENGINEER, Role.ETHICS_COMMITTEE])
    theirs = PredictionAuditFactory.create(created_by=ivy, original_name="copy.csv")
    assert request_audit(audit_request).sha256 == theirs.sha256
    request = in_review(audit_request, carol)

    why = selectors.review_request_tally(request=request).ineligible["ivy"]
    assert why == f"ran prediction audit #{theirs.pk} of the same file (SHA-256 {theirs.sha256[:12]})"
    with pytest.raises(SeparationOfDuties, match=r"ivy cannot vote on review request #\d+: they ran prediction audit"):
        vote(request, ivy)


def test_who_made_a_document_with_the_same_hash_may_not_vote(audit_request: ReviewRequest, carol: User) -> None:
    ivy = make_user("ivy", [Role.ML_ENGINEER, Role.ETHICS_COMMITTEE])
    theirs = PredictionAuditFactory.create(created_by=ivy)
    document = verdict_document_of_audit(audit=theirs)
    assert document.sha256 in hashes(audit_request)
    request = in_review(audit_request, carol)
    why = selectors.review_request_tally(request=request).ineligible["ivy"]
    assert (
        why == f"ran prediction audit #{theirs.pk}, whose verdict document has the same SHA-256 ({document.short_hash})"
    )
    with pytest.raises(SeparationOfDuties):
        vote(request, ivy)


def request_audit(request: ReviewRequest) -> PredictionAudit:
    assert request.prediction_audit is not None
    return request.prediction_audit


# -- finding 3: retiring evidence suspends the approval -------------------------------------------


def test_retiring_the_approved_audit_suspends_the_approval_and_the_gate_says_why(
    audit_request: ReviewRequest, carol: User, frank: User, gina: User
) -> None:
    request = approved(audit_request, carol, [frank, gina])
    audit = request.prediction_audit
    assert audit is not None
    audit_services.prediction_audit_retire(user=carol, audit=audit, reason="the file had duplicated rows")

    request.refresh_from_db()
    assert request.state == RequestState.SUSPENDED
    suspension = ApprovalSuspension.objects.get(request=request)
    assert (suspension.state_before, suspension.suspended_by, suspension.cause["kind"]) == (
        RequestState.APPROVED,
        carol,
        "prediction_audit_retired",
    )
    event = Event.objects.get(verb=Verb.REVIEW_REQUEST_SUSPENDED)
    assert event.target_id == str(request.pk)
    assert f"prediction audit #{audit.pk}, which it rests on, was retired by carol" in event.data["reason"]

    answer = selectors.gate_answer(model_identifier=request.model_identifier)
    assert answer is not None
    body = answer.as_json()
    assert body["approved"] is False
    assert body["state"] == "suspended"
    assert body["suspension"]["reason"] == suspension.reason
    assert "the file had duplicated rows" in body["suspension"]["reason"]
    assert body["suspension"]["next"].startswith("A new review request")
    api = client_for(frank).get("/api/v1/gate/", {"model": request.model_identifier}).json()
    assert api["approved"] is False
    assert api["suspension"]["reason"] == suspension.reason

    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_code:
        call_command("gate", model=request.model_identifier, stdout=out, stderr=err)
    assert exit_code.value.code == 1
    assert json.loads(out.getvalue())["approved"] is False
    assert "is suspended: prediction audit" in err.getvalue()
    assert "the file had duplicated rows" in err.getvalue()


def test_a_suspended_model_may_be_requested_again(
    audit_request: ReviewRequest, carol: User, frank: User, gina: User, bob: User
) -> None:
    request = approved(audit_request, carol, [frank, gina])
    assert request.prediction_audit is not None
    audit_services.prediction_audit_retire(user=carol, audit=request.prediction_audit, reason="wrong labels")
    fresh = PredictionAuditFactory.create(created_by=bob, original_name="fixed.csv")
    again = services.review_request_create(
        user=bob,
        title="Vendor scoring model, again",
        intended_use="Ranking",
        documents=[verdict_document_of_audit(audit=fresh)],
        model_identifier=request.model_identifier,
    )
    assert again.state == RequestState.DRAFT


def test_retiring_evidence_suspends_a_pending_request(
    audit_request: ReviewRequest, carol: User, frank: User, gina: User
) -> None:
    request = in_review(audit_request, carol)
    vote(request, frank)
    assert request.prediction_audit is not None
    audit_services.prediction_audit_retire(user=carol, audit=request.prediction_audit, reason="wrong labels")
    request.refresh_from_db()
    assert request.state == RequestState.SUSPENDED
    with pytest.raises(IllegalTransition, match="is suspended"):
        vote(request, gina)


def test_retiring_the_dataset_version_suspends_a_trials_approval(
    fair_trial_request: ReviewRequest, demo_version: DatasetVersion, carol: User, frank: User, gina: User, erin: User
) -> None:
    request = approved(fair_trial_request, carol, [frank, gina])
    dataset_version_retire(user=erin, version=demo_version, reason="consent withdrawn for part of the rows")
    request.refresh_from_db()
    assert request.state == RequestState.SUSPENDED
    suspension = ApprovalSuspension.objects.get(request=request)
    assert suspension.cause == {"kind": "dataset_version_retired", "id": demo_version.pk}
    assert "consent withdrawn" in suspension.reason
    answer = selectors.gate_answer(model_identifier=request.model_identifier)
    assert answer is not None
    assert answer.approved is False


def test_suspension_is_a_service_others_may_call(
    audit_request: ReviewRequest, carol: User, frank: User, gina: User
) -> None:
    request = approved(audit_request, carol, [frank, gina])
    services.approval_suspend(
        request=request, reason="monitoring: drift in recall", by=None, cause={"kind": "monitoring", "alert": 7}
    )
    request.refresh_from_db()
    assert request.state == RequestState.SUSPENDED
    with pytest.raises(IllegalTransition, match="is suspended"):
        services.approval_suspend(request=request, reason="again", by=None, cause={"kind": "monitoring"})


def test_an_unrelated_retirement_suspends_nothing(
    audit_request: ReviewRequest, carol: User, frank: User, gina: User, bob: User
) -> None:
    request = approved(audit_request, carol, [frank, gina])
    other = PredictionAuditFactory.create(created_by=bob, original_name="other.csv")
    audit_services.prediction_audit_retire(user=bob, audit=other, reason="not needed")
    request.refresh_from_db()
    assert request.state == RequestState.APPROVED
