"""The event admin is read-only, even for a superuser: no forged, changed or deleted event through it."""

from __future__ import annotations

import pytest
from django.test import Client

from auditportal.accounts.models import User
from auditportal.activity.models import Event
from auditportal.activity.selectors import chain_head, chain_verify
from tests.activity.chain_helpers import record
from tests.factories import make_user


@pytest.fixture
def root(db: None) -> User:
    user = make_user("root")
    user.is_staff = user.is_superuser = True
    user.save()
    return user


@pytest.fixture
def admin_client(root: User) -> Client:
    client = Client()
    client.force_login(root)
    return client


@pytest.fixture
def event(erin: User) -> Event:
    [event] = record(erin)
    return event


def forged(victim: User) -> dict[str, str]:
    return {
        "seq": "99",
        "prev_hash": "0" * 64,
        "hash": "f" * 64,
        "at_0": "2026-11-30",
        "at_1": "12:00:00",
        "actor": str(victim.pk),
        "actor_username": victim.username,
        "verb": "prediction_audit.approved",
        "target_type": "audits.predictionaudit",
        "target_id": "1",
        "data": "{}",
    }


def test_a_superuser_cannot_add_an_event(admin_client: Client, event: Event, carol: User) -> None:
    head = chain_head()
    assert admin_client.get("/admin/activity/event/add/").status_code == 403
    assert admin_client.post("/admin/activity/event/add/", forged(carol)).status_code == 403
    assert not Event.objects.filter(verb="prediction_audit.approved").exists()
    assert chain_head() == head


def test_a_superuser_sees_an_event_read_only_and_cannot_change_it(
    admin_client: Client, event: Event, carol: User
) -> None:
    url = f"/admin/activity/event/{event.pk}/change/"
    page = admin_client.get(url)
    assert page.status_code == 200
    assert b'name="_save"' not in page.content
    assert event.hash.encode() in page.content
    assert admin_client.post(url, forged(carol)).status_code == 403
    stored = Event.objects.get(pk=event.pk)
    assert (stored.verb, stored.actor_id, stored.hash) == (event.verb, event.actor_id, event.hash)
    assert chain_verify().ok


def test_a_superuser_cannot_delete_an_event(admin_client: Client, event: Event) -> None:
    url = f"/admin/activity/event/{event.pk}/delete/"
    assert admin_client.get(url).status_code == 403
    assert admin_client.post(url, {"post": "yes"}).status_code == 403
    bulk = {"action": "delete_selected", "_selected_action": [str(event.pk)], "post": "yes"}
    admin_client.post("/admin/activity/event/", bulk)
    assert Event.objects.filter(pk=event.pk).exists()
