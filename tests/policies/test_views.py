"""The /policy/ page and /api/v1/policy/."""

from __future__ import annotations

import pytest
from django.urls import reverse

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.policies.models import FairnessPolicy
from auditportal.policies.selectors import policy_active
from tests.factories import client_for
from tests.policies.helpers import SECOND_ADMIN, policy_change

API = "/api/v1/policy/"
NEEDS_TPR = "the metrics must include tpr: trial verdicts judge recall (the trainer's EOD)"


def _form(**changes: object) -> dict[str, object]:
    return {
        "tolerance": "0.1",
        "alpha": "0.05",
        "metrics": ["tpr", "fpr", "equalized_odds", "selection_rate", "ppv"],
        "min_group_size": "",
        "approval_quorum": "2",
        "reason": "Board decision",
        **changes,
    }


@pytest.mark.django_db  # the member comes from a fixture fetched by name
@pytest.mark.parametrize("name", ["alice", "bob", "carol", "dave", "erin"])
def test_every_member_sees_the_history_and_the_nav_link(name: str, request: pytest.FixtureRequest) -> None:
    user: User = request.getfixturevalue(name)
    response = client_for(user).get(reverse("policies:page"))
    assert response.status_code == 200
    html = response.content.decode()
    assert '<a href="/policy/">Fairness policy</a>' in html
    assert 'data-version="1" class="active"' in html
    assert "Seeded from FAIRNESS_TOLERANCE and FAIRNESS_ALPHA at the first migrate." in html
    assert ('id="policy-form"' in html) == (name == "erin")


def test_an_outsider_is_refused(oscar: User) -> None:
    assert client_for(oscar).get(reverse("policies:page")).status_code == 403
    assert client_for(oscar).get(API).status_code == 403


def test_an_administrator_creates_the_next_version_through_the_form(erin: User) -> None:
    client = client_for(erin)
    form = client.get(reverse("policies:page")).context["form"]
    assert form["tolerance"].value() == 0.05  # starts from the active version
    response = client.post(reverse("policies:page"), _form(tolerance="0.04", min_group_size="25"))
    assert response.status_code == 302
    policy = policy_active()
    assert (policy.version, policy.tolerance, policy.min_group_size) == (2, 0.04, 25)
    html = client.get(reverse("policies:page")).content.decode()
    assert "Fairness policy version 2 is active; later verdicts use it." in html
    assert 'data-version="2" class="active"' in html


@pytest.mark.django_db  # the member comes from a fixture fetched by name
@pytest.mark.parametrize("name", ["alice", "bob", "carol", "dave"])
def test_a_member_who_is_not_an_administrator_cannot_post_the_form(name: str, request: pytest.FixtureRequest) -> None:
    user: User = request.getfixturevalue(name)
    response = client_for(user).post(reverse("policies:page"), _form())
    assert response.status_code == 403
    assert FairnessPolicy.objects.count() == 1


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"metrics": ["fpr"]}, "metrics", NEEDS_TPR),
        ({"alpha": "0.7"}, "alpha", "alpha must be above 0 and at most 0.5, not 0.7"),
        ({"min_group_size": "0"}, "min_group_size", "the minimum group size must be a positive integer or none, not 0"),
        ({"tolerance": "0.05", "metrics": ["tpr"]}, None, "nothing changed: version 1 already has these values"),
    ],
)  # fmt: skip
def test_the_form_shows_the_services_message(
    erin: User, changes: dict[str, object], field: str | None, message: str
) -> None:
    response = client_for(erin).post(reverse("policies:page"), _form(**changes))
    assert response.status_code == 400
    form = response.context["form"]
    assert (form.errors[field] if field else form.non_field_errors()) == [message]
    assert FairnessPolicy.objects.count() == 1


def test_the_api_lists_the_active_version_and_the_history(bob: User, erin: User) -> None:
    policy_change(user=erin, tolerance=0.1, reason="looser")
    body = client_for(bob).get(API).json()
    assert body["active"]["version"] == 2
    rows = [(item["version"], item["active"], item["created_by"], item["confirmed_by"]) for item in body["history"]]
    assert rows == [(2, True, "erin", SECOND_ADMIN), (1, False, None, None)]
    assert body["history"][0]["reason"] == "looser"
    assert set(body["active"]) == {
        "version", "tolerance", "alpha", "metrics", "reference_rule", "min_group_size", "approval_quorum",
        "reason", "created_by", "confirmed_by", "proposal", "created_at", "active",
    }  # fmt: skip


def test_an_administrator_posts_the_next_version(erin: User) -> None:
    response = client_for(erin).post(
        API, {"alpha": 0.01, "min_group_size": 40, "reason": "api"}, content_type="application/json"
    )
    assert response.status_code == 201, response.content.decode()
    body = response.json()
    assert (body["version"], body["alpha"], body["tolerance"], body["min_group_size"], body["active"]) == (
        2, 0.01, 0.05, 40, True,
    )  # fmt: skip
    assert Event.objects.filter(verb=Verb.FAIRNESS_POLICY_CREATED, actor=erin).count() == 1


def test_an_administrator_changes_the_approval_quorum_through_the_form_and_the_api(erin: User) -> None:
    client = client_for(erin)
    assert client.get(reverse("policies:page")).context["form"]["approval_quorum"].value() == 2
    response = client.post(reverse("policies:page"), _form(tolerance="0.05", approval_quorum="3"))
    assert response.status_code == 302
    assert (policy_active().version, policy_active().approval_quorum) == (2, 3)
    assert 'id="approval-quorum">3 distinct' in client.get(reverse("policies:page")).content.decode()
    response = client.post(API, {"approval_quorum": 0, "reason": "x"}, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["field"] == "approval_quorum"
    response = client.post(API, {"approval_quorum": 4, "reason": "four"}, content_type="application/json")
    assert (response.status_code, response.json()["approval_quorum"]) == (201, 4)


def test_the_api_answers_a_bad_value_with_400_naming_the_field(erin: User) -> None:
    response = client_for(erin).post(API, {"tolerance": 1, "reason": "x"}, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {
        "detail": "the tolerance δ must be at least 0 and below 1, not 1.0",
        "field": "tolerance",
    }
    response = client_for(erin).post(API, {"tolerance": 0.2}, content_type="application/json")
    assert response.status_code == 400
    assert "reason" in response.json()


@pytest.mark.django_db  # the member comes from a fixture fetched by name
@pytest.mark.parametrize("name", ["bob", "carol", "dave"])
def test_the_api_refuses_a_member_who_is_not_an_administrator(name: str, request: pytest.FixtureRequest) -> None:
    user: User = request.getfixturevalue(name)
    response = client_for(user).post(API, {"tolerance": 0.2, "reason": "x"}, content_type="application/json")
    assert response.status_code == 403
    assert response.json()["detail"] == "Only an administrator can change the fairness policy."
    assert FairnessPolicy.objects.count() == 1
