"""On PostgreSQL the portal runs as a role that does not own its tables (``manage.py db_roles``): it
reads and adds to the activity log, and can neither change nor empty it, nor switch off its triggers.

The role is made here with a name of this test's own and dropped at its end. It connects on a
connection of its own (psycopg) to the test database: Django's test connection is the owner's.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from auditportal.accounts.models import User
from auditportal.activity.context import os_user
from auditportal.activity.models import Event, Verb
from auditportal.activity.selectors import chain_verify
from tests.activity.chain_helpers import record

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="roles and privileges are PostgreSQL's")


@pytest.fixture
def app_role(transactional_db: None, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A new application role, granted by db_roles (committed, so that another connection sees it)."""
    name, password = f"test_app_{secrets.token_hex(4)}", secrets.token_urlsafe(16)
    (tmp_path / "password").write_text(password)
    out = StringIO()
    call_command("db_roles", "--app-role", name, "--create", "--password-file", str(tmp_path / "password"), stdout=out)
    assert out.getvalue().startswith(f"{name} may read and write the tables of ")
    try:
        yield name, password
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP OWNED BY "{name}"')
            cursor.execute(f'DROP ROLE "{name}"')


def as_role(role: tuple[str, str]) -> Any:
    import psycopg

    db = connection.settings_dict
    return psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        dbname=db["NAME"],
        user=role[0],
        password=role[1],
        autocommit=True,
    )


@pytest.mark.parametrize(
    ("sql", "refusal"),
    [
        ("DELETE FROM activity_event", "permission denied for table activity_event"),
        ("UPDATE activity_event SET verb = 'role.revoked'", "permission denied for table activity_event"),
        ("TRUNCATE activity_event", "permission denied for table activity_event"),
        ("ALTER TABLE activity_event DISABLE TRIGGER activity_event_append_only", "must be owner of table"),
        ("ALTER TABLE activity_event DISABLE TRIGGER ALL", "must be owner of table"),
        ("DROP TRIGGER activity_event_no_truncate ON activity_event", "must be owner of relation activity_event"),
        ("SELECT setval(pg_get_serial_sequence('activity_event', 'id'), 1)", "permission denied for sequence"),
        ("DELETE FROM django_migrations", "permission denied for table django_migrations"),
    ],
)
def test_the_application_role_cannot_change_or_empty_the_log(
    app_role: tuple[str, str], erin: User, sql: str, refusal: str
) -> None:
    import psycopg

    record(erin, 3)
    before = chain_verify()
    with as_role(app_role) as app:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match=refusal):
            app.execute(sql)
        # What the portal does need: read the log and its high-water mark.
        assert app.execute("SELECT count(*) FROM activity_event").fetchone() == (before.count,)
        app.execute("SELECT pg_sequence_last_value(pg_get_serial_sequence('activity_event', 'id')::regclass)")
    after = chain_verify()
    assert (after.ok, after.count, after.head) == (True, before.count, before.head)


def test_the_application_role_adds_events_and_writes_other_tables(app_role: tuple[str, str], erin: User) -> None:
    [event] = record(erin)
    with as_role(app_role) as app:
        app.execute(
            "INSERT INTO activity_event (seq, prev_hash, hash, at, actor_username, verb, target_type, target_id, "
            "data) VALUES (%s, %s, %s, now(), '', 'role.granted', 'accounts.user', '1', '{}')",
            [event.seq + 1, event.hash, "a" * 64],
        )
        app.execute("UPDATE accounts_user SET first_name = 'Erin' WHERE id = %s", [erin.pk])
    erin.refresh_from_db()
    assert erin.first_name == "Erin"


def test_db_roles_records_what_it_granted_in_the_log(app_role: tuple[str, str]) -> None:
    event = Event.objects.get(verb=Verb.DATABASE_APP_ROLE_GRANTED)
    migration = MigrationRecorder.Migration.objects.order_by("-id").first()
    assert migration is not None
    # No portal account acted: the log names the shell's user, and the schema (newest migration) covered.
    assert (event.actor, event.target_type, event.target_id) == (None, "migrations.migration", str(migration.pk))
    db = connection.settings_dict
    assert event.data == {
        "role": app_role[0],
        "created": True,
        "password_set": True,
        "database": db["NAME"],
        "schema": "public",
        "owner": db["USER"],
        "migration": f"{migration.app}.{migration.name}",
        "read_write": "every other table and sequence",
        "append_only": ["activity_event"],
        "read_only": ["django_migrations"],
        "cli": {"command": "db_roles", "os_user": os_user()},
    }
    assert chain_verify().ok
    # Run again (after a migrate): recorded again, the role not created this time.
    call_command("db_roles", "--app-role", app_role[0], stdout=StringIO())
    again = Event.objects.filter(verb=Verb.DATABASE_APP_ROLE_GRANTED).order_by("-seq").first()
    assert again is not None
    assert again.seq == event.seq + 1
    assert (again.data["created"], again.data["password_set"]) == (False, False)


def test_db_roles_refuses_the_owner_and_a_superuser(transactional_db: None) -> None:
    owner = connection.settings_dict["USER"]
    with pytest.raises(CommandError, match=f"--app-role {owner}: that is the role this command connects as"):
        call_command("db_roles", "--app-role", owner)
    with pytest.raises(CommandError, match=r"--app-role nobody_here_[0-9a-f]+: no such role \(add --create"):
        call_command("db_roles", "--app-role", f"nobody_here_{secrets.token_hex(4)}")
    with pytest.raises(CommandError, match="expected lower-case letters"):
        call_command("db_roles", "--app-role", 'x"; DROP TABLE activity_event; --')
    assert not Event.objects.filter(verb=Verb.DATABASE_APP_ROLE_GRANTED).exists()
