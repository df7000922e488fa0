"""The activity log page (/activity/): every member reads the events, newest first, searches them,
sees the chain's last verification and asks for a new one; what a reader may not see stays hidden."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts import services as account_services
from auditportal.accounts.models import Role, User
from auditportal.activity import selectors, services
from auditportal.activity.models import Event, Verb
from auditportal.activity.services import event_record
from auditportal.approvals.models import ReviewRequest
from auditportal.audits.models import QueuedPredictionAudit
from tests.activity.chain_helpers import record, tamper
from tests.factories import client_for

pytestmark = pytest.mark.django_db

SECRET_PATH = "/srv/checkpoints/matrix-secret/ckpt-7"


def _event(actor: User | None, verb: Verb, target: Any, **data: Any) -> Event:
    with transaction.atomic():
        return event_record(actor=actor, verb=verb, target=target, data=data)


def _page(client: Client, query: str = "") -> str:
    response = client.get("/activity/" + query)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def _seqs(body: str) -> list[int]:
    return [int(seq) for seq in re.findall(r'data-seq="(\d+)"', body)]


def test_a_visitor_is_sent_to_log_in_and_an_account_without_a_role_is_refused(oscar: User) -> None:
    response = Client().get("/activity/")
    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/activity/"
    refused = client_for(oscar).get("/activity/")
    assert refused.status_code == 403
    assert "Your account has no role yet" in refused.content.decode()
    assert client_for(oscar).post("/activity/verify/").status_code == 403
    assert not Event.objects.filter(verb=Verb.ACTIVITY_LOG_VERIFIED).exists()


@pytest.mark.parametrize("role", list(Role))
def test_every_member_reads_the_log(role: Role, erin: User) -> None:
    record(erin, 3)
    member = User.objects.create(username=f"member-{role.value}")
    account_services.role_grant(user=member, role=role, granted_by=None)
    body = _page(client_for(member))
    assert _seqs(body)[:3] == sorted(_seqs(body), reverse=True)[:3]


def test_the_events_are_newest_first_fifty_a_page_and_the_pages_keep_the_search(erin: User, carol: User) -> None:
    record(erin, 120, note="paged")
    newest = Event.objects.order_by("-seq").first()
    assert newest is not None
    first = _page(client_for(carol), "?text=paged")
    assert _seqs(first) == list(range(newest.seq, newest.seq - 50, -1))
    assert "120 events found, newest first." in first
    assert 'href="?text=paged&amp;page=2" rel="next"' in first
    third = _page(client_for(carol), "?text=paged&page=3")
    assert len(_seqs(third)) == 20
    assert "Page 3 of 3" in third


def test_it_searches_by_verb_actor_target_and_details(erin: User, carol: User, dave: User) -> None:
    request = ReviewRequest(pk=4242)  # only its label and id are recorded
    approved = _event(dave, Verb.REVIEW_REQUEST_APPROVED, request, reason="the gap is explained")
    commented = _event(carol, Verb.REVIEW_COMMENT_ADDED, ReviewRequest(pk=77), body="fine")
    by_system = _event(None, Verb.REVIEW_REQUEST_SUSPENDED, request, reason="evidence retired")
    client = client_for(carol)

    assert _seqs(_page(client, "?verb=review_request.approved")) == [approved.seq]
    assert _seqs(_page(client, "?actor=DAV")) == [approved.seq]
    assert _seqs(_page(client, "?actor=system&verb=review_request.suspended")) == [by_system.seq]
    assert _seqs(_page(client, "?text=review+request+4242")) == [by_system.seq, approved.seq]
    assert _seqs(_page(client, "?text=%2377")) == [commented.seq]
    assert _seqs(_page(client, "?text=GAP+IS+EXPLAINED")) == [approved.seq]
    assert _seqs(_page(client, "?text=review+request+4242&actor=dave")) == [approved.seq]


def test_it_finds_accented_letters_and_quotes_in_the_details(erin: User, carol: User) -> None:
    event = _event(erin, Verb.REVIEW_COMMENT_ADDED, ReviewRequest(pk=8), reason='the "café" data set')
    client = client_for(carol)
    assert _seqs(_page(client, "?text=caf%C3%A9")) == [event.seq]
    assert _seqs(_page(client, "?text=%22caf%C3%A9%22+data")) == [event.seq]


def test_it_searches_a_range_of_days_both_included(erin: User, carol: User) -> None:
    [event] = record(erin, 1, note="today")
    today = timezone.localdate(event.at)
    client = client_for(carol)
    day = today.isoformat()
    assert event.seq in _seqs(_page(client, f"?since={day}&until={day}"))
    assert _seqs(_page(client, f"?since={(today + timedelta(days=1)).isoformat()}")) == []
    assert _seqs(_page(client, f"?until={(today - timedelta(days=1)).isoformat()}")) == []


def test_a_bad_search_value_is_named_on_its_field_and_the_rest_still_applies(erin: User, carol: User) -> None:
    record(erin, 2, note="kept")
    [other] = record(erin, 1, note="other")
    response = client_for(carol).get("/activity/?since=yesterday&text=kept&verb=no.such.verb")
    assert response.status_code == 400
    body = response.content.decode()
    assert "Enter a valid date." in body
    assert "Select a valid choice. no.such.verb is not one of the available choices." in body
    assert 'value="kept"' in body
    assert other.seq not in _seqs(body)
    assert len(_seqs(body)) == 2
    later = client_for(carol).get("/activity/?since=2030-01-02&until=2030-01-01")
    assert "The last day comes before the first." in later.content.decode()


def test_another_accounts_queued_audit_is_left_out(bob: User, carol: User, erin: User) -> None:
    queued = QueuedPredictionAudit.objects.create(
        owner=bob, original_name="bobs-large-scores.csv", storage_path="audit-uploads/x/y.csv", size_bytes=1
    )
    event = _event(bob, Verb.PREDICTION_AUDIT_QUEUED, queued, file="bobs-large-scores.csv", size_bytes=1)
    for other in (carol, erin):
        body = _page(client_for(other))
        assert event.seq not in _seqs(body)
        assert "bobs-large-scores.csv" not in body
        assert _seqs(_page(client_for(other), "?text=bobs-large")) == []
    own = _page(client_for(bob))
    assert event.seq in _seqs(own)
    assert f'href="/audits/predictions/queued/{queued.pk}/"' in own


def test_a_checkpoint_path_is_shown_only_to_engineers_and_administrators_and_not_found_by_searching(
    bob: User, carol: User, dave: User, erin: User
) -> None:
    tagged = _event(None, Verb.REVIEW_REQUEST_CHECKPOINT_TAGGED, ReviewRequest(pk=5), checkpoint=SECRET_PATH)
    revised = _event(
        bob, Verb.REVIEW_REQUEST_REVISED, ReviewRequest(pk=5), changes={"checkpoint": ["", SECRET_PATH], "title": []}
    )
    for reader in (carol, dave):
        body = _page(client_for(reader))
        assert {tagged.seq, revised.seq} <= set(_seqs(body))
        assert "matrix-secret" not in body
        assert _seqs(_page(client_for(reader), "?text=matrix-secret")) == []
    for reader in (bob, erin):
        body = _page(client_for(reader))
        assert SECRET_PATH in body
        assert _seqs(_page(client_for(reader), "?text=matrix-secret")) == [revised.seq, tagged.seq]


def test_e_mail_addresses_are_shown_to_administrators_and_to_their_owner(erin: User, carol: User, dave: User) -> None:
    made = account_services.user_create(username="newbie", email="newbie@private.example", created_by=erin)
    reset = account_services.user_password_reset_force(user=carol, reset_by=erin)
    assert reset.email
    body = _page(client_for(dave))
    assert "newbie@private.example" not in body
    assert reset.email not in body
    assert _seqs(_page(client_for(dave), "?text=private.example")) == []
    own = _page(client_for(reset))  # the reset ended carol's sessions: a new one
    assert reset.email in own
    assert "newbie@private.example" not in own
    admin = _page(client_for(erin))
    assert "newbie@private.example" in admin
    assert f'href="/account/members/{made.pk}/"' in admin
    assert "/account/members/" not in body  # members' pages are the administrators'


def test_a_target_is_linked_to_its_page(erin: User, carol: User) -> None:
    _event(carol, Verb.REVIEW_COMMENT_ADDED, ReviewRequest(pk=31), body="x")
    body = _page(client_for(carol))
    assert '<a href="/approvals/31/">Review request #31</a>' in body


def test_what_an_event_holds_is_shown_as_text(erin: User, carol: User) -> None:
    _event(erin, Verb.REVIEW_COMMENT_ADDED, ReviewRequest(pk=3), reason="<script>alert(1)</script>")
    body = _page(client_for(carol))
    assert "<script>alert(1)</script>" not in body
    assert html.escape("<script>alert(1)</script>") in body


def test_loading_the_page_verifies_nothing_and_says_so(
    erin: User, carol: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    record(erin, 3)

    def refuse(**kwargs: Any) -> None:
        raise AssertionError("the page load verified the chain")

    monkeypatch.setattr(selectors, "chain_verify", refuse)
    body = _page(client_for(carol))
    assert "The chain has not been verified from this page yet." in body
    assert 'action="/activity/verify/"' in body


def test_a_member_verifies_the_chain_and_the_result_is_recorded_and_shown(erin: User, carol: User) -> None:
    record(erin, 4)
    head = Event.objects.order_by("-seq").first()
    assert head is not None
    response = client_for(carol).post("/activity/verify/")
    assert response.status_code == 303
    assert response["Location"] == "/activity/"
    verified = Event.objects.get(verb=Verb.ACTIVITY_LOG_VERIFIED)
    assert verified.actor == carol
    assert (verified.target_type, verified.target_id) == ("activity.event", str(head.pk))
    assert verified.data["ok"] is True
    assert verified.data["events"] == head.seq
    assert verified.data["head_hash"] == head.hash
    assert verified.data["seconds"] >= 0
    body = _page(client_for(carol))
    assert "The chain holds" in body
    assert f"{head.seq:,} events, up to seq {head.seq}" in body
    assert "by carol" in body


def test_a_second_verification_within_a_minute_is_refused_with_the_reason(
    erin: User, carol: User, dave: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    record(erin, 2)
    client_for(carol).post("/activity/verify/")
    again = client_for(dave).post("/activity/verify/", follow=True)
    assert again.redirect_chain == [("/activity/", 303)]
    assert re.search(r"The chain was verified \d+ s ago by carol; it can be verified again", again.content.decode())
    assert Event.objects.filter(verb=Verb.ACTIVITY_LOG_VERIFIED).count() == 1
    monkeypatch.setattr(services, "CHAIN_VERIFY_INTERVAL", timedelta(0))
    client_for(dave).post("/activity/verify/")
    assert Event.objects.filter(verb=Verb.ACTIVITY_LOG_VERIFIED).count() == 2


def test_an_edited_event_shows_as_a_broken_chain(erin: User, carol: User, settings: SettingsWrapper) -> None:
    events = record(erin, 5)
    tamper("UPDATE activity_event SET actor_username = 'mallory' WHERE seq = %s", [events[2].seq])
    response = client_for(carol).post("/activity/verify/", follow=True)
    body = response.content.decode()
    assert f"The chain is broken at event seq {events[2].seq}: edited: its hash does not match its content" in body
    verified = Event.objects.get(verb=Verb.ACTIVITY_LOG_VERIFIED)
    assert verified.data["ok"] is False
    assert verified.data["broken_at_seq"] == events[2].seq
    assert verified.target_id == str(events[2].pk)
    assert f"The chain is broken at event seq {events[2].seq}" in _page(client_for(carol))


def test_the_log_is_in_the_navigation_of_members_only(carol: User, oscar: User) -> None:
    assert 'href="/activity/"' in _page(client_for(carol), "")
    assert 'href="/activity/"' not in client_for(oscar).get("/").content.decode()
