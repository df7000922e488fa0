"""Mail through a real SMTP server on loopback (aiosmtpd): committee members on submission, the
requester on each decision; sent by the approvals' mail tasks, which the outbox hands to the broker
only once the transaction commits (worker_runs plays the worker)."""

from __future__ import annotations

import email
import email.policy
import socket
from collections.abc import Iterator
from email.message import Message
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import Role, User
from auditportal.approvals import notifications, services
from auditportal.approvals.models import ReviewRequest
from tests.approvals.conftest import in_review, vote, worker_runs
from tests.factories import make_user


class Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Message]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(
            (list(envelope.rcpt_tos), email.message_from_bytes(envelope.content, policy=email.policy.default))
        )
        return "250 OK"

    def to(self, address: str) -> list[Message]:
        return [message for recipients, message in self.messages if address in recipients]


@pytest.fixture
def inbox(settings: SettingsWrapper) -> Iterator[Inbox]:
    handler = Inbox()
    with socket.socket() as probe:  # a free port (the controller checks it can connect, so not 0)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = port
    settings.EMAIL_USE_TLS = False
    settings.PORTAL_BASE_URL = "https://portal.example"
    yield handler
    controller.stop()


def _body(message: Message) -> str:
    payload = message.get_payload(decode=True)
    assert isinstance(payload, bytes)
    return payload.decode()


def test_submission_mails_each_committee_member_who_may_vote_and_only_after_commit(
    audit_request: ReviewRequest, inbox: Inbox, dave: User, frank: User, django_capture_on_commit_callbacks
) -> None:
    make_user("nomail", [Role.ETHICS_COMMITTEE]).__class__.objects.filter(username="nomail").update(email="")
    requester_on_committee = audit_request.requested_by
    from auditportal.accounts.services import role_grant

    role_grant(user=requester_on_committee, role=Role.ETHICS_COMMITTEE, granted_by=None)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        services.review_request_submit(user=audit_request.requested_by, request=audit_request)
    assert worker_runs(services.MAIL_SUBMITTED_TASK) == []  # nothing before the commit
    assert inbox.messages == []
    for callback in callbacks:
        callback()
    assert worker_runs(services.MAIL_SUBMITTED_TASK) == [2]
    assert sorted(address for recipients, _ in inbox.messages for address in recipients) == [
        "dave@example.org",
        "frank@example.org",
    ]  # not the requester (they may not vote), not a member without an address; one message each
    message = inbox.to("dave@example.org")[0]
    assert message["Subject"] == f"[Bias audit] Review request #{audit_request.pk} submitted: Vendor scoring model"
    body = _body(message)
    assert "vendor-score:2.1" in body
    assert f"https://portal.example/approvals/{audit_request.pk}/" in body
    assert audit_request.documents.get().sha256 in body


def test_the_requester_hears_of_changes_requested_and_of_the_decision(
    audit_request: ReviewRequest,
    inbox: Inbox,
    carol: User,
    dave: User,
    frank: User,
    django_capture_on_commit_callbacks,
) -> None:
    request = in_review(audit_request, carol)
    with django_capture_on_commit_callbacks(execute=True):
        services.review_request_request_changes(user=carol, request=request, reason="Name the decision threshold.")
    request = in_review(request, carol)
    vote(request, dave)
    with django_capture_on_commit_callbacks(execute=True):
        vote(request, frank)
    assert worker_runs(services.MAIL_DECIDED_TASK) == [1, 1]
    subjects = [message["Subject"] for message in inbox.to("bob@example.org")]
    assert subjects == [
        f"[Bias audit] Review request #{request.pk} changes requested: Vendor scoring model",
        f"[Bias audit] Review request #{request.pk} approved: Vendor scoring model",
    ]
    changes, decision = inbox.to("bob@example.org")
    assert "carol: Name the decision threshold." in _body(changes)
    assert "dave: approve — fit for the stated use" in _body(decision)
    assert "Quorum: 2 committee members." in _body(decision)


def test_a_mail_server_that_is_down_does_not_undo_the_decision(
    audit_request: ReviewRequest, settings: SettingsWrapper, django_capture_on_commit_callbacks, dave: User
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 1, 2
    with django_capture_on_commit_callbacks(execute=True):
        services.review_request_submit(user=audit_request.requested_by, request=audit_request)
    audit_request.refresh_from_db()
    assert audit_request.state == "submitted"
    assert worker_runs(services.MAIL_SUBMITTED_TASK) == [0]  # logged; the task does not fail
    assert notifications.request_submitted(request_id=audit_request.pk) == 0
