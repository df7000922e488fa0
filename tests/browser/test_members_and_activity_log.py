"""The members pages and the activity log in Chromium, at 1280 and 390 px: an administrator creates a
member with a deciding role, a second administrator confirms it, and a member reads the log and
verifies the chain; no page is wider than the window, nothing the policy blocks, no console error.
Screenshots: test-artifacts/browser/members-*.png, activity-log-*.png."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from auditportal.accounts import services as account_services
from auditportal.accounts.models import Role, User
from auditportal.activity.models import Event, Verb
from auditportal.activity.services import event_record
from auditportal.approvals.models import ReviewRequest
from tests.browser.conftest import ARTIFACTS, log_in
from tests.browser.test_content_security_policy import WATCH
from tests.factories import make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WIDTHS = (1280, 390)
# What Chromium logs for a page answered 400: a refused form shown again with its errors.
REFUSED = "Failed to load resource: the server responded with a status of 400 (Bad Request)"


def _watch(page: Any) -> list[str]:
    page.add_init_script(WATCH)
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    return errors


def _shoot(page: Any, name: str) -> None:
    """A full-page screenshot at each width, each checked for a page wider than the window."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(100)
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= width, f"{name} is {wide} px wide in a {width} px window"
        page.screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"), full_page=True)
        assert page.evaluate("window.__violations") == []
    page.set_viewport_size({"width": 1280, "height": 900})


def _people() -> None:
    erin = make_user("erin", [Role.ADMIN])
    make_user("iris", [Role.ADMIN])
    for name, roles in (
        ("alice", [Role.DATA_STEWARD]),
        ("bob", [Role.ML_ENGINEER]),
        ("carol", [Role.REVIEWER]),
        ("dave", [Role.ETHICS_COMMITTEE]),
        ("frank", [Role.ETHICS_COMMITTEE, Role.REVIEWER]),
        ("oscar", []),
    ):
        user = make_user(name, roles)
        user.first_name, user.last_name = name.capitalize(), "Example-Longname"
        user.save()
    User.objects.filter(username="oscar").update(is_active=False)
    account_services.role_grant_propose(user=User.objects.get(username="carol"), role=Role.ADMIN, by=erin)


def test_an_administrator_creates_a_member_and_a_second_one_confirms_the_committee_role(
    page: Any, live_server: Any
) -> None:
    _people()
    errors = _watch(page)
    log_in(page, live_server.url, "erin")
    page.click("nav >> text=Members")
    page.wait_for_selector("#members")
    assert page.locator("#members tbody tr").count() == 8
    assert "Administrator (proposed)" in page.inner_text("#members tr[data-member='carol']")
    assert "Waiting for iris to confirm." in page.inner_text("#open-proposals")
    _shoot(page, "members-list")

    page.select_option("#id_role", "ethics_committee")
    page.click("#member-search button[type=submit]")
    page.wait_for_url("**/account/members/?**")
    assert page.locator("#members tbody tr").count() == 2

    page.click("#member-new")
    page.fill("#id_username", "newbie")
    page.fill("#id_email", "not an address")
    page.check("input[name=roles][value=ethics_committee]")
    page.click("#member-form button[type=submit]")
    page.wait_for_selector(".field.has-error")
    assert page.url == f"{live_server.url}/account/members/new/"  # the address bar stays on the form's page
    assert "is not an e-mail address" in page.inner_text("#member-form")
    _shoot(page, "members-new-refused")
    page.fill("#id_email", "newbie@example.org")
    page.click("#member-form button[type=submit]")
    page.wait_for_selector("#member-events")
    newbie = User.objects.get(username="newbie")
    assert page.url == f"{live_server.url}/account/members/{newbie.pk}/"
    assert "being mailed to newbie@example.org" in page.inner_text(".messages")
    assert "Waiting for iris to confirm." in page.inner_text("#roles")
    assert page.locator("#role-proposals button:has-text('Confirm')").count() == 0
    _shoot(page, "members-member")

    page.context.clear_cookies()
    log_in(page, live_server.url, "iris")
    page.goto(f"{live_server.url}/account/members/{newbie.pk}/")
    page.click("#role-proposals button:has-text('Confirm')")
    page.wait_for_selector(".messages")
    assert "newbie now holds the ethics-committee member role" in page.inner_text(".messages")
    assert User.objects.get(pk=newbie.pk).has_role(Role.ETHICS_COMMITTEE)
    assert errors == [REFUSED]  # the refused form, and nothing else


def test_a_member_reads_searches_and_verifies_the_activity_log(page: Any, live_server: Any) -> None:
    _people()
    with transaction.atomic():
        for number in range(1, 70):
            event_record(
                actor=User.objects.get(username="dave"),
                verb=Verb.REVIEW_COMMENT_ADDED,
                target=ReviewRequest(pk=number % 7 + 1),
                data={"comment": number, "round": 1, "reason": "a long reason " * (number % 5)},
            )
    errors = _watch(page)
    log_in(page, live_server.url, "carol")
    page.click("nav >> text=Activity log")
    page.wait_for_selector("#events")
    assert "has not been verified from this page yet" in page.inner_text("#chain-status")
    assert page.locator("#events tbody tr").count() == 50
    page.click("#verify-chain")
    page.wait_for_selector("#chain-status.ok")
    assert "The chain holds" in page.inner_text("#chain-status")
    assert Event.objects.filter(verb=Verb.ACTIVITY_LOG_VERIFIED, actor__username="carol").count() == 1
    _shoot(page, "activity-log")

    page.fill("#id_text", "review request 3")
    page.fill("#id_actor", "dave")
    page.click("#event-search button[type=submit]")
    page.wait_for_selector("#events")
    assert page.locator("#events tbody tr").count() == 10
    assert all("Review request #3" in text for text in page.locator("#events tbody td:nth-child(4)").all_inner_texts())

    page.fill("#id_since", "2000-01-02")
    page.fill("#id_until", "2000-01-01")
    page.click("#event-search button[type=submit]")
    page.wait_for_selector(".field.has-error")
    assert "The last day comes before the first." in page.inner_text("#event-search")
    _shoot(page, "activity-log-search")
    assert errors == [REFUSED]  # the refused search, and nothing else
