"""Webhooks: administrators register URLs per deployment; every promotion, rollback, suspension and
incident is posted to each active one, signed, by a Celery task that retries with backoff and logs
each answer (docs/monitoring.md, "Webhooks"). lib/webhooks signs and posts.

A delivery row and its task are written in the transaction of the change they tell of (the outbox):
nobody hears of a change that rolled back, and a committed one is posted even if the broker was down.
Delivery is at least once: a receiver deduplicates on the body's ``id``.
"""

from __future__ import annotations

import secrets
import urllib.parse
import uuid
from enum import Enum
from typing import Any, Final

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.fairness.documents.canonical import canonical_json
from auditportal.lib import webhooks as http
from auditportal.monitoring import rules
from auditportal.monitoring.models import (
    Deployment,
    DeploymentChange,
    WebhookDelivery,
    WebhookDeliveryStatus,
    WebhookEndpoint,
)
from auditportal.monitoring.services.common import DeploymentError, deployment_lock, text_checked
from auditportal.outbox.services import task_enqueue

WEBHOOK_DELIVER_TASK: Final = "monitoring.webhook_deliver"
# The events posted (the body's ``event``).
EVENTS: Final = ("deployment.promoted", "deployment.rolled_back", "deployment.suspended", "incident.opened")
MAX_URL: Final = 2000
MAX_DESCRIPTION: Final = 200
# Seconds a receiver has to answer each socket operation of an attempt.
TIMEOUT_SECONDS: Final = 10.0
# Attempts in all (the first and its retries); the delay before retry k (1, 2, ...) is
# RETRY_BASE_SECONDS * 2 ** (k - 1), at most RETRY_MAX_SECONDS: 30 s, 1, 2, 4, 8, 16, 32 min...
MAX_ATTEMPTS: Final = 8
RETRY_BASE_SECONDS: Final = 30
RETRY_MAX_SECONDS: Final = 3600


class WebhookError(DeploymentError):
    """A webhook registration that cannot be; ``field`` names the value."""


class Attempt(Enum):
    DELIVERED = "delivered"
    RETRY = "retry"  # no answer, a 5xx, 408 or 429: tried again later
    FAILED = "failed"  # refused for good (another status), or the last attempt failed
    SKIPPED = "skipped"  # delivered or failed already, or the endpoint was deactivated


def retry_delay(retry: int) -> int:
    """Seconds before retry ``retry`` (1 for the first retry): exponential, capped."""
    return int(min(RETRY_BASE_SECONDS * 2 ** max(retry - 1, 0), RETRY_MAX_SECONDS))


def url_problem(url: object) -> str | None:
    """Why ``url`` cannot be a webhook's URL, or None: absolute http(s) with a host, no user or
    password in it, no whitespace or control characters, at most MAX_URL characters."""
    if not isinstance(url, str) or not url.strip():
        return "Give the URL to post to (https://...)."
    if len(url) > MAX_URL:
        return f"A webhook URL is at most {MAX_URL} characters, not {len(url)}."
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        return "A webhook URL cannot contain spaces or control characters."
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"{url!r} is not a URL: {exc}."
    if parts.scheme.lower() not in ("http", "https"):
        return f"A webhook URL must start with https:// or http://, not {parts.scheme or 'nothing'}:."
    if not parts.hostname:
        return "A webhook URL must name a host (https://host/path)."
    if parts.username is not None or parts.password is not None:
        return "A webhook URL cannot carry a user or password: the signature authenticates the portal."
    if port == 0:
        return "A webhook URL cannot use port 0."
    return None


def webhook_register(
    *, deployment: Deployment, user: User, url: str, description: str = ""
) -> tuple[WebhookEndpoint, str]:
    """A new active endpoint of ``deployment`` (administrators) and its signing secret, which is
    returned here once and never shown again."""
    rules.check_manage_webhooks(user)
    problem = url_problem(url)
    if problem is not None:
        raise WebhookError(problem, field="url")
    description = text_checked(description, "description", required=False, error=WebhookError)
    if len(description) > MAX_DESCRIPTION:
        raise WebhookError(
            f"The description is longer than {MAX_DESCRIPTION} characters ({len(description)}): shorten it.",
            field="description",
        )
    secret = "whsec_" + secrets.token_hex(32)
    with transaction.atomic():
        deployment = deployment_lock(deployment=deployment)
        endpoint = WebhookEndpoint.objects.create(
            deployment=deployment, url=url, secret=secret, description=description, created_by=user
        )
        event_record(
            actor=user,
            verb=Verb.WEBHOOK_REGISTERED,
            target=endpoint,
            data={"deployment": deployment.name, "webhook": endpoint.pk, "url": url, "description": description},
        )
    return endpoint, secret


