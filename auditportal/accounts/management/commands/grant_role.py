from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from auditportal.accounts.cli import PortalCommand, cli_user
from auditportal.accounts.models import Role, User
from auditportal.accounts.services import administrators_exist, role_grant, role_revoke


class Command(PortalCommand):
    help = (
        "Grant a portal role to a user (or revoke it with --revoke), through the role service, which "
        "records who granted it and writes the event. --by names the administrator acting; only while no "
        "active administrator exists may the administrator role be granted without it (the first one)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("role", choices=[role.value for role in Role])
        parser.add_argument("--revoke", action="store_true", help="revoke the role instead of granting it")
        parser.add_argument(
            "--by", metavar="USERNAME", help="the administrator acting (required once an administrator exists)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = User.objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"no user named {options['username']!r}")
        role = Role(options["role"])
        label = role.label.lower()
        acting: User | None
        if (
            options["by"] is None
            and role == Role.ADMIN
            and not options["revoke"]
            and not administrators_exist(superusers=False)
        ):
            # The first administrator: nobody could name one. The event records the operating-system user.
            acting = None
        else:
            acting = cli_user(options["by"], role=Role.ADMIN, flag="--by")
        by = acting.username if acting is not None else "the first-administrator bootstrap"
        if options["revoke"]:
            if role_revoke(user=user, role=role, revoked_by=acting):
                self.stdout.write(f"Revoked the {label} role from {user.username}.")
            else:
                self.stdout.write(f"{user.username} does not hold the {label} role; nothing changed.")
        elif user.has_role(role):
            self.stdout.write(f"{user.username} already holds the {label} role; nothing changed.")
        else:
            role_grant(user=user, role=role, granted_by=acting)
            self.stdout.write(f"Granted the {label} role to {user.username} (by {by}).")
