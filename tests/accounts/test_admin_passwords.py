"""The user admin sets no password: a superuser administrator walks every user page (GET and POST with
password fields) and no member's password changes, nor is any account added."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from tests.factories import PASSWORD

KNOWN = "the administrator knows this 1"
PASSWORD_FIELDS = {
    "password": KNOWN,
    "password1": KNOWN,
    "password2": KNOWN,
    "usable_password": "true",
    "username": "forged",
    "email": "forged@example.org",
}


@pytest.fixture
def admin_client(erin: User) -> Client:
    erin.is_staff = erin.is_superuser = True
    erin.save(update_fields=["is_staff", "is_superuser"])
    client = Client()
    client.force_login(erin)
    return client


def _urls(member: User) -> list[str]:
    base = "/admin/accounts/user/"
    return [
        base,
        f"{base}add/",
        f"{base}{member.pk}/change/",
        f"{base}{member.pk}/password/",
        f"{base}{member.pk}/",
        f"{base}{member.pk}/delete/",
        f"{base}{member.pk}/history/",
    ]


def test_no_user_admin_page_sets_a_password_or_adds_an_account(admin_client: Client, dave: User) -> None:
    before = set(User.objects.values_list("username", "password"))
    for url in _urls(dave):
        page = admin_client.get(url, follow=True)
        assert page.status_code in (200, 403, 404), url
        assert b'name="password1"' not in page.content, url
        assert b'name="password2"' not in page.content, url
        for body in (urlencode(PASSWORD_FIELDS), urlencode({**PASSWORD_FIELDS, "_save": "Save"})):
            response = admin_client.post(url, body, content_type="application/x-www-form-urlencoded")
            assert response.status_code in (200, 302, 403, 404), url
    dave.refresh_from_db()
    assert dave.check_password(PASSWORD)
    assert not dave.check_password(KNOWN)
    assert set(User.objects.values_list("username", "password")) == before
    assert not User.objects.filter(username="forged").exists()


def test_the_list_offers_account_actions_not_forms(admin_client: Client, dave: User) -> None:
    page = admin_client.get(reverse("admin:accounts_user_changelist"))
    for action in ("force_password_reset", "activate", "deactivate", "give_staff", "take_staff"):
        assert f'value="{action}"'.encode() in page.content
    assert b"Add user" not in page.content
    change = admin_client.get(reverse("admin:accounts_user_change", args=[dave.pk]))
    assert change.status_code == 200
    assert b"dave@example.org" in change.content
    assert b'name="email"' not in change.content  # shown, not editable


def test_the_force_reset_action_calls_the_service(admin_client: Client, erin: User, dave: User) -> None:
    response = admin_client.post(
        reverse("admin:accounts_user_changelist"),
        {"action": "force_password_reset", "_selected_action": [dave.pk]},
        follow=True,
    )
    messages = [str(m) for m in get_messages(response.wsgi_request)]
    assert messages == ["Force a password reset (the owner sets a new one from a mailed link): dave."]
    dave.refresh_from_db()
    assert not dave.has_usable_password()
    assert Event.objects.filter(verb=Verb.USER_PASSWORD_RESET_FORCED, actor=erin, target_id=str(dave.pk)).exists()


def test_a_superuser_without_the_administrator_role_changes_no_account(dave: User) -> None:
    root = User.objects.create(username="root", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(root)
    response = client.post(
        reverse("admin:accounts_user_changelist"),
        {"action": "deactivate", "_selected_action": [dave.pk]},
        follow=True,
    )
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "Only an administrator can change accounts; nothing changed."
    ]
    dave.refresh_from_db()
    assert dave.is_active