def webhook_deactivate(*, endpoint: WebhookEndpoint, user: User) -> WebhookEndpoint:
    """``endpoint`` is posted nothing more (administrators); its log stays. Deactivated once."""
    rules.check_manage_webhooks(user)
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().select_related("deployment").get(pk=endpoint.pk)
        if not endpoint.active:
            raise WebhookError(f"Webhook #{endpoint.pk} is deactivated already.", field="active")
        endpoint.active = False
        endpoint.deactivated_by = user
        endpoint.deactivated_at = timezone.now()
        endpoint.save(update_fields=["active", "deactivated_by", "deactivated_at"])
        event_record(
            actor=user,
            verb=Verb.WEBHOOK_DEACTIVATED,
            target=endpoint,
            data={"deployment": endpoint.deployment.name, "webhook": endpoint.pk, "url": endpoint.url},
        )
    return endpoint


def webhook_event_queue(*, deployment: Deployment, event: str, data: dict[str, Any]) -> list[WebhookDelivery]:
    """Post ``event`` with ``data`` to each active endpoint of ``deployment`` once the caller's
    transaction commits (call inside it). The body is canonical JSON:
    ``{"id", "event", "deployment", "created_at", "data"}``."""
    if event not in EVENTS:
        raise ValueError(f"{event!r} is not a webhook event ({', '.join(EVENTS)})")
    deliveries = []
    for endpoint in WebhookEndpoint.objects.filter(deployment=deployment, active=True).order_by("pk"):
        body = {
            "id": uuid.uuid4().hex,
            "event": event,
            "deployment": deployment.name,
            "created_at": timezone.now().isoformat(),
            "data": data,
        }
        delivery = WebhookDelivery.objects.create(endpoint=endpoint, event=event, body=canonical_json(body).decode())
        task_enqueue(name=WEBHOOK_DELIVER_TASK, args=[delivery.pk])
        deliveries.append(delivery)
    return deliveries


def webhook_delivery_attempt(*, delivery_id: int) -> Attempt:
    """One attempt at a pending delivery, signed now; its answer logged on the row. The MAX_ATTEMPTS-th
    is the last (counted on the row, so a task delivered twice cannot post more): a failure that
    could be retried is final there. The delivery task calls it."""
    delivery = WebhookDelivery.objects.select_related("endpoint").get(pk=delivery_id)
    endpoint = delivery.endpoint
    if delivery.status != WebhookDeliveryStatus.PENDING:
        return Attempt.SKIPPED
    if not endpoint.active:
        WebhookDelivery.objects.filter(pk=delivery.pk, status=WebhookDeliveryStatus.PENDING).update(
            status=WebhookDeliveryStatus.FAILED, error="the endpoint was deactivated before delivery"
        )
        return Attempt.SKIPPED
    body = delivery.body.encode()
    headers = {
        http.SIGNATURE_HEADER: http.signature_header(secret=endpoint.secret, body=body),
        http.EVENT_HEADER: delivery.event,
        http.DELIVERY_HEADER: str(delivery.pk),
        "User-Agent": "auditportal-webhooks/1",
    }
    code: int | None = None
    head = error = ""
    try:
        answer = http.post(url=endpoint.url, body=body, headers=headers, timeout=TIMEOUT_SECONDS)
        code, head = answer.status, answer.body_head
    except (OSError, ValueError) as exc:  # refused, timed out, TLS, a URL urllib cannot open
        error = f"{type(exc).__name__}: {exc}"[:1000]
    if code is not None and 200 <= code < 300:
        outcome = Attempt.DELIVERED
    elif code is None or code >= 500 or code in (408, 429):
        outcome = Attempt.FAILED if delivery.attempts + 1 >= MAX_ATTEMPTS else Attempt.RETRY
    else:
        outcome = Attempt.FAILED
    now = timezone.now()
    status = {
        Attempt.DELIVERED: WebhookDeliveryStatus.DELIVERED,
        Attempt.RETRY: WebhookDeliveryStatus.PENDING,
        Attempt.FAILED: WebhookDeliveryStatus.FAILED,
    }[outcome]
    delivery.attempts += 1
    delivery.status = status
    delivery.response_code = code
    delivery.response_body_head = head
    delivery.error = error
    delivery.last_attempt_at = now
    delivery.delivered_at = now if outcome is Attempt.DELIVERED else None
    delivery.save(
        update_fields=[
            "attempts",
            "status",
            "response_code",
            "response_body_head",
            "error",
            "last_attempt_at",
            "delivered_at",
        ]
    )
    return outcome


def change_data(deployment: Deployment, change: DeploymentChange) -> dict[str, Any]:
    """A deployment change as a webhook's ``data``: what serves now (null: nothing may) and why."""
    return {
        "change": change.seq,
        "kind": change.kind,
        "state": deployment.state,
        "model": change.model_identifier or None,
        "from_model": change.from_model or None,
        "review_request": change.review_request_id,
        "reason": change.reason,
        "cause": change.cause,
        "incident": change.incident_id,
        "at": change.at.isoformat(),
        "status_url": f"{settings.PORTAL_BASE_URL}/api/v1/deployments/{deployment.name}/",
    }
