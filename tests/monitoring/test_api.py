"""The deployments' API: the status a rollout controller polls (its exact shape, who may read it, with
which token), the list, creation, promotion and the monitor policy, and the errors each names."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from auditportal.accounts import services as account_services
from auditportal.accounts.models import Role, TokenScope, User
from auditportal.monitoring import services
from auditportal.monitoring.models import Deployment, DeploymentState
from tests.factories import client_for, make_user
from tests.monitoring.conftest import Approve, suspend

API = "/api/v1/deployments/"
STATUS = API + "credit-scoring/prod/"


def _token(erin: User, scope: TokenScope, account: str, role: Role | None = None) -> Client:
    secret = account_services.api_token_create(user=erin, account=account, name="rollouts", days=1, scope=scope).secret
    if role is not None:
        account_services.role_grant(user=User.objects.get(username=account), role=role, granted_by=erin)
    return Client(HTTP_AUTHORIZATION=f"Token {secret}")


def _post(client: Client, url: str, body: dict[str, Any]) -> Any:
    return client.post(url, body, content_type="application/json")


def test_the_status_says_what_serves_since_when_and_why_and_what_served_before(
    deployment: Deployment, approve: Approve, bob: User, carol: User
) -> None:
    first, second = approve("credit:3"), approve("credit:4")
    services.deployment_promote(deployment=deployment, model_identifier="credit:3", by=bob)
    services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob, reason="Better recall")
    suspend(second)
    services.deployment_rollback(deployment=deployment, reason="FNR of women above 0.05", from_model="credit:4")
    deployment.refresh_from_db()

    body = client_for(carol).get(STATUS).json()
    changes = list(deployment.changes.order_by("-seq"))
    assert body == {
        "name": "credit-scoring/prod",
        "url": STATUS,
        "description": "Loan pre-screening",
        "model": "credit:3",
        "state": "rolled_back",
        "since": deployment.since.isoformat() if deployment.since else None,
        "reason": "FNR of women above 0.05",
        "review_request": first.pk,
        "approved": True,
        "monitor_policy_version": 1,
        "previous": [
            {
                "change": "promoted",
                "model": "credit:4",
                "at": changes[1].at.isoformat(),
                "reason": "Better recall",
                "review_request": second.pk,
                "incident": None,
            },
            {
                "change": "promoted",
                "model": "credit:3",
                "at": changes[2].at.isoformat(),
                "reason": f"Promoted by bob: review request #{first.pk} approves it.",
                "review_request": first.pk,
                "incident": None,
            },
        ],
    }


def test_a_suspended_deployment_names_no_model(deployment: Deployment, approve: Approve, bob: User, dave: User) -> None:
    request = approve("credit:4")
    services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob)
    suspend(request)
    services.deployment_rollback(deployment=deployment, reason="credit:4 breached")
    body = client_for(dave).get(STATUS).json()
    assert (body["state"], body["model"], body["approved"], body["review_request"], body["reason"]) == (
        "suspended",
        None,
        None,
        None,
        "credit:4 breached",
    )
    assert [entry["model"] for entry in body["previous"]] == ["credit:4"]


def test_an_empty_deployment_says_so(deployment: Deployment, carol: User) -> None:
    body = client_for(carol).get(STATUS).json()
    assert (body["state"], body["model"], body["since"], body["previous"]) == ("empty", None, None, [])


def test_a_gate_token_and_a_monitoring_token_read_a_status_and_nothing_else_here(
    deployment: Deployment, erin: User
) -> None:
    gate = _token(erin, TokenScope.GATE, "argo-rollouts")
    monitoring = _token(erin, TokenScope.MONITORING, "scoring-service")
    for client in (gate, monitoring):
        assert client.get(STATUS).json()["state"] == "empty"
        assert client.get(API + "no/such/").status_code == 404
        assert client.get(API).status_code == 401
        assert _post(client, STATUS + "-/promote/", {"model": "credit:4"}).status_code == 401
        assert client.get(STATUS + "-/policy/").status_code == 401


def test_an_api_token_reads_with_its_accounts_roles(deployment: Deployment, erin: User, approve: Approve) -> None:
    roleless = _token(erin, TokenScope.API, "ci-bot")
    assert roleless.get(STATUS).status_code == 404
    assert roleless.get(API).status_code == 403
    engineer = _token(erin, TokenScope.API, "release-bot", Role.ML_ENGINEER)
    assert engineer.get(STATUS).status_code == 200
    approve("credit:4")
    promoted = _post(engineer, STATUS + "-/promote/", {"model": "credit:4"})
    assert promoted.status_code == 200, promoted.content
    assert (promoted.json()["state"], promoted.json()["model"]) == ("serving", "credit:4")


def test_without_a_session_or_a_token_the_status_is_401_and_an_account_without_a_role_gets_404(
    deployment: Deployment, oscar: User
) -> None:
    anonymous = Client().get(STATUS)
    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"]
    assert client_for(oscar).get(STATUS).status_code == 404


def test_an_unknown_deployment_is_a_404_that_names_it(carol: User) -> None:
    client = client_for(carol)
    response = client.get(API + "fraud/prod/")
    assert (response.status_code, response.json()) == (404, {"detail": "No deployment is named 'fraud/prod'."})
    odd = client.get(API + "Fraud%20Prod/")
    assert odd.status_code == 404
    assert odd.json()["detail"].startswith("No deployment is named 'Fraud Prod': A deployment's name is")
    assert _post(client_for(make_user("ed", [Role.ML_ENGINEER])), API + "fraud/prod/-/promote/", {}).status_code == 404


def test_the_list_is_for_members(deployment: Deployment, bob: User, oscar: User) -> None:
    services.deployment_create(user=bob, name="a-first")
    body = client_for(bob).get(API).json()
    assert body["count"] == 2
    assert [d["name"] for d in body["results"]] == ["a-first", "credit-scoring/prod"]
    assert body["results"][1] == {
        "name": "credit-scoring/prod",
        "url": STATUS,
        "description": "Loan pre-screening",
        "model": None,
        "state": "empty",
        "since": None,
        "reason": "",
        "review_request": None,
    }
    assert client_for(oscar).get(API).status_code == 403


def test_an_engineer_creates_one_and_a_bad_name_is_a_400_naming_the_field(bob: User, carol: User) -> None:
    created = _post(client_for(bob), API, {"name": "fraud/prod", "description": "Card fraud"})
    assert created.status_code == 201, created.content
    assert (created.json()["name"], created.json()["state"], created.json()["url"]) == (
        "fraud/prod",
        "empty",
        API + "fraud/prod/",
    )
    bad = _post(client_for(bob), API, {"name": "Fraud Prod"})
    assert bad.status_code == 400
    assert bad.json()["field"] == "name"
    assert "lowercase letters" in bad.json()["detail"]
    assert _post(client_for(carol), API, {"name": "fraud/staging"}).status_code == 403
    assert list(Deployment.objects.values_list("name", flat=True)) == ["fraud/prod"]


def test_a_promotion_of_a_model_that_is_not_approved_is_a_400_with_the_reason(
    deployment: Deployment, bob: User
) -> None:
    response = _post(client_for(bob), STATUS + "-/promote/", {"model": "credit:9"})
    assert response.status_code == 400
    assert response.json() == {
        "detail": "'credit:9' cannot be promoted: no review request names the model 'credit:9', so it is not approved.",
        "field": "model",
    }
    assert _post(client_for(bob), STATUS + "-/promote/", {}).json() == {"model": ["This field is required."]}
    deployment.refresh_from_db()
    assert deployment.state == DeploymentState.EMPTY


def test_a_reviewer_cannot_promote(deployment: Deployment, approve: Approve, carol: User) -> None:
    approve("credit:4")
    response = _post(client_for(carol), STATUS + "-/promote/", {"model": "credit:4"})
    assert response.status_code == 403
    assert response.json()["detail"] == "Only an ML engineer or an administrator can promote a model into a deployment."


def test_the_monitor_policy_through_the_api_with_a_second_administrator(
    deployment: Deployment, erin: User, carol: User
) -> None:
    iris = make_user("iris", [Role.ADMIN])
    policy = client_for(carol).get(STATUS + "-/policy/").json()
    assert (policy["deployment"], policy["active"]["version"], policy["proposals"]) == ("credit-scoring/prod", 1, [])
    assert policy["active"]["spec"]["limits"]["fnr"] == {"upper": 0.05, "lower": None, "gap": 0.05}

    tighter = _post(client_for(erin), STATUS + "-/policy/", {"spec": {"alpha": 0.1}, "reason": "More alarms"})
    assert tighter.status_code == 201, tighter.content
    assert (tighter.json()["version"], tighter.json()["spec"]["alpha"]) == (2, 0.1)

    looser = _post(client_for(erin), STATUS + "-/policy/", {"spec": {"share_shift": None}, "reason": "No drift"})
    assert looser.status_code == 202
    proposal = looser.json()
    assert (proposal["state"], proposal["loosens"], proposal["base_version"]) == ("pending", ["share_shift"], 2)
    confirm = f"{STATUS}-/policy/proposals/{proposal['id']}/confirm/"
    assert client_for(erin).post(confirm).status_code == 403
    confirmed = client_for(iris).post(confirm)
    assert confirmed.status_code == 200
    assert (confirmed.json()["version"], confirmed.json()["confirmed_by"]) == (3, "iris")

    bad = _post(client_for(erin), STATUS + "-/policy/", {"spec": {"limits": {"fnr": {"upper": 7}}}, "reason": "x"})
    assert (bad.status_code, bad.json()["field"]) == (400, "limits.fnr.upper")
    assert _post(client_for(carol), STATUS + "-/policy/", {"spec": {"alpha": 0.2}, "reason": "x"}).status_code == 403
    assert client_for(iris).post(f"{STATUS}-/policy/proposals/999999/withdraw/").status_code == 404


@pytest.mark.parametrize("name", ["ml", "credit-scoring/prod/eu-west-1", "a/b/c/d"])
def test_names_with_any_number_of_segments_route_to_the_deployment(bob: User, name: str) -> None:
    services.deployment_create(user=bob, name=name)
    client = client_for(bob)
    assert client.get(f"{API}{name}/").json()["name"] == name
    assert client.get(f"{API}{name}/-/policy/").json()["deployment"] == name
    assert client.get(f"/monitoring/{name}/").status_code == 200


def test_a_monitoring_tokens_account_holds_no_role(erin: User) -> None:
    make_user("scorer", [Role.ML_ENGINEER]).set_unusable_password()
    User.objects.filter(username="scorer").update(password="!")
    with pytest.raises(account_services.TokenError, match="a monitoring token's account must hold none") as refused:
        account_services.api_token_create(
            user=erin, account="scorer", name="batches", days=1, scope=TokenScope.MONITORING
        )
    assert refused.value.field == "account"


def test_after_a_breach_the_gate_and_the_deployment_answer_alike_to_the_same_gate_token(
    deployment: Deployment, approve: Approve, bob: User, erin: User
) -> None:
    approve("credit:3")
    second = approve("credit:4")
    services.deployment_promote(deployment=deployment, model_identifier="credit:3", by=bob)
    services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob)
    suspend(second, "the FNR of women rose to 0.08 against a limit of 0.05")
    services.deployment_rollback(deployment=deployment, reason="credit:4 breached its monitor", from_model="credit:4")
    rollouts = _token(erin, TokenScope.GATE, "argo-rollouts")
    gate = rollouts.get("/api/v1/gate/", {"model": "credit:4"}).json()
    assert (gate["approved"], gate["state"]) == (False, "suspended")
    assert gate["suspension"]["reason"] == "the FNR of women rose to 0.08 against a limit of 0.05"
    status = rollouts.get(STATUS).json()
    assert (status["state"], status["model"], status["reason"]) == (
        "rolled_back",
        "credit:3",
        "credit:4 breached its monitor",
    )
    assert rollouts.get("/api/v1/gate/", {"model": status["model"]}).json()["approved"] is True
