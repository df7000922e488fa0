"""The review-request API: one endpoint per operation, errors as 400/403/404 with the service's words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from django.urls import reverse

from auditportal.accounts.models import User
from auditportal.approvals.models import RequestState, ReviewRequest
from auditportal.fairness.documents.findings import INCONCLUSIVE
from tests.approvals.conftest import hashes, keys
from tests.factories import PASSWORD, client_for


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
