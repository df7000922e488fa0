from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from auditportal.accounts.cli import CLI_USERNAME
from auditportal.accounts.models import Role, RoleGrant, User
from auditportal.activity.context import os_user
from auditportal.activity.models import Event
from tests.factories import make_user


def _run(*args: str) -> str:
    out = StringIO()
    call_command("grant_role", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_it_bootstraps_the_first_administrator_naming_the_shell_user() -> None:
    root = make_user("root")
    root.is_superuser = root.is_staff = True
    root.save(update_fields=["is_superuser", "is_staff"])
    assert not root.has_role(Role.ADMIN)  # a superuser holds no portal role
    assert _run("root", "admin") == "Granted the administrator role to root (by the first-administrator bootstrap).\n"
    grant = RoleGrant.objects.get(user=root, role=Role.ADMIN)
    assert grant.granted_by is None
    event = Event.objects.get(verb="role.granted", target_id=str(root.pk))
    assert event.actor is None
    assert event.data == {"role": "admin", "cli": {"command": "grant_role", "os_user": os_user()}}
    assert not User.objects.filter(username=CLI_USERNAME).exists()


@pytest.mark.django_db
def test_once_an_administrator_exists_by_is_required() -> None:
    make_user("erin", [Role.ADMIN])
    make_user("mallory")
    for args in (["mallory", "admin"], ["mallory", "ethics_committee"]):
        with pytest.raises(CommandError, match=r"^--by is required: name the administrator acting"):
            _run(*args)
    assert not RoleGrant.objects.filter(user__username="mallory").exists()
    assert not User.objects.filter(username=CLI_USERNAME).exists()


def test_an_administrator_named_with_by_is_recorded(erin: User, oscar: User) -> None:
    assert _run("oscar", "reviewer", "--by", "erin") == "Granted the reviewer role to oscar (by erin).\n"
    assert RoleGrant.objects.get(user=oscar, role=Role.REVIEWER).granted_by == erin
    assert Event.objects.filter(verb="role.granted", actor=erin, target_id=str(oscar.pk)).exists()


def test_by_must_name_an_administrator(bob: User, oscar: User) -> None:
    with pytest.raises(CommandError, match=r"^--by 'bob' does not hold the administrator role$"):
        _run("oscar", "reviewer", "--by", "bob")
    with pytest.raises(CommandError, match=r"^--by 'nobody': no active user with that name$"):
        _run("oscar", "reviewer", "--by", "nobody")
    assert not RoleGrant.objects.filter(user=oscar).exists()
    assert not Event.objects.filter(verb="role.granted", target_id=str(oscar.pk)).exists()


def test_revoke_removes_the_grant_and_writes_the_event(carol: User, erin: User) -> None:
    assert _run("carol", "reviewer", "--revoke", "--by", "erin") == "Revoked the reviewer role from carol.\n"
    assert not RoleGrant.objects.filter(user=carol).exists()
    assert Event.objects.filter(verb="role.revoked", actor=erin, target_id=str(carol.pk)).exists()
    assert _run("carol", "reviewer", "--revoke", "--by", "erin") == (
        "carol does not hold the reviewer role; nothing changed.\n"
    )


def test_granting_a_held_role_changes_nothing(carol: User, erin: User) -> None:
    before = Event.objects.count()
    assert _run("carol", "reviewer", "--by", "erin") == "carol already holds the reviewer role; nothing changed.\n"
    assert Event.objects.count() == before


def test_it_refuses_an_unknown_user_or_role(erin: User, oscar: User) -> None:
    with pytest.raises(CommandError, match=r"^no user named 'zed'$"):
        _run("zed", "reviewer", "--by", "erin")
    with pytest.raises(CommandError, match="invalid choice: 'overlord'"):
        _run("oscar", "overlord")
    assert not RoleGrant.objects.exclude(user=erin).exists()
