"""Webhooks: administrators register http(s) URLs per deployment (the secret shown once); each change
is posted to each active endpoint, signed (X-Portal-Signature: t=..,v1=HMAC-SHA256 of "t.body"), by a
task that retries with exponential backoff on no answer or a 5xx, follows no redirect, and logs each
answer. Checked against a real HTTP server on loopback."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.lib import webhooks as http
from auditportal.monitoring import services
from auditportal.monitoring import tasks as monitoring_tasks
from auditportal.monitoring.models import Deployment, WebhookDelivery, WebhookDeliveryStatus, WebhookEndpoint
from auditportal.monitoring.services import webhooks
from auditportal.outbox.models import OutboxMessage
from tests.loopback import LoopbackServer
from tests.monitoring.breaching import breaching_look
from tests.monitoring.conftest import Approve

pytestmark = pytest.mark.django_db


class Receiver:
    """A webhook receiver on 127.0.0.1 answering each POST with the next of ``answers`` (then 200)."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes, float]] = []
        self.answers: list[tuple[int, dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append((dict(self.headers.items()), body, time.time()))
                status, headers, answer = receiver.answers.pop(0) if receiver.answers else (200, {}, b"ok")
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.loopback = LoopbackServer(Handler)
        self.url = f"{self.loopback.base_url}/hooks/portal"

    def __enter__(self) -> Receiver:
        self.loopback.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.loopback.stop()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


@pytest.fixture(autouse=True)
def countdowns(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The delays the delivery task asked for before each retry."""
    asked: list[int] = []
    real = webhooks.retry_delay

    def recorded(retry: int) -> int:
        asked.append(real(retry))
        return asked[-1]

    monkeypatch.setattr(webhooks, "retry_delay", recorded)
    return asked


def _deliver(delivery: WebhookDelivery) -> str:
    """Run the delivery task as a worker would (in apply(), Celery runs each retry at once)."""
    return str(monitoring_tasks.webhook_deliver_task.apply(args=[delivery.pk]).get())


def test_an_administrator_registers_an_endpoint_and_sees_its_secret_once(deployment: Deployment, erin: User) -> None:
    endpoint, secret = services.webhook_register(
        deployment=deployment, user=erin, url="https://rollouts.example/hooks", description="Argo"
    )
    assert secret.startswith("whsec_")
    assert len(secret) == 6 + 64
    assert (endpoint.active, endpoint.created_by, endpoint.url) == (True, erin, "https://rollouts.example/hooks")
    event = Event.objects.get(verb=Verb.WEBHOOK_REGISTERED)
    assert event.data == {
        "deployment": "credit-scoring/prod",
        "webhook": endpoint.pk,
        "url": "https://rollouts.example/hooks",
        "description": "Argo",
    }
    assert secret not in json.dumps(event.data)
    services.webhook_deactivate(endpoint=endpoint, user=erin)
    endpoint.refresh_from_db()
    assert endpoint.active is False
    assert endpoint.deactivated_by == erin
    assert Event.objects.filter(verb=Verb.WEBHOOK_DEACTIVATED).count() == 1
    with pytest.raises(services.WebhookError, match="deactivated already"):
        services.webhook_deactivate(endpoint=endpoint, user=erin)


def test_only_an_administrator_manages_webhooks(deployment: Deployment, bob: User) -> None:
    with pytest.raises(PermissionDenied, match="Only an administrator"):
        services.webhook_register(deployment=deployment, user=bob, url="https://rollouts.example/hooks")
    assert WebhookEndpoint.objects.count() == 0


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("ftp://rollouts.example/hooks", "must start with https:// or http://, not ftp:"),
        ("file:///etc/passwd", "must start with https:// or http://, not file:"),
        ("javascript:alert(1)", "not javascript:"),
        ("https:///hooks", "must name a host"),
        ("https://user:pw@rollouts.example/", "cannot carry a user or password"),
        ("https://rollouts.example/a b", "spaces or control characters"),
        ("https://rollouts.example:99999/", "is not a URL"),
        ("", "Give the URL"),
        ("https://x.example/" + "a" * 2000, "at most 2000 characters"),
    ],
)
def test_a_url_that_is_not_http_is_refused_naming_the_field(
    deployment: Deployment, erin: User, url: str, error: str
) -> None:
    with pytest.raises(services.WebhookError, match=error) as refused:
        services.webhook_register(deployment=deployment, user=erin, url=url)
    assert refused.value.field == "url"
    assert WebhookEndpoint.objects.count() == 0


def test_a_breach_posts_signed_events_to_each_active_endpoint_after_the_commit(
    deployment: Deployment,
    approve: Approve,
    bob: User,
    erin: User,
    receiver: Receiver,
    django_capture_on_commit_callbacks: Any,
) -> None:
    approve("credit:3")
    approve("credit:4")
    services.deployment_promote(deployment=deployment, model_identifier="credit:3", by=bob)
    endpoint, secret = services.webhook_register(deployment=deployment, user=erin, url=receiver.url)
    gone, _ = services.webhook_register(deployment=deployment, user=erin, url=receiver.url + "/old")
    services.webhook_deactivate(endpoint=gone, user=erin)
    services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob)
    with django_capture_on_commit_callbacks(execute=False):
        incident = services.breach_confirm(
            deployment=deployment, model_identifier="credit:4", judgement=breaching_look(), batch_ids=[5], look_id=2
        )
    assert incident is not None
    deliveries = list(WebhookDelivery.objects.order_by("pk"))
    assert [(d.endpoint, d.event) for d in deliveries] == [
        (endpoint, "deployment.promoted"),
        (endpoint, "deployment.rolled_back"),
        (endpoint, "incident.opened"),
    ]
    assert OutboxMessage.objects.filter(name=webhooks.WEBHOOK_DELIVER_TASK).count() == 3
    for delivery in deliveries:
        assert _deliver(delivery) == "delivered"
    assert len(receiver.received) == 3
    for (headers, body, at), delivery in zip(receiver.received, deliveries, strict=True):
        assert body == delivery.body.encode()
        t, v1 = (part.split("=", 1)[1] for part in headers[http.SIGNATURE_HEADER].split(","))
        assert abs(int(t) - at) <= 2
        assert v1 == http.signature(secret=secret, body=body, timestamp=int(t))
        assert http.signature_verify(secret=secret, body=body, header=headers[http.SIGNATURE_HEADER])
        assert not http.signature_verify(secret="whsec_other", body=body, header=headers[http.SIGNATURE_HEADER])
        assert not http.signature_verify(secret=secret, body=body + b" ", header=headers[http.SIGNATURE_HEADER])
        assert not http.signature_verify(
            secret=secret, body=body, header=headers[http.SIGNATURE_HEADER], now=int(t) + 301
        )  # a replay six minutes later
        assert headers[http.EVENT_HEADER] == delivery.event
    rolled_back = json.loads(receiver.received[1][1])
    assert rolled_back["event"] == "deployment.rolled_back"
    assert rolled_back["deployment"] == "credit-scoring/prod"
    assert (rolled_back["data"]["model"], rolled_back["data"]["from_model"]) == ("credit:3", "credit:4")
    assert rolled_back["data"]["incident"] == incident.pk
    opened = json.loads(receiver.received[2][1])["data"]
    assert (opened["incident"], opened["serving"], opened["state"]) == (incident.pk, "credit:3", "rolled_back")
    assert opened["document_sha256"] == incident.document_sha256
    assert opened["breaches"][0]["group"] == "women"
    for delivery in deliveries:
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts, delivery.response_code, delivery.response_body_head) == (
            WebhookDeliveryStatus.DELIVERED,
            1,
            200,
            "ok",
        )
        assert delivery.delivered_at is not None


def _one_delivery(deployment: Deployment, erin: User, url: str) -> WebhookDelivery:
    services.webhook_register(deployment=deployment, user=erin, url=url)
    from django.db import transaction

    with transaction.atomic():
        [delivery] = webhooks.webhook_event_queue(
            deployment=deployment, event="deployment.suspended", data={"model": None}
        )
    return delivery


def test_a_5xx_is_retried_with_exponential_backoff_until_it_is_delivered(
    deployment: Deployment, erin: User, receiver: Receiver, countdowns: list[int]
) -> None:
    receiver.answers = [(500, {}, b"<b>down</b>"), (503, {}, b"busy"), (200, {}, b"thanks")]
    delivery = _one_delivery(deployment, erin, receiver.url)
    assert _deliver(delivery) == "delivered"
    assert countdowns == [30, 60]
    assert len(receiver.received) == 3
    signatures = [headers[http.SIGNATURE_HEADER] for headers, _, _ in receiver.received]
    assert all(
        http.signature_verify(secret=delivery.endpoint.secret, body=delivery.body.encode(), header=s)
        for s in signatures
    )
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_code, delivery.response_body_head) == (
        WebhookDeliveryStatus.DELIVERED,
        3,
        200,
        "thanks",
    )
    countdowns.clear()
    assert [webhooks.retry_delay(k) for k in range(1, 9)] == [30, 60, 120, 240, 480, 960, 1920, 3600]


def test_a_receiver_that_never_answers_well_fails_after_the_last_attempt(
    deployment: Deployment, erin: User, receiver: Receiver, countdowns: list[int]
) -> None:
    receiver.answers = [(502, {}, b"x" * 5000)] * webhooks.MAX_ATTEMPTS
    delivery = _one_delivery(deployment, erin, receiver.url)
    assert _deliver(delivery) == "failed"
    assert len(countdowns) == webhooks.MAX_ATTEMPTS - 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_code) == (
        WebhookDeliveryStatus.FAILED,
        webhooks.MAX_ATTEMPTS,
        502,
    )
    assert len(delivery.response_body_head) == http.RESPONSE_HEAD_BYTES  # only the head is kept
    assert _deliver(delivery) == "skipped"  # a late duplicate of the task posts nothing more
    assert len(receiver.received) == webhooks.MAX_ATTEMPTS


def test_a_redirect_is_not_followed_and_a_4xx_is_not_retried(
    deployment: Deployment, erin: User, receiver: Receiver
) -> None:
    receiver.answers = [(302, {"Location": receiver.url + "/elsewhere"}, b"")]
    delivery = _one_delivery(deployment, erin, receiver.url)
    assert _deliver(delivery) == "failed"
    assert [headers.get("Host") for headers, _, _ in receiver.received] == [receiver.url.split("/")[2]]
    assert len(receiver.received) == 1  # the Location was never posted to
    delivery.refresh_from_db()
    assert (delivery.status, delivery.response_code) == (WebhookDeliveryStatus.FAILED, 302)


def test_no_answer_at_all_is_retried_and_logged(deployment: Deployment, erin: User, countdowns: list[int]) -> None:
    with Receiver() as closed:
        url = closed.url
    delivery = _one_delivery(deployment, erin, url)  # nothing listens there any more
    assert webhooks.webhook_delivery_attempt(delivery_id=delivery.pk) is webhooks.Attempt.RETRY
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_code) == (WebhookDeliveryStatus.PENDING, 1, None)
    assert "Connection refused" in delivery.error
    assert _deliver(delivery) == "failed"
    assert len(countdowns) == webhooks.MAX_ATTEMPTS - 2
