from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import CommandError, CommandParser

from auditportal.accounts import services
from auditportal.accounts.cli import PortalCommand
from auditportal.accounts.models import User
from auditportal.fairness.errors import UserError


class Command(PortalCommand):
    help = (
        "Change your own password: the account's current password is asked first (replaces Django's "
        "changepassword, which let whoever had the shell set anyone's password without a trace). To reset "
        "someone else's, an administrator forces a reset: `manage.py account reset-password USERNAME --user ADMIN`."
    )
    requires_migrations_checks = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", help="your account")

    def handle(self, *args: Any, **options: Any) -> None:
        user = User.objects.filter(username=options["username"], is_active=True).first()
        if user is None:
            raise CommandError(f"no active user named {options['username']!r}")
        if not user.has_usable_password():
            raise CommandError(
                f"{user.username} has no password to change: its owner sets one from the link mailed to them "
                "(an administrator sends a new one with `manage.py account reset-password`)"
            )
        old = getpass.getpass(f"Current password of {user.username}: ")
        new = getpass.getpass("New password: ")
        if getpass.getpass("New password (again): ") != new:
            raise CommandError("the two new passwords differ; nothing changed")
        try:
            services.user_password_change(user=user, old_password=old, new_password=new)
        except UserError as exc:
            raise CommandError(f"{exc} Nothing changed.") from exc
        self.stdout.write(f"Password changed for {user.username}.")
