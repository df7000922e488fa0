from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from auditportal.accounts.cli import cli_user
from auditportal.accounts.models import Role, User
from auditportal.accounts.services import role_grant, role_revoke


class Command(BaseCommand):
    help = (
        "Grant a portal role to a user (or revoke it with --revoke), through the role service, which "
        "records who granted it and writes the event. A fresh createsuperuser holds no role: start here."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("role", choices=[role.value for role in Role])
        parser.add_argument("--revoke", action="store_true", help="revoke the role instead of granting it")
        parser.add_argument(
            "--by",
            metavar="USERNAME",
            help="the administrator acting (default: the portal-cli system account, which holds the admin role)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = User.objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"no user named {options['username']!r}")
        role = Role(options["role"])
        acting = cli_user(options["by"], role=Role.ADMIN, flag="--by")
        label = role.label.lower()
        if options["revoke"]:
            if role_revoke(user=user, role=role, revoked_by=acting):
                self.stdout.write(f"Revoked the {label} role from {user.username}.")
            else:
                self.stdout.write(f"{user.username} does not hold the {label} role; nothing changed.")
        elif user.has_role(role):
            self.stdout.write(f"{user.username} already holds the {label} role; nothing changed.")
        else:
            role_grant(user=user, role=role, granted_by=acting)
            self.stdout.write(f"Granted the {label} role to {user.username} (by {acting.username}).")
