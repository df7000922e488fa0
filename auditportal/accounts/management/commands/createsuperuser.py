from __future__ import annotations

import getpass
import os
from typing import Any

from django.core.management.base import CommandError, CommandParser

from auditportal.accounts import services
from auditportal.accounts.cli import PortalCommand
from auditportal.fairness.errors import UserError


class Command(PortalCommand):
    help = (
        "Make the portal's first administrator (superuser and administrator role), with the password you "
        "type. Refused once an administrator or superuser exists: then an administrator creates accounts "
        "(`manage.py account create --user ADMIN`) and their owners set their own passwords."
    )
    requires_migrations_checks = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", required=True)
        parser.add_argument("--email", default="")
        parser.add_argument(
            "--noinput",
            "--no-input",
            action="store_false",
            dest="interactive",
            help="take the password from DJANGO_SUPERUSER_PASSWORD instead of asking",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if services.administrators_exist():
            raise CommandError(
                "an administrator already exists: accounts are made with `manage.py account create USERNAME "
                "--email ADDRESS --user ADMIN`, and their owners set their passwords from a mailed link"
            )
        if options["interactive"]:
            password = getpass.getpass("Password: ")
            if getpass.getpass("Password (again): ") != password:
                raise CommandError("the two passwords differ; nothing changed")
        else:
            password = os.environ.get("DJANGO_SUPERUSER_PASSWORD", "")
            if not password:
                raise CommandError("--noinput needs the password in DJANGO_SUPERUSER_PASSWORD")
        try:
            user = services.user_bootstrap_create(
                username=options["username"], email=options["email"], password=password
            )
        except UserError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"Created {user.username}: superuser and portal administrator (the first one).")
