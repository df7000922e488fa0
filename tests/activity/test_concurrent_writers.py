"""Writers on their own connections at the same time append to one linear chain (no fork, no lost event)."""

from __future__ import annotations

import threading

import pytest
from django.db import connections, transaction

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.activity.selectors import chain_verify
from auditportal.activity.services import event_record
from tests.factories import make_user

WRITERS = 4
EACH = 25


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_never_fork_the_chain() -> None:
    users = [make_user(f"writer{index}") for index in range(WRITERS)]
    before = Event.objects.count()
    start = threading.Barrier(WRITERS)
    errors: list[Exception] = []

    def write(user: User) -> None:
        try:
            start.wait()
            for index in range(EACH):
                with transaction.atomic():  # one transaction per event, on this thread's own connection
                    event_record(actor=user, verb=Verb.ROLE_GRANTED, target=user, data={"i": index})
        except Exception as exc:  # reported on the main thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write, args=(user,)) for user in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    result = chain_verify()
    assert result.ok, result.first_break
    assert result.count == before + WRITERS * EACH
    assert list(Event.objects.order_by("seq").values_list("seq", flat=True)) == list(range(1, result.count + 1))
    for user in users:  # each writer's events in the order it wrote them
        written = Event.objects.filter(actor=user).order_by("seq").values_list("data__i", flat=True)
        assert list(written) == list(range(EACH))
