"""The review-request API: one endpoint per operation, errors as 400/403/404 with the service's words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from django.urls import reverse

from auditportal.accounts.models import Role, User
from auditportal.approvals import selectors
from auditportal.approvals.models import RequestState, ReviewRequest, ReviewVote, Waiver
from auditportal.fairness.documents.findings import FAIL, INCONCLUSIVE
from tests.approvals.conftest import hashes, in_review, keys
from tests.factories import PASSWORD, client_for, make_user


def _post(
    user: User, name: str, request: ReviewRequest, body: Mapping[str, object] | None = None
) -> tuple[int, dict[str, Any]]:
    response = client_for(user).post(reverse(name, args=[request.pk]), body or {}, content_type="application/json")
    return response.status_code, response.json()


def test_a_request_goes_from_draft_to_approval_through_the_api(
    audit_request: ReviewRequest, bob: User, carol: User, dave: User, frank: User
) -> None:
    document = audit_request.documents.get()
    response = client_for(bob).post(
        reverse("api-review-requests"),
        {"title": "Second", "intended_use": "x", "documents": [document.pk], "model_identifier": "vendor-score:2.2"},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    created = ReviewRequest.objects.get(pk=response.json()["id"])
    assert _post(bob, "api-review-request-submit", created)[0] == 200
    assert _post(carol, "api-review-request-start-review", created)[0] == 200
    assert _post(carol, "api-review-request-comment", created, {"body": "Threshold?"})[0] == 201
    comment = created.comments.get()
    assert _post(bob, "api-review-request-comment", created, {"body": "0.5", "reply_to": comment.pk})[0] == 201
    vote = {
        "choice": "approve",
        "reason": "fine",
        "password": PASSWORD,
        "document_sha256": hashes(created),
        "acknowledged": keys(created, INCONCLUSIVE),
    }
    status, body = _post(dave, "api-review-request-vote", created, {**vote, "password": "nope"})
    assert (status, body["field"]) == (400, "password")
    assert _post(dave, "api-review-request-vote", created, vote)[0] == 201
    status, body = _post(frank, "api-review-request-vote", created, vote)
    assert (status, body["request"]["state"]) == (201, RequestState.APPROVED)
    detail = client_for(carol).get(reverse("api-review-request", args=[created.pk])).json()
    assert detail["state"] == "approved"
    assert detail["tally"]["approve"] == ["dave", "frank"]
    assert [c["replies"][0]["body"] for c in detail["comments"]] == ["0.5"]
    assert detail["actions"]["revoke"] is not None  # carol is a reviewer: not hers to revoke
    assert {f["verdict"] for f in detail["findings"]} == {"INCONCLUSIVE"}
    assert "password" not in str(detail["timeline"])


@pytest.mark.parametrize(
    ("who", "name", "status"),
    [("carol", "api-review-request-submit", 403), ("bob", "api-review-request-start-review", 403)],
)
def test_refusals_carry_the_services_message(
    who: str, name: str, status: int, audit_request: ReviewRequest, request: pytest.FixtureRequest
) -> None:
    user: User = request.getfixturevalue(who)
    code, body = _post(user, name, audit_request)
    assert code == status
    assert body["detail"]


def test_an_illegal_transition_is_a_400_naming_the_state(audit_request: ReviewRequest, carol: User) -> None:
    code, body = _post(carol, "api-review-request-start-review", audit_request)
    assert code == 400
    assert body["detail"].startswith(f"Review request #{audit_request.pk} is draft:")


def test_outsiders_get_404(audit_request: ReviewRequest, oscar: User) -> None:
    assert client_for(oscar).get(reverse("api-review-request", args=[audit_request.pk])).status_code == 404


def test_a_waiver_of_a_set_is_proposed_with_finding_keys_and_its_answer_lists_every_comparison(
    family_request: ReviewRequest, carol: User
) -> None:
    fails = keys(family_request, FAIL)
    body = {"reason": "explained", "compensating_measures": "manual review", "expires_on": "2099-01-01"}
    status, answer = _post(carol, "api-review-request-waiver", family_request, {**body, "finding_keys": fails})
    assert status == 201, answer
    assert [c["finding_key"] for c in answer["comparisons"]] == fails
    assert [c["group"] for c in answer["comparisons"]] == ["female", "nonbinary"]
    assert answer["comparison"] == "gender: tpr of female, nonbinary against male"
    assert answer["finding_key"] == fails[0]  # the scope's first, as before sets
    status, answer = _post(carol, "api-review-request-waiver", family_request, {**body, "finding_keys": fails[:1]})
    assert (status, answer["field"]) == (400, "finding_keys")
    assert f"waiver #{Waiver.objects.get().pk}, which covers it, is already proposed" in answer["detail"]
    detail = client_for(carol).get(reverse("api-review-request", args=[family_request.pk])).json()
    assert [f["waiver"] for f in detail["findings"] if f["verdict"] == "FAIL"] == [Waiver.objects.get().pk] * 2
    (waiver,) = detail["waivers"]
    assert len(waiver["comparisons"]) == 2


def test_one_finding_key_still_proposes_a_waiver_through_the_api(family_request: ReviewRequest, carol: User) -> None:
    key = keys(family_request, FAIL)[1]
    body = {"reason": "r", "compensating_measures": "m", "expires_on": "2099-01-01", "finding_key": key}
    status, answer = _post(carol, "api-review-request-waiver", family_request, body)
    assert status == 201, answer
    assert [c["finding_key"] for c in answer["comparisons"]] == [key]
    status, answer = _post(carol, "api-review-request-waiver", family_request, {**body, "finding_key": "nope"})
    assert (status, answer["field"]) == (400, "finding_key")


def test_acknowledge_all_stores_each_inconclusive_comparison_by_name(
    audit_request: ReviewRequest, carol: User, dave: User
) -> None:
    request = in_review(audit_request, carol)
    inconclusive = keys(request, INCONCLUSIVE)
    vote = {"choice": "approve", "reason": "fine", "password": PASSWORD, "document_sha256": hashes(request)}
    status, answer = _post(dave, "api-review-request-vote", request, vote)
    assert (status, answer["field"]) == (400, "acknowledged")
    assert f"{len(inconclusive)} INCONCLUSIVE comparison" in answer["detail"]
    status, answer = _post(
        dave, "api-review-request-vote", request, {**vote, "acknowledge_all": True, "acknowledged": inconclusive[:1]}
    )
    assert (status, answer["field"]) == (400, "acknowledged")  # one or the other
    status, answer = _post(dave, "api-review-request-vote", request, {**vote, "acknowledge_all": True})
    assert status == 201, answer
    assert sorted(answer["vote"]["acknowledged"]) == sorted(inconclusive)
    stored = ReviewVote.objects.get().acknowledgements.order_by("id")
    findings = {s.finding.key: s.finding for s in selectors.review_request_findings(request=request)}
    assert [(a.finding_key, a.positives_needed) for a in stored] == [
        (key, findings[key].positives_needed) for key in inconclusive
    ]


def test_the_tally_warns_when_the_quorum_cannot_be_reached(audit_request: ReviewRequest, carol: User) -> None:
    lone = make_user("lena", [Role.ETHICS_COMMITTEE])
    gone = make_user("gus", [Role.ETHICS_COMMITTEE])
    gone.is_active = False
    gone.save(update_fields=["is_active"])
    request = in_review(audit_request, carol)
    tally = client_for(carol).get(reverse("api-review-request", args=[request.pk])).json()["tally"]
    assert tally["eligible"] == ["lena"]
    assert tally["quorum_warning"] == (
        "The quorum cannot be reached: 2 approving committee members are needed and only 1 member may vote (lena). "
        "Other committee members cannot: gus (account deactivated). An administrator grants the committee role to "
        "a member who had no part in this request, or a loosening of the quorum is confirmed by a second "
        "administrator."
    )
    make_user("mia", [Role.ETHICS_COMMITTEE])
    tally = client_for(lone).get(reverse("api-review-request", args=[request.pk])).json()["tally"]
    assert tally["quorum_warning"] is None
