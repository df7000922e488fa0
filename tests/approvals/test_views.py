"""The approval pages: the queue, the request form, the request page and each of its forms; who gets
200, 403, 404 or the login page; each action's effect; every error naming its field."""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from auditportal.accounts.models import Role, User
from auditportal.activity.models import Event, Verb
from auditportal.approvals import services
from auditportal.approvals.models import Comment, Recommendation, RequestState, ReviewRequest, ReviewVote, Waiver
from auditportal.audits.models import PredictionAudit
from auditportal.evidence.models import VerdictDocument
from auditportal.fairness.documents.findings import FAIL, INCONCLUSIVE
from tests.approvals.conftest import approved, hashes, in_review, keys, vote
from tests.factories import PASSWORD, PredictionAuditFactory, client_for, make_user


def _url(name: str, request: ReviewRequest) -> str:
    return reverse(f"approvals:{name}", args=[request.pk])


def _text(response: Any) -> str:
    """The page's text without tags, whitespace collapsed (what a reader sees)."""
    body = re.sub(r"<script\b.*?</script>", " ", response.content.decode(), flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)).replace("&#x27;", "'").replace("&quot;", '"')


def _vote(request: ReviewRequest, **changes: Any) -> dict[str, Any]:
    # The one box acknowledging every INCONCLUSIVE comparison the page listed (their keys: hidden).
    inconclusive = keys(request, INCONCLUSIVE)
    return {
        "choice": "approve",
        "reason": "fit for the stated use",
        "password": PASSWORD,
        "document_sha256": hashes(request),
        "acknowledged": inconclusive,
        **({"acknowledge_all": "on"} if inconclusive else {}),
        **changes,
    }


def _failed(client: Client, url: str, data: dict[str, Any], page: str, anchor: str) -> Any:
    """Post ``data`` to ``url``; the form fails, so the answer is a 303 back to ``page`` (the request
    page, at the form's ``anchor``), whose GET shows the form again with its errors: that page."""
    response = client.post(url, data)
    assert (response.status_code, response["Location"]) == (303, page + anchor), response
    return client.get(page)


def _refreshed(request: ReviewRequest) -> ReviewRequest:
    request.refresh_from_db()
    return request


# -- access --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["queue", "list", "new"])
def test_anonymous_visitors_are_sent_to_log_in_from_every_page(client: Client, name: str) -> None:
    response = client.get(reverse(f"approvals:{name}"))
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=/approvals/")


def test_anonymous_visitors_are_sent_to_log_in_from_the_request_page_and_its_forms(
    client: Client, audit_request: ReviewRequest
) -> None:
    assert client.get(audit_request.get_absolute_url())["Location"].startswith("/login/")
    response = client.post(_url("vote", audit_request), _vote(audit_request))
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")
    assert not ReviewVote.objects.exists()


def test_the_request_page_is_at_its_absolute_url(audit_request: ReviewRequest) -> None:
    assert audit_request.get_absolute_url() == f"/approvals/{audit_request.pk}/"


def test_outsiders_get_404_for_a_request_its_forms_and_its_subject(
    audit_request: ReviewRequest, oscar: User, dave: User, carol: User, frank: User
) -> None:
    in_review(audit_request, carol)
    services.review_comment_add(user=dave, request=audit_request, body="why?")
    outsider = client_for(oscar)
    assert outsider.get(audit_request.get_absolute_url()).status_code == 404
    for name in ("submit", "start-review", "withdraw", "vote", "waiver", "comment", "recommend", "revoke"):
        assert outsider.post(_url(name, audit_request), {"reason": "x"}).status_code == 404, name
    assert outsider.get(reverse("approvals:new") + f"?audit={audit_request.prediction_audit_id}").status_code == 404
    # An account without a role has no queue either.
    assert outsider.get(reverse("approvals:queue")).status_code == 403
    assert outsider.get(reverse("approvals:list")).status_code == 403


