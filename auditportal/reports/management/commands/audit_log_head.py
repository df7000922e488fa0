from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from auditportal.accounts.cli import PortalCommand, cli_user
from auditportal.accounts.models import Role
from auditportal.fairness.errors import UserError
from auditportal.reports import heads


class Command(PortalCommand):
    help = (
        "Export the activity log's head (its newest event's seq and hash) as a small JSON file signed with the "
        "organisation's report key. Keep it where the database's administrators cannot write; "
        "`manage.py verify_audit_log --anchor FILE` fails if the log no longer reaches it. The export is "
        "recorded in the log (an event after the head it anchors)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        export = sub.add_parser("export", help="write the signed head to a new file")
        export.add_argument("--out", required=True, type=Path, help="the file to write (must not exist)")
        export.add_argument("--user", help="act as this administrator (default: the portal-cli account)")

    def handle(self, *args: Any, **options: Any) -> None:
        out: Path = options["out"]
        actor = cli_user(options["user"], role=Role.ADMIN)
        if out.exists():
            raise CommandError(f"--out {out}: the file exists; a head file is never overwritten.")
        if not out.parent.is_dir():
            raise CommandError(f"--out {out}: no such directory {out.parent}.")
        try:
            content = heads.head_export(actor=actor)
            heads.head_file_write(path=out, content=content)
        except UserError as exc:
            raise CommandError(str(exc)) from None
        except FileExistsError:
            raise CommandError(f"--out {out}: the file exists; a head file is never overwritten.") from None
        heads.head_export_record(actor=actor, path=out, content=content)
        head = content["head"]
        self.stdout.write(f"Wrote {out}: head seq {head['seq']}, hash {head['hash']}.")
