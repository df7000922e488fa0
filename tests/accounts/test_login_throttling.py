"""Login throttling (django-axes): wrong passwords lock a username's logins from that address, the
right password included, on /login/ and /admin/login/; the API takes no passwords at all."""

from __future__ import annotations

import base64
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.test import Client
from django.utils import timezone

from auditportal.accounts.models import Role, User
from tests.factories import PASSWORD, make_user


@pytest.fixture
def root(db: None) -> User:
    user = make_user("root", [Role.ADMIN])
    user.is_staff = user.is_superuser = True
    user.save()
    return user


def login(client: Client, url: str, username: str, password: str, address: str = "10.0.0.1") -> Any:
    """The login form as a browser sends it (urlencoded; a multipart body from an anonymous user is
    refused unread)."""
    body = urlencode({"username": username, "password": password})
    return client.post(url, body, content_type="application/x-www-form-urlencoded", REMOTE_ADDR=address)


def attempt(client: Client, url: str, username: str, password: str, address: str = "10.0.0.1") -> int:
    return int(login(client, url, username, password, address).status_code)


@pytest.mark.parametrize("url", ["/login/", "/admin/login/"])
def test_thirty_wrong_passwords_lock_the_login_and_the_right_one_is_refused_too(
    url: str, root: User, alice: User
) -> None:
    user = root if url.startswith("/admin/") else alice
    client = Client()
    limit = settings.AXES_FAILURE_LIMIT
    assert limit == 5
    statuses = [attempt(client, url, user.username, f"wrong-{n}") for n in range(30)]
    # The form answers each wrong password until the limit; the attempt that reaches it is locked.
    assert statuses[: limit - 1] == [200] * (limit - 1)
    assert statuses[limit - 1 :] == [429] * (30 - limit + 1)
    locked = login(client, url, user.username, PASSWORD)
    assert locked.status_code == 429
    text = locked.content.decode()
    assert f"5 wrong passwords for <strong>{user.username}</strong>" in text
    assert "logins are refused for 15 minutes after the last failed attempt, even with the right password" in text
    assert "_auth_user_id" not in client.session


def test_the_lock_ends_after_the_cool_off_and_a_login_clears_the_count(alice: User) -> None:
    client = Client()
    for n in range(5):
        attempt(client, "/login/", "alice", f"wrong-{n}")
    assert attempt(client, "/login/", "alice", PASSWORD) == 429
    # 16 minutes later (LOGIN_LOCKOUT_MINUTES is 15):
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert attempt(client, "/login/", "alice", PASSWORD) == 302
    assert not AccessAttempt.objects.exists()  # a successful login resets the count


def test_the_lock_is_per_username_and_address(alice: User, bob: User) -> None:
    client = Client()
    for n in range(5):
        attempt(client, "/login/", "alice", f"wrong-{n}")
    assert attempt(client, "/login/", "alice", PASSWORD) == 429
    assert attempt(Client(), "/login/", "bob", PASSWORD) == 302  # another username
    assert attempt(Client(), "/login/", "alice", PASSWORD, address="10.0.0.2") == 302  # another address


def test_the_api_takes_no_password(alice: User) -> None:
    basic = "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    for n in range(10):
        response = Client().get("/api/v1/datasets/", HTTP_AUTHORIZATION=basic, REMOTE_ADDR=f"10.0.1.{n}")
        assert response.status_code == 401
        assert response["WWW-Authenticate"] == 'Session realm="api", login="/login/"'
    assert not AccessAttempt.objects.exists()  # nothing was tried as a password