def test_members_without_the_role_get_403_with_the_reason(
    audit_request: ReviewRequest, alice: User, carol: User, bob: User, ed: User
) -> None:
    steward = client_for(alice)
    assert steward.get(audit_request.get_absolute_url()).status_code == 200  # every member may read
    response = steward.get(reverse("approvals:new") + f"?audit={audit_request.prediction_audit_id}")
    assert response.status_code == 403
    assert "Only an ML engineer or a reviewer can request a review." in _text(response)
    response = client_for(carol).post(_url("submit", audit_request))
    assert response.status_code == 403
    assert f"Only the requester (bob) can submit review request #{audit_request.pk}." in _text(response)
    assert client_for(ed).post(_url("withdraw", audit_request), {"withdraw-reason": "mine now"}).status_code == 403
    in_review(audit_request, carol)
    response = client_for(bob).post(_url("vote", audit_request), _vote(audit_request))
    assert response.status_code == 403
    assert "Only an ethics-committee member can vote on" in _text(response)
    response = client_for(alice).post(_url("vote", audit_request), _vote(audit_request))
    assert response.status_code == 403
    assert not ReviewVote.objects.exists()


def test_a_committee_member_who_made_the_request_cannot_vote_and_is_told_why(
    bob: User, carol: User, dataset_storage: object
) -> None:
    both = make_user("hal", [Role.ML_ENGINEER, Role.ETHICS_COMMITTEE])
    audit: PredictionAudit = PredictionAuditFactory.create(created_by=bob)
    request = services.review_request_create(
        user=both,
        title="Own model",
        intended_use="x",
        documents=list(audit.verdict_documents.all()),
        model_identifier="own:1",
    )
    in_review(request, carol)
    page = client_for(both).get(request.get_absolute_url())
    assert 'id="vote-form"' not in page.content.decode()
    sentence = f"hal cannot vote on review request #{request.pk}: they made review request #{request.pk}"
    assert sentence in _text(page)
    response = client_for(both).post(_url("vote", request), _vote(request))
    assert response.status_code == 403
    assert "(separation of duties)" in _text(response)


# -- the queue -----------------------------------------------------------------------------------


def test_each_role_finds_what_waits_for_it_in_the_queue_reached_from_the_nav(
    audit_request: ReviewRequest, bob: User, carol: User, dave: User, frank: User
) -> None:
    def queue(user: User) -> str:
        response = client_for(user).get(reverse("approvals:queue"))
        assert response.status_code == 200
        assert f'href="{reverse("approvals:queue")}"' in response.content.decode()  # the nav link
        return response.content.decode()

    row = f'data-request="{audit_request.pk}"'

    def section(html: str, table_id: str) -> str:
        start = html.index(f'id="{table_id}"')
        return html[start : html.index("</table>", start)]

    assert row in section(queue(bob), "my-drafts")
    services.review_request_submit(user=bob, request=audit_request)
    assert row in section(queue(carol), "to-start")
    assert row in section(queue(dave), "to-start")
    assert row in section(queue(bob), "my-open")
    services.review_request_start_review(user=carol, request=audit_request)
    assert row in section(queue(dave), "to-vote")
    assert row in section(queue(carol), "to-recommend")
    vote(_refreshed(audit_request), dave)
    assert row not in section(queue(dave), "to-vote")
    assert row in section(queue(frank), "to-vote")
    vote(audit_request, frank)
    assert row in section(queue(bob), "my-decided")
    assert 'id="to-vote"' not in queue(bob)  # not a committee member: no such section


def test_a_member_whose_roles_take_no_part_in_reviews_is_told_so(alice: User) -> None:
    response = client_for(alice).get(reverse("approvals:queue"))
    assert response.status_code == 200
    assert "Nothing waits for you here" in _text(response)


def test_a_proposed_waiver_waits_in_each_eligible_members_queue(
    unfair_trial_request: ReviewRequest, carol: User, dave: User
) -> None:
    request = in_review(unfair_trial_request, carol)
    waiver = services.waiver_propose(
        user=carol,
        request=request,
        finding_key=keys(request, FAIL)[0],
        reason="explained",
        compensating_measures="manual review",
        expires_on=date.today() + timedelta(days=30),
    )
    html = client_for(dave).get(reverse("approvals:queue")).content.decode()
    assert f'data-waiver="{waiver.pk}"' in html


