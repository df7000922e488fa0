from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError, CommandParser
from django.db import transaction

from auditportal.accounts.cli import DEMO_USERS, PortalCommand
from auditportal.accounts.models import Role
from auditportal.accounts.services import user_demo_create, user_flags_set
from auditportal.lib.files import write_private_text


class Command(PortalCommand):
    help = (
        "Create (or reset) the demo users, one per role and two ethics-committee members (the default quorum), "
        "and print their passwords. Development only."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--password", help="use this password for every demo user instead of random ones")
        parser.add_argument(
            "--password-file",
            type=Path,
            metavar="PATH",
            help="also write the logins to this file, readable by this account only (0600)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.DEBUG:
            raise CommandError("seed_demo refuses to run with DEBUG off: demo accounts do not belong in production")
        rows = []
        with transaction.atomic():
            for username, role in DEMO_USERS:
                password = options["password"] or secrets.token_urlsafe(9)
                # The one place a password is set for someone (DEBUG only): the event says "demo seed".
                user = user_demo_create(username=username, password=password, role=role)
                if role == Role.ADMIN:
                    user_flags_set(user=user, by=user, is_staff=True, is_superuser=True)
                rows.append((username, password, role.label))
        lines = ["Demo users (development only):"]
        lines += [f"  {username:<10} {password:<16} {label}" for username, password, label in rows]
        for line in lines:
            self.stdout.write(line)
        if options["password_file"] is not None:
            try:
                write_private_text(options["password_file"], "\n".join(lines) + "\n")
            except OSError as exc:
                raise CommandError(f"--password-file {options['password_file']}: {exc.strerror}") from exc
