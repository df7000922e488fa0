"""Issue 29's walk, end to end: two models approved by the committee, promoted A then B over the API
into a deployment with a webhook registered, production batches of B posted over HTTP with a
monitoring token to a live server, counted and judged by a real Celery worker; B's breach suspends it
and rolls the deployment back to A, which the deployment API and the gate answer, a real HTTP server on
loopback receives the signed webhook (checked here as a receiver would, not with the portal's code),
a real SMTP server on loopback receives the mail, and the activity log's chain verifies."""

from __future__ import annotations

import email
import email.policy
import hashlib
import hmac
import io
import json
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
import requests
from aiosmtpd.controller import Controller
from django.core.management import call_command

from auditportal.accounts import services as account_services
from auditportal.accounts.models import TokenScope, User
from auditportal.activity.models import Event, Verb
from auditportal.approvals.models import RequestState
from auditportal.monitoring.models import Incident, PredictionBatch
from tests.monitoring.conftest import Approve
from tests.monitoring.test_webhooks import Receiver
from tests.pipelines.test_example import Member
from tests.worker import start_worker_fixture  # noqa: F401 (the start_worker fixture)

pytestmark = [pytest.mark.slow, pytest.mark.uses_database, pytest.mark.django_db(transaction=True)]

NAME = "credit-scoring/prod"
API = f"/api/v1/deployments/{NAME}/"
WAIT_SECONDS = 90


class Inbox:
    """A real SMTP server's mailbox (aiosmtpd on 127.0.0.1)."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Message]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self.messages.append((list(envelope.rcpt_tos), message))
        return "250 OK"

    def about(self, words: str) -> list[tuple[list[str], Message]]:
        return [(to, message) for to, message in self.messages if words in str(message["Subject"])]


@pytest.fixture
def inbox() -> Iterator[tuple[Inbox, int]]:
    handler = Inbox()
    with socket.socket() as probe:  # a free port (the controller connects to check it, so not 0)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    yield handler, port
    controller.stop()


def signature_ok(secret: str, body: bytes, header: str, tolerance: int = 300) -> bool:
    """docs/monitoring.md's receiver check, written out here rather than imported from the portal."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    if not fields.get("t", "").isdigit() or "v1" not in fields:
        return False
    if abs(time.time() - int(fields["t"])) > tolerance:
        return False
    expected = hmac.new(secret.encode(), fields["t"].encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, fields["v1"])


def until(what: str, check: Callable[[], Any], *, log: Path | None = None, every: float = 0.05) -> Any:
    """Wait for ``check`` to return something, looking ``every`` seconds (longer for a check that
    costs the portal a request, so as not to take the worker's CPU)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(every)
    tail = log.read_text(errors="replace")[-4000:] if log is not None and log.exists() else ""
    raise AssertionError(f"waited {WAIT_SECONDS} s for {what}\n{tail}")


def breaching_csv() -> io.BytesIO:
    """One hour of B's predictions: women's false rejections 60 of 160 qualified (37.5%, limit 5%),
    men's 3 of 153; 575 rows, every group above the smallest judged."""
    lines = ["pred,gender,label"]
    for gender, cells in (
        ("f", {"tp": 100, "fn": 60, "fp": 10, "tn": 100}),
        ("m", {"tp": 150, "fn": 3, "fp": 12, "tn": 140}),
    ):
        for cell, count in cells.items():
            pred, label = {"tp": (1, 1), "fn": (0, 1), "fp": (1, 0), "tn": (0, 0)}[cell]
            lines += [f"{pred},{gender},{label}"] * count
    data = io.BytesIO(("\n".join(lines) + "\n").encode())
    data.name = "hour-1.csv"
    return data