def test_the_list_filters_by_state_and_ignores_a_state_that_does_not_exist(
    audit_request: ReviewRequest, carol: User
) -> None:
    client = client_for(carol)
    row = f'data-request="{audit_request.pk}"'
    assert row in client.get(reverse("approvals:list") + "?state=draft").content.decode()
    assert row not in client.get(reverse("approvals:list") + "?state=approved").content.decode()
    response = client.get(reverse("approvals:list") + "?state=nonsense&page=x")
    assert response.status_code == 200
    assert f'data-request="{audit_request.pk}"' in response.content.decode()


# -- requesting a review -------------------------------------------------------------------------


@pytest.fixture
def audit(bob: User, dataset_storage: object) -> PredictionAudit:
    return PredictionAuditFactory.create(created_by=bob)


def test_the_audit_page_offers_request_review_to_engineers_and_reviewers_only(
    audit: PredictionAudit, bob: User, dave: User
) -> None:
    link = f'href="{reverse("approvals:new")}?audit={audit.pk}"'
    assert link in client_for(bob).get(reverse("audits:prediction", args=[audit.pk])).content.decode()
    assert link not in client_for(dave).get(reverse("audits:prediction", args=[audit.pk])).content.decode()
    document = audit.verdict_documents.get()
    page = client_for(bob).get(reverse("evidence:document", args=[document.pk])).content.decode()
    assert f'href="{reverse("approvals:new")}?document={document.pk}"' in page


def test_an_engineer_requests_a_review_of_a_prediction_audit(audit: PredictionAudit, bob: User) -> None:
    url = reverse("approvals:new") + f"?audit={audit.pk}"
    client = client_for(bob)
    form = client.get(url)
    document = audit.verdict_documents.get()
    assert form.status_code == 200
    html = form.content.decode()
    assert f'value="{document.pk}"' in html
    assert "checked" in html
    assert f"(prediction audit #{audit.pk})" in html  # the suggested title
    response = client.post(
        url,
        {
            "title": "Vendor model",
            "intended_use": "Ranking",
            "model_identifier": "vendor:2",
            "documents": [document.pk],
        },
    )
    request = ReviewRequest.objects.get()
    assert response.status_code == 302
    assert response["Location"] == request.get_absolute_url()
    assert (request.state, request.prediction_audit_id, request.model_identifier) == ("draft", audit.pk, "vendor:2")
    assert list(request.documents.all()) == [document]
    assert Event.objects.filter(verb=Verb.REVIEW_REQUEST_CREATED, target_id=str(request.pk)).exists()


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"model_identifier": ""}, "model_identifier", "The model identifier is required."),
        ({"title": " "}, "title", "The title is required."),
        ({"intended_use": ""}, "intended_use", "The intended use is required."),
        ({"documents": []}, "documents", "Choose at least one frozen verdict document."),
        ({"documents": ["x"]}, "documents", "Select a valid choice. x is not one of the available choices."),
    ],
)
def test_a_request_form_error_names_its_field(
    audit: PredictionAudit, bob: User, changes: dict[str, Any], field: str, message: str
) -> None:
    data = {
        "title": "Vendor model",
        "intended_use": "Ranking",
        "model_identifier": "vendor:2",
        "documents": [audit.verdict_documents.get().pk],
        **changes,
    }
    response = client_for(bob).post(reverse("approvals:new") + f"?audit={audit.pk}", data)
    assert response.status_code == 400
    assert message in response.context["form"].errors[field]
    assert message in _text(response)
    assert not ReviewRequest.objects.exists()


def test_a_model_with_an_open_request_is_refused_with_the_services_message(
    audit_request: ReviewRequest, bob: User
) -> None:
    response = client_for(bob).post(
        reverse("approvals:new") + f"?audit={audit_request.prediction_audit_id}",
        {
            "title": "Again",
            "intended_use": "x",
            "model_identifier": "vendor-score:2.1",
            "documents": [audit_request.documents.get().pk],
        },
    )
    assert response.status_code == 400
    assert (
        f"already has review request #{audit_request.pk} (draft)"
        in response.context["form"].errors["model_identifier"][0]
    )


