from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import connection, transaction
from django.db.migrations.recorder import MigrationRecorder

from auditportal.activity.commands import PortalCommand
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record

# Tables the application may read and add to, never change or empty: the activity log (its triggers
# refuse it too, but only its owner could switch them off) and the migration history (only the
# owning role migrates).
APPEND_ONLY_TABLES = ("activity_event",)
READ_ONLY_TABLES = ("django_migrations",)
ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class Command(PortalCommand):
    help = (
        "PostgreSQL: give the application role (the one DATABASE_URL names for the web, worker and beat "
        "processes) what the portal needs and no more: read and write its tables, but only read and add "
        "to the activity log, and own nothing (so it cannot switch off the log's triggers). Run it as the "
        "role that owns the tables (the one that migrates), after every migrate: it also grants on the "
        "tables later migrations create. The log records it (database.app_role_granted). docs/governance.md, "
        "'The activity log'."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--app-role", required=True, help="the application role's name")
        parser.add_argument(
            "--create",
            action="store_true",
            help="create the role (LOGIN, no other attribute) if it does not exist (needs CREATEROLE)",
        )
        parser.add_argument(
            "--password-file",
            help="with --create: a file holding its password ('-': standard input); without, no password "
            "is set (peer or certificate authentication)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if connection.vendor != "postgresql":
            raise CommandError(
                f"db_roles is for PostgreSQL; this database is {connection.vendor}, which has no roles "
                "(a SQLite file is as safe as its file permissions)."
            )
        role: str = options["app_role"]
        if not ROLE_NAME.match(role):
            raise CommandError(f"--app-role {role!r}: expected lower-case letters, digits and _ (63 at most).")
        password = self._password(options["password_file"]) if options["password_file"] else None
        if password is not None and not options["create"]:
            raise CommandError("--password-file: only with --create (an existing role keeps its password).")
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT current_user, current_database(), current_schema()")
            owner, database, schema = cursor.fetchone()
            if role == owner:
                raise CommandError(
                    f"--app-role {role}: that is the role this command connects as, which owns the tables. "
                    "The application needs a role of its own."
                )
            # What the grants cover: the tables as of the newest migration applied.
            migration = MigrationRecorder.Migration.objects.order_by("-id").first()
            if migration is None:
                raise CommandError(f"{database}: no migration is applied; run `manage.py migrate` (as {owner}) first.")
            cursor.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = %s", [role])
            found = cursor.fetchone()
            if found is None and not options["create"]:
                raise CommandError(f"--app-role {role}: no such role (add --create to create it).")
            if found is None:
                cursor.execute(f"CREATE ROLE {q(role)} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE")
                if password is not None:
                    # ALTER ROLE takes no parameters: the password is a quoted literal.
                    cursor.execute(f"ALTER ROLE {q(role)} PASSWORD {literal(password)}")
            elif found[0] or found[1]:
                raise CommandError(
                    f"--app-role {role} is a superuser (or bypasses row security): it could do anything "
                    "to the activity log. Give the application an ordinary role."
                )
            cursor.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE pg_get_userbyid(c.relowner) = %s AND n.nspname = %s AND c.relkind IN ('r', 'p', 'S')",
                [role, schema],
            )
            owned = [name for (name,) in cursor.fetchall()]
            if owned:
                raise CommandError(
                    f"--app-role {role} owns {', '.join(sorted(owned)[:5])}"
                    f"{' and more' if len(owned) > 5 else ''}: an owner can switch off the activity log's "
                    f"triggers. Give them to the migrating role first (REASSIGN OWNED BY {role} TO {owner})."
                )
            for statement in grants(role=role, owner=owner, database=database, schema=schema):
                cursor.execute(statement)
            # No portal account acts (the database's owner ran it; the log names the shell's user), and no
            # model is the role: the target is the newest migration row, the schema the grants cover
            # (run again after the next migrate, the log shows which migrations each run covered).
            event_record(
                actor=None,
                verb=Verb.DATABASE_APP_ROLE_GRANTED,
                target=migration,
                data={
                    "role": role,
                    "created": found is None,
                    "password_set": password is not None,
                    "database": database,
                    "schema": schema,
                    "owner": owner,
                    "migration": f"{migration.app}.{migration.name}",
                    "read_write": "every other table and sequence",
                    "append_only": list(APPEND_ONLY_TABLES),
                    "read_only": list(READ_ONLY_TABLES),
                },
            )
        self.stdout.write(
            f"{role} may read and write the tables of {database}.{schema} (owned by {owner}), only read and "
            f"add to {', '.join(APPEND_ONLY_TABLES)}, only read {', '.join(READ_ONLY_TABLES)}, and owns none."
        )

    def _password(self, name: str) -> str:
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"--password-file {name}: cannot read it ({exc.strerror}).") from None
        password = text.strip("\n")
        if not password:
            raise CommandError(f"--password-file {name}: it is empty.")
        return password


def grants(*, role: str, owner: str, database: str, schema: str) -> list[str]:
    """The statements, in order: every privilege on the schema's tables and sequences is set anew."""
    r, o, s = q(role), q(owner), q(schema)
    statements = [
        f"GRANT CONNECT ON DATABASE {q(database)} TO {r}",
        f"GRANT USAGE ON SCHEMA {s} TO {r}",
        f"REVOKE CREATE ON SCHEMA {s} FROM {r}",
        f"REVOKE ALL ON ALL TABLES IN SCHEMA {s} FROM {r}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {s} TO {r}",
        # USAGE and SELECT let it draw ids; without UPDATE it cannot reset a sequence (setval), so the
        # event table's ids stay a high-water mark (verify_audit_log: an emptied log).
        f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA {s} FROM {r}",
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {s} TO {r}",
        # Tables and sequences later migrations create (as the owner) get the same; this command, run
        # after each migrate, takes UPDATE and DELETE back from new append-only ones.
        f"ALTER DEFAULT PRIVILEGES FOR ROLE {o} IN SCHEMA {s} GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {r}",
        f"ALTER DEFAULT PRIVILEGES FOR ROLE {o} IN SCHEMA {s} GRANT USAGE, SELECT ON SEQUENCES TO {r}",
    ]
    statements += [f"REVOKE UPDATE, DELETE ON {s}.{q(table)} FROM {r}" for table in APPEND_ONLY_TABLES]
    statements += [f"REVOKE INSERT, UPDATE, DELETE ON {s}.{q(table)} FROM {r}" for table in READ_ONLY_TABLES]
    return statements


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