def test_a_breach_posted_over_http_suspends_b_rolls_back_to_a_signs_a_webhook_mails_and_the_chain_holds(
    live_server: Any,
    approve: Approve,
    bob: User,
    erin: User,
    dave: User,
    frank: User,
    inbox: tuple[Inbox, int],
    tmp_path: Path,
    start_worker: Callable[..., subprocess.Popen[bytes]],
) -> None:
    mailbox, smtp_port = inbox
    base = live_server.url
    earlier, later = approve("credit:3"), approve("credit:4")
    engineer, admin = Member(base, bob.username), Member(base, erin.username)
    engineer.post("/api/v1/deployments/", {"name": NAME, "description": "Loan pre-screening", "model": "credit:3"})
    engineer.post(f"{API}-/promote/", {"model": "credit:4", "reason": "Retrained on 2026 applications"})
    assert engineer.get(API)["model"] == "credit:4"
    with Receiver() as receiver:
        hook = admin.post(f"{API}-/webhooks/", {"url": receiver.url, "description": "rollout controller"})
        secret = hook["secret"]
        assert secret.startswith("whsec_")

        worker = start_worker(EMAIL_BACKEND="smtp", EMAIL_HOST="127.0.0.1", EMAIL_PORT=str(smtp_port))
        log = tmp_path / "worker-0.log"
        pipeline = account_services.api_token_create(
            user=erin, account="scoring-service", name="scoring", days=1, scope=TokenScope.MONITORING
        ).secret
        posted = requests.post(
            f"{base}{API}-/batches/",
            headers={"Authorization": f"Token {pipeline}"},
            data={"batch_id": "2026-12-07T08", "prediction": "pred", "label": "label"},
            files={"file": ("hour-1.csv", breaching_csv(), "text/csv")},
            timeout=30,
        )
        assert posted.status_code == 202, posted.text
        assert posted.json()["model"] == "credit:4"

        # The deployment API, polled as a rollout controller polls it (the monitoring token reads it too).
        def rolled_back() -> dict[str, Any] | None:
            answer = requests.get(f"{base}{API}", headers={"Authorization": f"Token {pipeline}"}, timeout=30)
            assert answer.status_code == 200, answer.text
            status: dict[str, Any] = answer.json()
            return status if status["state"] != "serving" else None

        status = until("the deployment to leave 'serving'", rolled_back, log=log, every=0.2)
        assert worker.poll() is None, log.read_text(errors="replace")[-4000:]
        incident = Incident.objects.get(model_identifier="credit:4")
        assert (status["model"], status["state"], status["approved"]) == ("credit:3", "rolled_back", True)
        assert status["reason"] == incident.reason
        assert "credit:4 breached its monitor in credit-scoring/prod" in status["reason"]
        assert "fnr of group 'f'" in status["reason"]
        assert incident.document is not None
        assert incident.document["attributes"] == ["gender"]
        assert status["review_request"] == earlier.pk
        assert [p["model"] for p in status["previous"][:2]] == ["credit:4", "credit:3"]
        later.refresh_from_db()
        earlier.refresh_from_db()
        assert (later.state, earlier.state) == (RequestState.SUSPENDED, RequestState.APPROVED)
        batch = engineer.get(f"{API}-/batches/2026-12-07T08/")
        assert (batch["state"], batch["rows"]) == ("counted", 575)
        assert incident.cause["batches"] == list(
            PredictionBatch.objects.filter(batch_id="2026-12-07T08").values_list("pk", flat=True)
        )

        # The gate, with a gate token: B is not approved, for the suspension's reason; A still is.
        gate_token = account_services.api_token_create(user=erin, account="argo", name="gate", days=1).secret
        gate = requests.Session()
        gate.headers["Authorization"] = f"Token {gate_token}"
        b_answer = gate.get(f"{base}/api/v1/gate/", params={"model": "credit:4"}, timeout=30).json()
        assert b_answer["approved"] is False, b_answer
        assert b_answer["suspension"]["reason"] == incident.reason, b_answer
        assert incident.reason in json.dumps(b_answer, ensure_ascii=False)
        assert gate.get(f"{base}/api/v1/gate/", params={"model": "credit:3"}, timeout=30).json()["approved"] is True

        # The webhooks, signed with the secret shown once, received by the loopback server.
        def hooked() -> dict[str, tuple[dict[str, str], bytes]]:
            events = {headers.get("X-Portal-Event", ""): (headers, body) for headers, body, _ in receiver.received}
            return events if {"incident.opened", "deployment.rolled_back"} <= events.keys() else {}

        events = until("the incident's and the rollback's webhooks", hooked, log=log)
    for event, (headers, body) in events.items():
        assert signature_ok(secret, body, headers["X-Portal-Signature"]), event
        assert not signature_ok("whsec_" + "0" * 64, body, headers["X-Portal-Signature"])
        assert not signature_ok(secret, body + b" ", headers["X-Portal-Signature"])
        payload = json.loads(body)
        assert (payload["event"], payload["deployment"]) == (event, NAME)
        assert headers["X-Portal-Delivery"]
    opened = json.loads(events["incident.opened"][1])["data"]
    assert (opened["model"], opened["serving"], opened["state"]) == ("credit:4", "credit:3", "rolled_back")
    assert opened["document_sha256"] == incident.document_sha256
    assert any(b["metric"] == "fnr" and b["group"] == "f" for b in opened["breaches"])
    change = json.loads(events["deployment.rolled_back"][1])["data"]
    assert (change["model"], change["from_model"], change["incident"]) == ("credit:3", "credit:4", incident.pk)

    # The mail, on the SMTP server: each committee member and the requester, one message each.
    subject = f"Breach: credit:4 in {NAME} (incident #{incident.pk})"
    until("the incident's mail", lambda: len(mailbox.about(subject)) >= 3, log=log)
    breach_mail = mailbox.about(subject)
    assert sorted(address for to, _ in breach_mail for address in to) == sorted(
        [dave.email, frank.email, later.requested_by.email]
    )
    payload = breach_mail[0][1].get_payload(decode=True)
    assert isinstance(payload, bytes)
    body = payload.decode()
    assert incident.document_sha256 in body
    assert "fnr of gender f: interval [" in body
    assert "Serves now:       credit:3 (rolled back)" in body

    # The activity log's chain verifies, with the promotions, the suspension and the incident in it.
    verbs = set(Event.objects.values_list("verb", flat=True))
    assert {Verb.DEPLOYMENT_PROMOTED, Verb.DEPLOYMENT_ROLLED_BACK, Verb.INCIDENT_OPENED} <= verbs
    out = io.StringIO()
    call_command("verify_audit_log", stdout=out)  # raises CommandError on a broken chain
    assert f"The activity log verifies: {Event.objects.count()} events, head seq" in out.getvalue()
