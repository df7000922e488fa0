"""A decision while the broker is down: the decision commits, and its report, the requester's mail and
the checkpoint's tag wait in the outbox until the broker is back (issue 25). The broker is stood in for
at the outbox's one module that talks to it; tests/outbox/test_broker_down.py stops a real Redis."""

from __future__ import annotations

from typing import Any

import pytest
from kombu.exceptions import OperationalError

from auditportal.accounts.models import User
from auditportal.approvals import services
from auditportal.approvals.models import RequestState, ReviewRequest
from auditportal.outbox import broker
from auditportal.outbox.models import OutboxMessage
from auditportal.outbox.services import outbox_deliver_pending
from tests.approvals.conftest import in_review, vote


def test_a_decision_while_the_broker_is_down_commits_and_its_work_follows_once_the_broker_is_back(
    fair_trial_request: ReviewRequest,
    carol: User,
    dave: User,
    frank: User,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    request = in_review(fair_trial_request, carol)
    vote(request, dave)
    OutboxMessage.objects.all().delete()  # the submission's mail: not what this test is about

    def down(*, name: str, args: Any, kwargs: Any) -> None:
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(broker, "publish", down)
    with django_capture_on_commit_callbacks(execute=True):
        vote(request, frank)  # the deciding vote: nothing raises after its commit
    request.refresh_from_db()
    assert request.state == RequestState.APPROVED
    waiting = list(OutboxMessage.objects.order_by("pk"))
    assert [message.name for message in waiting] == [
        services.REPORT_GENERATE_TASK,
        services.MAIL_DECIDED_TASK,
        services.TAG_CHECKPOINT_TASK,
    ]
    for message in waiting:
        assert (message.sent_at, message.attempts) == (None, 1)
        assert message.last_error.startswith("OperationalError: Error 111"), message.last_error

    handed: list[tuple[str, list[Any]]] = []
    monkeypatch.setattr(broker, "publish", lambda *, name, args, kwargs: handed.append((name, list(args))))
    assert outbox_deliver_pending() == 3  # beat's outbox.deliver, once the broker is back
    assert [name for name, _ in handed] == [message.name for message in waiting]
    report_args, mail_args, tag_args = (args for _, args in handed)
    assert report_args[1:] == [None, request.pk, True]
    assert report_args[0]["decision"]["outcome"] == "approved"
    assert mail_args == [request.pk, "review_request.approved"]
    assert tag_args == [request.pk]
    assert not OutboxMessage.objects.filter(sent_at=None).exists()
