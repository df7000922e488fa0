"""The webhook API (docs/monitoring.md, "Webhooks"): administrators register an endpoint (its secret in
that answer only), list endpoints with their latest deliveries, deactivate one and read its delivery
log; everyone else is refused."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from auditportal.accounts import services as account_services
from auditportal.accounts.models import Role, TokenScope, User
from auditportal.monitoring.models import Deployment, WebhookDelivery, WebhookEndpoint
from auditportal.monitoring.services import webhooks
from tests.factories import client_for
from tests.monitoring.test_webhooks import Receiver

pytestmark = pytest.mark.django_db

HOOKS = "/api/v1/deployments/credit-scoring/prod/-/webhooks/"
URL = "https://rollouts.example/hooks"


def _post(client: Client, url: str, body: dict[str, Any] | None = None) -> Any:
    return client.post(url, body or {}, content_type="application/json")


def _register(client: Client, url: str = URL) -> Any:
    response = _post(client, HOOKS, {"url": url, "description": "Argo"})
    assert response.status_code == 201, response.content
    return response.json()


def test_an_administrator_registers_an_endpoint_and_sees_its_secret_in_that_answer_only(
    deployment: Deployment, erin: User
) -> None:
    client = client_for(erin)
    made = _register(client)
    secret = made["secret"]
    assert secret.startswith("whsec_")
    assert len(secret) == 70
    assert (made["url"], made["active"], made["created_by"], made["recent_deliveries"]) == (URL, True, "erin", [])
    endpoint = WebhookEndpoint.objects.get(pk=made["id"])
    assert (endpoint.secret, endpoint.deployment, endpoint.created_by) == (secret, deployment, erin)

    listed = client.get(HOOKS)
    assert listed.status_code == 200
    [shown] = listed.json()
    assert shown["id"] == made["id"]
    assert "secret" not in shown
    assert secret not in listed.content.decode()
    deliveries = client.get(f"{HOOKS}{made['id']}/deliveries/")
    assert secret not in deliveries.content.decode()


def test_an_administrator_deactivates_an_endpoint_once(deployment: Deployment, erin: User) -> None:
    client = client_for(erin)
    made = _register(client)
    response = _post(client, f"{HOOKS}{made['id']}/deactivate/")
    assert response.status_code == 200, response.content
    assert (response.json()["active"], response.json()["deactivated_by"]) == (False, "erin")
    assert "secret" not in response.json()
    endpoint = WebhookEndpoint.objects.get(pk=made["id"])
    assert (endpoint.active, endpoint.deactivated_by) == (False, erin)
    again = _post(client, f"{HOOKS}{made['id']}/deactivate/")
    assert (again.status_code, again.json()) == (
        400,
        {"detail": f"Webhook #{made['id']} is deactivated already.", "field": "active"},
    )


def test_the_delivery_log_lists_each_attempts_answer_as_untrusted_text(deployment: Deployment, erin: User) -> None:
    client = client_for(erin)
    hostile = "<script>alert(1)</script>\u2028"
    with Receiver() as receiver:
        made = _register(client, receiver.url)
        receiver.answers.append((503, {"Content-Type": "text/html"}, hostile.encode()))
        [delivery] = webhooks.webhook_event_queue(deployment=deployment, event="incident.opened", data={"incident": 1})
        assert webhooks.webhook_delivery_attempt(delivery_id=delivery.pk) is webhooks.Attempt.RETRY
        assert webhooks.webhook_delivery_attempt(delivery_id=delivery.pk) is webhooks.Attempt.DELIVERED

    log = client.get(f"{HOOKS}{made['id']}/deliveries/")
    assert (log.status_code, log["Content-Type"]) == (200, "application/json")
    body = log.json()
    assert body["count"] == 1
    [row] = body["results"]
    assert (row["id"], row["event"], row["attempts"], row["status"], row["response_code"]) == (
        delivery.pk,
        "incident.opened",
        2,
        "delivered",
        200,
    )
    assert row["delivered_at"] is not None
    assert row["body"] == WebhookDelivery.objects.get().body
    [summary] = client.get(HOOKS).json()[0]["recent_deliveries"]
    assert (summary["event"], summary["attempts"], summary["status"]) == ("incident.opened", 2, "delivered")

    # The first answer, a receiver's HTML, comes back as a JSON string, exactly as received.
    WebhookDelivery.objects.filter(pk=delivery.pk).update(response_body_head=hostile)
    [row] = client.get(f"{HOOKS}{made['id']}/deliveries/").json()["results"]
    assert row["response_body_head"] == hostile


def test_the_admin_shows_a_receivers_answer_escaped(deployment: Deployment, erin: User) -> None:
    endpoint, _ = webhooks.webhook_register(deployment=deployment, user=erin, url=URL)
    delivery = WebhookDelivery.objects.create(
        endpoint=endpoint, event="incident.opened", body="{}", response_body_head="<script>alert(1)</script>"
    )
    superuser = User.objects.create_superuser(username="root", password="x" * 20)
    page = client_for(superuser).get(f"/admin/monitoring/webhookdelivery/{delivery.pk}/change/")
    assert page.status_code == 200
    assert "<script>alert(1)</script>" not in page.content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.content.decode()


def test_only_administrators_see_or_change_webhooks(deployment: Deployment, erin: User, bob: User, oscar: User) -> None:
    made = _register(client_for(erin))
    routes = [("GET", HOOKS), ("POST", HOOKS), ("POST", f"{HOOKS}{made['id']}/deactivate/")]
    routes.append(("GET", f"{HOOKS}{made['id']}/deliveries/"))
    gate = account_services.api_token_create(user=erin, account="argo", name="r", days=1).secret
    monitoring = account_services.api_token_create(
        user=erin, account="scorer", name="r", days=1, scope=TokenScope.MONITORING
    ).secret
    engineer_token = account_services.api_token_create(
        user=erin, account="release-bot", name="r", days=1, scope=TokenScope.API
    ).secret
    account_services.role_grant(user=User.objects.get(username="release-bot"), role=Role.ML_ENGINEER, granted_by=erin)
    clients = {
        "anonymous": (Client(), 401),
        "gate token": (Client(HTTP_AUTHORIZATION=f"Token {gate}"), 401),
        "monitoring token": (Client(HTTP_AUTHORIZATION=f"Token {monitoring}"), 401),
        "engineer's API token": (Client(HTTP_AUTHORIZATION=f"Token {engineer_token}"), 403),
        "ML engineer": (client_for(bob), 403),
        "no role": (client_for(oscar), 404),
    }
    for who, (client, status) in clients.items():
        for method, url in routes:
            response = client.get(url) if method == "GET" else _post(client, url, {"url": URL})
            assert response.status_code == status, (who, method, url, response.content)
            assert "whsec_" not in response.content.decode()
    refused = _post(client_for(bob), HOOKS, {"url": URL})
    assert refused.json() == {"detail": "Only an administrator can see or change a deployment's webhooks."}
    assert WebhookEndpoint.objects.filter(active=True).count() == 1


def test_an_administrators_api_token_manages_webhooks(deployment: Deployment, erin: User) -> None:
    secret = account_services.api_token_create(user=erin, account="ops-bot", name="r", days=1, scope=TokenScope.API)
    account_services.role_grant(user=User.objects.get(username="ops-bot"), role=Role.ADMIN, granted_by=erin)
    client = Client(HTTP_AUTHORIZATION=f"Token {secret.secret}")
    assert _register(client)["created_by"] == "ops-bot"
    assert client.get(HOOKS).status_code == 200


def test_a_session_write_needs_the_csrf_token(deployment: Deployment, erin: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(erin)
    response = _post(client, HOOKS, {"url": URL})
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert WebhookEndpoint.objects.count() == 0


def test_an_unknown_deployment_or_endpoint_is_a_404_naming_it(deployment: Deployment, erin: User) -> None:
    client = client_for(erin)
    missing = client.get("/api/v1/deployments/no/such/-/webhooks/")
    assert (missing.status_code, missing.json()) == (404, {"detail": "No deployment is named 'no/such'."})
    for response in (client.get(f"{HOOKS}999/deliveries/"), _post(client, f"{HOOKS}999/deactivate/")):
        assert (response.status_code, response.json()) == (404, {"detail": "credit-scoring/prod has no webhook #999."})


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"url": "ftp://rollouts.example/hooks"}, "A webhook URL must start with https:// or http://, not ftp:."),
        ({"url": "https://user:pw@rollouts.example/"}, "cannot carry a user or password"),
        ({"url": ""}, "Give the URL to post to (https://...)."),
        ({"url": " https://rollouts.example/"}, "cannot contain spaces or control characters"),
        ({}, "This field is required."),
        ({"url": ["https://rollouts.example/"]}, "Not a valid string."),
        ({"url": "https://rollouts.example/\x00"}, "Null characters are not allowed."),
    ],
)
def test_a_bad_url_is_a_400_naming_url(deployment: Deployment, erin: User, body: dict[str, Any], error: str) -> None:
    response = _post(client_for(erin), HOOKS, body)
    assert response.status_code == 400, response.content
    answer = response.json()
    # The service's refusals name the field as {"detail", "field"}; the serializer's as {field: [...]}.
    message = answer["detail"] if answer.get("field") == "url" else answer["url"][0]
    assert error in message
    assert WebhookEndpoint.objects.count() == 0