def test_a_trials_request_defaults_its_model_identifier_to_the_checkpoint(
    unfair_trial_request: ReviewRequest, bob: User, carol: User
) -> None:
    trial = unfair_trial_request.trial
    assert trial is not None
    services.review_request_withdraw(user=bob, request=unfair_trial_request)
    experiment_page = client_for(carol).get(reverse("experiments:detail", args=[trial.experiment_id]))
    assert f'href="{reverse("approvals:new")}?trial={trial.pk}"' in experiment_page.content.decode()
    url = reverse("approvals:new") + f"?trial={trial.pk}"
    assert client_for(carol).get(url).status_code == 200
    document = unfair_trial_request.documents.get()
    response = client_for(carol).post(
        url, {"title": "Again", "intended_use": "x", "model_identifier": "", "documents": [document.pk]}
    )
    assert response.status_code == 302, _text(response)
    created = ReviewRequest.objects.get(state=RequestState.DRAFT)
    assert created.model_identifier == f"ckpt-{trial.pk}"
    assert created.requested_by == carol


def test_the_request_form_without_a_subject_says_where_to_start_and_bad_ids_are_404(bob: User) -> None:
    client = client_for(bob)
    response = client.get(reverse("approvals:new"))
    assert response.status_code == 200
    assert "Start from what is to be approved" in _text(response)
    assert client.get(reverse("approvals:new") + "?audit=abc").status_code == 404
    assert client.get(reverse("approvals:new") + "?trial=999999").status_code == 404
    assert client.get(reverse("approvals:new") + "?document=999999").status_code == 404


# -- the request page ----------------------------------------------------------------------------


def test_the_request_page_shows_the_subject_documents_policy_plot_findings_and_tally(
    audit_request: ReviewRequest, carol: User, dave: User
) -> None:
    request = in_review(audit_request, carol)
    document: VerdictDocument = request.documents.get()
    response = client_for(dave).get(request.get_absolute_url())
    assert response.status_code == 200
    html, text = response.content.decode(), _text(response)
    assert document.sha256 in text
    assert f'href="{reverse("evidence:document", args=[document.pk])}"' in html
    assert f'href="{reverse("audits:prediction", args=[request.prediction_audit_id])}"' in html
    assert f"version {request.policy.version}" in text
    # The dashboard's forest plot of the document, drawn by static/js/figures.js.
    assert f'data-figure-json="forest-{document.short_hash}"' in html
    assert f'<script id="forest-{document.short_hash}" type="application/json">' in html
    assert "js/figures.js" in html
    # INCONCLUSIVE comparisons, each with the positives it needs; the vote form acknowledges them all
    # with one box, their keys hidden beside it.
    inconclusive = keys(request, INCONCLUSIVE)
    for key in inconclusive:
        assert f'data-finding="{key}"' in html
        assert f'<input type="hidden" name="acknowledged" value="{key}"' in html
    assert html.count('name="acknowledge_all"') == 1
    assert f"I acknowledge the {len(inconclusive)} INCONCLUSIVE comparison" in text
    assert "Positives needed" in text
    assert "Approve 0 of 2 needed" in text
    assert 'name="password"' in html
    assert 'autocomplete="current-password"' in html
    assert f'name="document_sha256" value="{document.sha256}"' in html


def test_the_request_page_shows_unavailable_actions_with_the_sentence_why(
    audit_request: ReviewRequest, carol: User
) -> None:
    text = _text(client_for(carol).get(audit_request.get_absolute_url()))
    assert f"Only the requester (bob) can submit review request #{audit_request.pk}." in text
    pk = audit_request.pk
    assert f"Review request #{pk} is draft: only a request that is submitted can be taken into review." in text


# -- the workflow --------------------------------------------------------------------------------


def test_the_requester_submits_and_a_reviewer_takes_it_into_review(
    audit_request: ReviewRequest, bob: User, carol: User
) -> None:
    response = client_for(bob).post(_url("submit", audit_request))
    assert response.status_code == 302
    assert response["Location"] == audit_request.get_absolute_url()
    assert _refreshed(audit_request).state == RequestState.SUBMITTED
    response = client_for(carol).post(_url("start-review", audit_request), follow=True)
    assert _refreshed(audit_request).state == RequestState.IN_REVIEW
    assert f"Review request #{audit_request.pk} is in review" in _text(response)


