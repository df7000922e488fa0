from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from auditportal.accounts import services
from auditportal.accounts.cli import PortalCommand, cli_user
from auditportal.accounts.models import Role, RoleGrantProposal, User
from auditportal.fairness.errors import UserError


class Command(PortalCommand):
    help = (
        "People's accounts (administrators, named with --user): create one (its owner sets the password from "
        "a mailed link), force a password reset (the same link), activate or deactivate one. Nobody sets "
        "another person's password."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(
            dest="action", required=True, metavar="create|reset-password|activate|deactivate"
        )
        create = actions.add_parser("create", help="a person's account, without a password")
        create.add_argument("username")
        create.add_argument("--email", required=True, help="where the link to set the password is mailed")
        create.add_argument("--first-name", default="")
        create.add_argument("--last-name", default="")
        create.add_argument(
            "--role",
            action="append",
            choices=[role.value for role in Role],
            default=[],
            help="a role to grant (repeat)",
        )
        for name, text in (
            ("reset-password", "take the password away and mail its owner a link to set a new one"),
            ("activate", "let the account log in again"),
            ("deactivate", "refuse the account's logins, sessions and votes from now on"),
        ):
            sub = actions.add_parser(name, help=text)
            sub.add_argument("username")
        for sub in actions.choices.values():
            sub.add_argument("--user", required=True, help="the administrator acting")

    def handle(self, *args: Any, **options: Any) -> None:
        acting = cli_user(options["user"], role=Role.ADMIN)
        action = options["action"]
        try:
            if action == "create":
                user = services.user_create(
                    username=options["username"],
                    email=options["email"],
                    first_name=options["first_name"],
                    last_name=options["last_name"],
                    roles=[Role(role) for role in options["role"]],
                    created_by=acting,
                )
                self.stdout.write(f"Created {user.username}; a link to set the password is mailed to {user.email}.")
                for proposal in RoleGrantProposal.objects.filter(user=user).order_by("pk"):
                    self.stdout.write(
                        f"Proposed the {Role(proposal.role).noun} role: role proposal #{proposal.pk}; "
                        "another administrator confirms it "
                        f"(`manage.py grant_role --confirm {proposal.pk} --by ADMIN`)."
                    )
                return
            target = User.objects.filter(username=options["username"]).first()
            if target is None:
                raise CommandError(f"no user named {options['username']!r}")
            if action == "reset-password":
                services.user_password_reset_force(user=target, reset_by=acting)
                self.stdout.write(
                    f"{target.username}'s password no longer works; a link to set a new one is mailed to "
                    f"{target.email}."
                )
            elif action == "activate":
                changed = services.user_activate(user=target, by=acting)
                self.stdout.write(
                    f"{target.username} is active." if changed else f"{target.username} was active already."
                )
            else:
                changed = services.user_deactivate(user=target, by=acting)
                self.stdout.write(
                    f"{target.username} is deactivated." if changed else f"{target.username} was inactive already."
                )
        except UserError as exc:
            flag = {"email": "--email", "username": "username"}.get(exc.field or "", "")
            raise CommandError(f"{flag}: {exc}" if flag else str(exc)) from exc
