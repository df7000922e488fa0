"""Management commands act as a named person where it matters, and every event they write names the
operating-system user who ran them (hashed with the event)."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from io import StringIO

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.core.management.base import BaseCommand

from auditportal.accounts.cli import CLI_USERNAME, PortalCommand, cli_user
from auditportal.accounts.models import ApiToken, Role, User
from auditportal.accounts.services import role_grant
from auditportal.activity.context import os_user
from auditportal.activity.models import Event, Verb
from auditportal.activity.selectors import chain_verify
from tests.factories import PASSWORD, make_user

# Commands that only read: they write no event, so they need not say who ran them.
READ_ONLY = {"gate", "verify_report", "verify_audit_log"}


def _portal_commands() -> Iterator[tuple[str, type[BaseCommand]]]:
    for config in apps.get_app_configs():
        if not config.name.startswith("auditportal."):
            continue
        try:
            package = importlib.import_module(f"{config.name}.management.commands")
        except ModuleNotFoundError:
            continue
        for info in pkgutil.iter_modules(package.__path__):
            yield info.name, importlib.import_module(f"{package.__name__}.{info.name}").Command


def test_every_portal_command_that_writes_records_who_ran_it() -> None:
    commands = dict(_portal_commands())
    assert {"grant_role", "api_token", "fairness_policy", "report_keys", "dataset_stewards"} <= set(commands)
    missing = sorted(
        name for name, command in commands.items() if name not in READ_ONLY and not issubclass(command, PortalCommand)
    )
    assert missing == []


def test_djangos_password_commands_are_the_portals() -> None:
    from django.core.management import get_commands

    assert get_commands()["changepassword"] == "auditportal.accounts"
    assert get_commands()["createsuperuser"] == "auditportal.accounts"


@pytest.mark.parametrize(
    "args",
    [
        ["api_token", "create", "--account", "bot", "--name", "ci"],
        ["fairness_policy", "set", "--tolerance", "0.2", "--reason", "why"],
        ["grant_role", "oscar", "ethics_committee"],
        ["account", "reset-password", "dave"],
    ],
)
def test_an_administrators_command_without_a_named_administrator_is_refused(
    erin: User, oscar: User, dave: User, args: list[str]
) -> None:
    before = Event.objects.count()
    with pytest.raises(CommandError, match=r"(--user|--by) is required|the following arguments are required: --user"):
        call_command(*args, stdout=StringIO(), stderr=StringIO())
    assert Event.objects.count() == before
    assert not User.objects.filter(username=CLI_USERNAME).exists()
    assert not ApiToken.objects.exists()


def test_the_system_account_never_holds_the_administrator_role(db: None) -> None:
    engineer = cli_user(None, role=Role.ML_ENGINEER)
    assert engineer.username == CLI_USERNAME
    assert engineer.roles == {Role.ML_ENGINEER.value}
    with pytest.raises(CommandError, match="--user is required"):
        cli_user(None, role=Role.ADMIN)
    # One left by an earlier version is refused until an administrator revokes it.
    role_grant(user=engineer, role=Role.ADMIN, granted_by=None)
    engineer.forget_roles()
    with pytest.raises(CommandError, match="the portal-cli account holds the administrator role"):
        cli_user(None, role=Role.ML_ENGINEER)


def test_each_event_a_command_writes_names_the_command_and_the_shell_user(erin: User) -> None:
    call_command(
        "api_token",
        "create",
        "--account",
        "bot",
        "--name",
        "ci",
        "--user",
        "erin",
        stdout=StringIO(),
        stderr=StringIO(),
    )
    events = list(Event.objects.filter(verb__in=[Verb.USER_CREATED, Verb.API_TOKEN_CREATED]).order_by("seq"))
    assert [event.verb for event in events] == [Verb.USER_CREATED, Verb.API_TOKEN_CREATED]
    for event in events:
        assert event.actor == erin
        assert event.data["cli"] == {"command": "api_token", "os_user": os_user()}
    assert chain_verify().ok  # the hash covers it
    # Outside a command (a page, a task) events carry nothing of the kind.
    role_grant(user=make_user("zed"), role=Role.REVIEWER, granted_by=erin)
    assert "cli" not in Event.objects.get(verb=Verb.ROLE_GRANTED).data


def test_changepassword_asks_for_the_accounts_own_password(dave: User, monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter(["someone else's guess", "a brand new passphrase", "a brand new passphrase"])
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(answers))
    with pytest.raises(CommandError, match="The current password is not right"):
        call_command("changepassword", "dave", stdout=StringIO())
    dave.refresh_from_db()
    assert dave.check_password(PASSWORD)
    answers = iter([PASSWORD, "a brand new passphrase", "a brand new passphrase"])
    call_command("changepassword", "dave", stdout=StringIO())
    dave.refresh_from_db()
    assert dave.check_password("a brand new passphrase")
    event = Event.objects.get(verb=Verb.USER_PASSWORD_CHANGED)
    assert (event.actor, event.data["how"], event.data["cli"]["command"]) == (
        dave,
        "current password",
        "changepassword",
    )


def test_createsuperuser_makes_only_the_first_administrator(db: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "first admin's own passphrase")
    call_command("createsuperuser", "--username", "root", "--noinput", stdout=StringIO())
    root = User.objects.get(username="root")
    assert (root.is_superuser, root.is_staff, root.has_role(Role.ADMIN)) == (True, True, True)
    assert root.check_password("first admin's own passphrase")
    created = Event.objects.get(verb=Verb.USER_CREATED)
    assert created.data["bootstrap"] is True
    assert created.data["cli"]["command"] == "createsuperuser"
    with pytest.raises(CommandError, match="an administrator already exists"):
        call_command("createsuperuser", "--username", "second", "--noinput", stdout=StringIO())
    assert not User.objects.filter(username="second").exists()