def test_an_illegal_transition_goes_back_to_the_page_with_the_services_message(
    audit_request: ReviewRequest, bob: User
) -> None:
    client = client_for(bob)
    client.post(_url("submit", audit_request))
    page = audit_request.get_absolute_url()
    response = _failed(client, _url("submit", audit_request), {}, page, "#action-error")
    message = f"Review request #{audit_request.pk} is submitted: only a request that is draft can be submitted."
    assert response.context["error"] == message
    assert message in _text(response)
    assert client.get(page).context["error"] is None  # shown once


def test_a_reviewer_requests_changes_with_a_reason_and_the_requester_revises(
    audit_request: ReviewRequest, bob: User, carol: User
) -> None:
    client_for(bob).post(_url("submit", audit_request))
    page = audit_request.get_absolute_url()
    reviewer = client_for(carol)
    response = _failed(
        reviewer, _url("request-changes", audit_request), {"request_changes-reason": ""}, page, "#request-changes"
    )
    assert response.context["changes_form"].errors["reason"] == ["The reason is required."]
    response = client_for(carol).post(
        _url("request-changes", audit_request), {"request_changes-reason": "State the threshold."}
    )
    assert response.status_code == 302
    assert _refreshed(audit_request).state == RequestState.DRAFT
    event = Event.objects.get(verb=Verb.REVIEW_REQUEST_CHANGES_REQUESTED)
    assert event.data["reason"] == "State the threshold."

    document = audit_request.documents.get()
    data = {"title": "Vendor model, threshold 0.5", "intended_use": "Ranking", "documents": [document.pk]}
    requester = client_for(bob)
    assert requester.post(_url("revise", audit_request), data).status_code == 302
    assert _refreshed(audit_request).title == "Vendor model, threshold 0.5"
    response = _failed(requester, _url("revise", audit_request), data, page, "#revise")
    assert "Nothing changed." in _text(response)
    response = _failed(
        requester, _url("revise", audit_request), {**data, "title": "new", "documents": []}, page, "#revise"
    )
    assert response.context["revise_form"].errors["documents"] == ["Choose at least one frozen verdict document."]
    assert response.context["revise_form"]["title"].value() == "new"  # what was posted, shown again


def test_the_requester_withdraws(audit_request: ReviewRequest, bob: User) -> None:
    response = client_for(bob).post(_url("withdraw", audit_request), {"withdraw-reason": "superseded"})
    assert response.status_code == 302
    assert _refreshed(audit_request).state == RequestState.WITHDRAWN
    assert Event.objects.get(verb=Verb.REVIEW_REQUEST_WITHDRAWN).data["reason"] == "superseded"


def test_a_reviewer_recommends(audit_request: ReviewRequest, carol: User) -> None:
    in_review(audit_request, carol)
    page, reviewer = audit_request.get_absolute_url(), client_for(carol)
    response = _failed(reviewer, _url("recommend", audit_request), {"recommend-reason": "fine"}, page, "#recommend")
    assert response.context["recommend_form"].errors["choice"] == ["Choose a recommendation: approve or reject."]
    response = _failed(
        reviewer,
        _url("recommend", audit_request),
        {"recommend-choice": "approve", "recommend-reason": ""},
        page,
        "#recommend",
    )
    assert response.context["recommend_form"].errors["reason"] == ["The reason is required."]
    response = client_for(carol).post(
        _url("recommend", audit_request), {"recommend-choice": "approve", "recommend-reason": "well documented"}
    )
    assert response.status_code == 302
    recommendation = Recommendation.objects.get()
    assert (recommendation.reviewer, recommendation.choice) == (carol, "approve")
    assert "well documented" in _text(client_for(carol).get(audit_request.get_absolute_url()))


