"""Roles change in the user admin only through the role service: actions, never the inline."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from auditportal.accounts.models import ApiToken, Role, RoleGrant, User
from auditportal.accounts.services import api_token_create
from auditportal.activity.models import Event
from tests.factories import make_user

CHANGELIST = "admin:accounts_user_changelist"


def _staff(user: User, *, superuser: bool = True) -> Client:
    user.is_staff = True
    user.is_superuser = superuser
    user.save(update_fields=["is_staff", "is_superuser"])
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def root(db: None) -> User:
    """A fresh createsuperuser: staff and superuser, no portal role."""
    return make_user("root")


def _run(client: Client, action: str, *users: User) -> list[str]:
    response = client.post(
        reverse(CHANGELIST), {"action": action, "_selected_action": [user.pk for user in users]}, follow=True
    )
    assert response.status_code == 200
    return [str(message) for message in get_messages(response.wsgi_request)]


def test_the_user_list_offers_a_grant_and_a_revoke_action_per_role(erin: User) -> None:
    page = _staff(erin).get(reverse(CHANGELIST))
    for role in Role:
        assert f'value="grant_{role.value}"'.encode() in page.content
        assert f"Grant role: {role.label}".encode() in page.content
        assert f'value="revoke_{role.value}"'.encode() in page.content
        assert f"Revoke role: {role.label}".encode() in page.content
    assert b"delete_selected" not in page.content


def test_an_administrator_grants_a_role_through_the_service(erin: User, oscar: User, bob: User) -> None:
    messages = _run(_staff(erin), "grant_reviewer", oscar, bob)
    assert messages == ["Granted reviewer role: bob, oscar."]
    grant = RoleGrant.objects.get(user=oscar, role=Role.REVIEWER)
    assert grant.granted_by == erin
    events = Event.objects.filter(verb="role.granted", actor=erin, data={"role": "reviewer"})
    assert sorted(events.values_list("target_id", flat=True)) == sorted([str(oscar.pk), str(bob.pk)])


def test_granting_a_role_already_held_changes_nothing(erin: User, carol: User) -> None:
    before = Event.objects.count()
    assert _run(_staff(erin), "grant_reviewer", carol) == ["Nothing to change."]
    assert Event.objects.count() == before


def test_an_administrator_revokes_a_role_through_the_service(erin: User, carol: User) -> None:
    assert _run(_staff(erin), "revoke_reviewer", carol) == ["Revoked reviewer role: carol."]
    assert not RoleGrant.objects.filter(user=carol).exists()
    assert Event.objects.filter(verb="role.revoked", actor=erin, target_id=str(carol.pk)).exists()


def test_a_superuser_without_the_administrator_role_cannot_run_them(root: User, oscar: User, carol: User) -> None:
    client = _staff(root)
    before = Event.objects.count()
    refused = ["Only an administrator can grant or revoke roles; nothing changed."]
    assert _run(client, "grant_admin", root) == refused
    assert _run(client, "grant_reviewer", oscar) == refused
    assert _run(client, "revoke_reviewer", carol) == refused
    assert not RoleGrant.objects.filter(user__in=[root, oscar]).exists()
    assert RoleGrant.objects.filter(user=carol, role=Role.REVIEWER).exists()
    assert Event.objects.count() == before


def _change_form(user: User, **extra: str) -> dict[str, str]:
    return {
        "username": user.username,
        "email": user.email,
        "is_active": "on",
        "date_joined_0": user.date_joined.strftime("%Y-%m-%d"),
        "date_joined_1": user.date_joined.strftime("%H:%M:%S"),
        "role_grants-TOTAL_FORMS": "1",
        "role_grants-INITIAL_FORMS": "0",
        "role_grants-MIN_NUM_FORMS": "0",
        "role_grants-MAX_NUM_FORMS": "1000",
        **extra,
    }


def test_the_role_inline_shows_grants_but_cannot_add_change_or_delete_them(erin: User, carol: User) -> None:
    client = _staff(erin)
    url = reverse("admin:accounts_user_change", args=[carol.pk])
    page = client.get(url)
    assert page.status_code == 200
    assert b"Reviewer" in page.content
    assert b"role_grants-0-role" not in page.content  # no editable role field
    assert b"role_grants-0-DELETE" not in page.content
    before = Event.objects.count()
    response = client.post(
        url, _change_form(carol, **{"role_grants-0-role": "admin", "role_grants-0-user": str(carol.pk)})
    )
    assert response.status_code == 403  # the account page is read only: changes are the list's actions
    assert list(RoleGrant.objects.filter(user=carol).values_list("role", flat=True)) == ["reviewer"]
    assert Event.objects.count() == before


def test_a_user_cannot_be_deleted_in_the_admin(erin: User, oscar: User) -> None:
    client = _staff(erin)
    assert client.get(reverse("admin:accounts_user_delete", args=[oscar.pk])).status_code == 403
    assert client.post(reverse("admin:accounts_user_delete", args=[oscar.pk]), {"post": "yes"}).status_code == 403
    assert User.objects.filter(pk=oscar.pk).exists()


@pytest.mark.parametrize(("tokens", "message"), [(1, "Revoked 1 token."), (2, "Revoked 2 tokens.")])
def test_revoking_tokens_in_the_admin_counts_them_in_words(erin: User, tokens: int, message: str) -> None:
    for number in range(tokens):
        api_token_create(user=erin, account=f"ci-bot-{number}", name="nightly", days=5)
    response = _staff(erin).post(
        reverse("admin:accounts_apitoken_changelist"),
        {"action": "revoke", "_selected_action": list(ApiToken.objects.values_list("pk", flat=True))},
        follow=True,
    )
    assert [str(item) for item in get_messages(response.wsgi_request)] == [message]  # not "token(s)"