def test_comments_are_threaded_and_an_empty_reply_opens_its_form_with_the_error(
    audit_request: ReviewRequest, bob: User, dave: User
) -> None:
    assert client_for(dave).post(_url("comment", audit_request), {"body": "Which threshold?"}).status_code == 302
    question = Comment.objects.get()
    response = client_for(bob).post(_url("comment", audit_request), {"body": "0.5", "parent": question.pk})
    assert response.status_code == 302
    reply = Comment.objects.get(parent=question)
    assert (reply.author, reply.body) == (bob, "0.5")
    page = client_for(dave).get(audit_request.get_absolute_url()).content.decode()
    replies = page[page.index(f'id="comment-{question.pk}"') :]
    assert f'id="comment-{reply.pk}"' in replies[: replies.index("</li>\n</ul>") + 20]

    requester, url = client_for(bob), audit_request.get_absolute_url()
    response = _failed(
        requester, _url("comment", audit_request), {"body": " ", "parent": question.pk}, url, "#comment-form"
    )
    assert response.context["reply_to"] == question.pk
    assert "The body is required." in _text(response)
    response = _failed(requester, _url("comment", audit_request), {"body": "x", "parent": 999999}, url, "#comment-form")
    assert f"Comment #999999 is not a comment on review request #{audit_request.pk}." in _text(response)
    assert Comment.objects.count() == 2


def test_two_members_vote_with_their_passwords_and_the_request_is_approved(
    audit_request: ReviewRequest, carol: User, dave: User, frank: User
) -> None:
    request = in_review(audit_request, carol)
    response = client_for(dave).post(_url("vote", request), _vote(request))
    assert response.status_code == 302
    assert response["Location"] == request.get_absolute_url() + "#votes"
    cast = ReviewVote.objects.get(voter=dave)
    assert cast.document_sha256 == hashes(request)
    assert sorted(cast.acknowledgements.values_list("finding_key", flat=True)) == sorted(keys(request, INCONCLUSIVE))
    text = _text(client_for(dave).get(request.get_absolute_url()))
    assert "Your current vote: Approve" in text
    assert "Approve 1 of 2 needed" in text
    member = client_for(frank)
    response = member.post(_url("vote", request), _vote(request), follow=True)
    assert _refreshed(request).state == RequestState.APPROVED
    assert "It decided the request: approved." in _text(response)  # at once, no reload
    text = _text(client_for(carol).get(request.get_absolute_url()))
    assert "Approved on" in text
    assert "by dave, frank" in text
    # Its signed report comes from the worker (queued when the decision commits; not run here): the page
    # says so and polls for its link (static/js/approvals-request.js), never "reload".
    assert "Signed reports" in text
    assert "The signed report of this decision is being generated; its link appears here" in text
    assert "reload" not in text.lower()


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"password": "wrong"}, "password", "That password is not correct: a vote is signed by entering your own"),
        ({"password": ""}, "password", "Enter your password: a vote is signed by entering it again."),
        ({"reason": ""}, "reason", "The reason is required."),
        ({"choice": ""}, "choice", "Choose your vote: approve or reject."),
        ({"choice": "maybe"}, "choice", "Choose approve or reject."),
        ({"acknowledge_all": ""}, "acknowledged", "not acknowledged (an approving vote acknowledges them all"),
        ({"acknowledged": ["nope"]}, "acknowledge_all", "The INCONCLUSIVE comparisons changed since the page"),
        ({"document_sha256": ["0" * 64]}, "document_sha256", "Reload the request and vote on what it shows."),
    ],
)
def test_a_vote_form_error_names_its_field_and_no_vote_is_recorded(
    audit_request: ReviewRequest, carol: User, dave: User, changes: dict[str, Any], field: str, message: str
) -> None:
    request = in_review(audit_request, carol)
    member = client_for(dave)
    response = _failed(
        member, _url("vote", request), _vote(request, **changes), request.get_absolute_url(), "#vote-form"
    )
    errors = response.context["vote_form"].errors[field]
    assert any(message in error for error in errors), errors
    assert message in _text(response)
    assert not ReviewVote.objects.exists()
    assert PASSWORD not in response.content.decode()  # the password is never kept nor shown again
    if field == "password":
        assert Event.objects.filter(verb=Verb.REVIEW_VOTE_REAUTH_FAILED, actor=dave).count() == 1


@pytest.mark.slow  # about 6 s: the whole waiver flow through the pages
def test_a_fail_is_waived_through_the_waiver_forms_before_the_request_is_approved(
    unfair_trial_request: ReviewRequest, carol: User, dave: User, frank: User
) -> None:
    request = in_review(unfair_trial_request, carol)
    page = request.get_absolute_url()
    fail_keys = keys(request, FAIL)
    response = _failed(client_for(dave), _url("vote", request), _vote(request), page, "#vote-form")
    assert "can be approved only once every FAIL comparison has a waiver" in _text(response)
    assert "gender: tpr — 1 FAIL comparison not waived (female)" in _text(response)

    proposal = {
        "waiver-finding_keys": fail_keys,
        "waiver-reason": "explained by the vendor's data",
        "waiver-compensating_measures": "manual review",
        "waiver-expires_on": (date.today() + timedelta(days=30)).isoformat(),
    }
    proposer = client_for(carol)
    for changes, field, message in (
        ({"waiver-expires_on": ""}, "expires_on", "Give the date the waiver expires."),
        ({"waiver-expires_on": "2030-13-45"}, "expires_on", "Give the expiry date as YYYY-MM-DD."),
        ({"waiver-expires_on": "2000-01-01"}, "expires_on", "The expiry date 2000-01-01 has passed"),
        ({"waiver-compensating_measures": ""}, "compensating_measures", "The compensating measures is required."),
        ({"waiver-finding_keys": ["zzz"]}, "finding_keys", "has no FAIL comparison with the key 'zzz'"),
        ({"waiver-finding_keys": []}, "finding_keys", "Choose the FAIL comparisons the waiver covers."),
    ):
        response = _failed(proposer, _url("waiver", request), {**proposal, **changes}, page, "#propose-waiver")
        assert any(message in error for error in response.context["waiver_form"].errors[field]), (field, message)
    assert not Waiver.objects.exists()

    response = proposer.post(_url("waiver", request), proposal)
    assert (response.status_code, response["Location"]) == (302, page + "#waivers")
    for waiver in Waiver.objects.all():
        prefix = f"waiver-{waiver.pk}-"
        ballot = {
            prefix + "choice": "approve",
            prefix + "reason": "acceptable with manual review",
            prefix + "password": PASSWORD,
            prefix + "document_sha256": hashes(request),
        }
        url = reverse("approvals:waiver-vote", args=[waiver.pk])
        member = client_for(dave)
        response = _failed(member, url, {**ballot, prefix + "password": "x"}, page, f"#waiver-{waiver.pk}")
        assert "That password is not correct" in _text(response)
        assert response.context["waiver_rows"][0].form.errors["password"]
        for voter in (dave, frank):
            assert client_for(voter).post(url, ballot).status_code == 302
        waiver.refresh_from_db()
        assert waiver.state == "approved"
    assert "waived" in _text(client_for(dave).get(request.get_absolute_url()))
    for voter in (dave, frank):
        assert client_for(voter).post(_url("vote", request), _vote(request)).status_code == 302
    assert _refreshed(request).state == RequestState.APPROVED


def test_a_committee_member_revokes_an_approval_with_a_reason(
    fair_trial_request: ReviewRequest, carol: User, dave: User, frank: User
) -> None:
    request = approved(fair_trial_request, carol, [dave, frank])
    member = client_for(dave)
    response = _failed(member, _url("revoke", request), {"revoke-reason": ""}, request.get_absolute_url(), "#revoke")
    assert response.context["revoke_form"].errors["reason"] == ["The reason is required."]
    assert client_for(carol).post(_url("revoke", request), {"revoke-reason": "no"}).status_code == 403
    response = client_for(dave).post(_url("revoke", request), {"revoke-reason": "drift found in production"})
    assert response.status_code == 302
    request = _refreshed(request)
    assert (request.state, request.revoked_reason) == (RequestState.REVOKED, "drift found in production")
    assert "Approval revoked" in _text(client_for(carol).get(request.get_absolute_url()))


def test_the_timeline_lists_every_event_of_the_request(
    fair_trial_request: ReviewRequest, carol: User, dave: User, frank: User
) -> None:
    request = approved(fair_trial_request, carol, [dave, frank])
    html = client_for(carol).get(request.get_absolute_url()).content.decode()
    timeline = html[html.index('id="timeline"') :]
    verbs = re.findall(r'data-verb="([^"]+)"', timeline)
    assert verbs == list(
        Event.objects.filter(target_type="approvals.reviewrequest", target_id=str(request.pk))
        .order_by("seq")
        .values_list("verb", flat=True)
    )
    assert verbs[0] == Verb.REVIEW_REQUEST_CREATED
    assert Verb.REVIEW_REQUEST_APPROVED in verbs
