from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.management.base import CommandError, CommandParser

from auditportal.accounts.cli import PortalCommand, cli_user
from auditportal.accounts.models import Role, RoleGrant, RoleGrantProposal, User
from auditportal.accounts.services import (
    administrators_exist,
    role_grant,
    role_grant_confirm,
    role_grant_propose,
    role_grant_withdraw,
    role_revoke,
)
from auditportal.fairness.errors import UserError


class Command(PortalCommand):
    help = (
        "Grant a portal role to a user (or revoke it with --revoke), through the role service, which "
        "records who granted it and writes the event. --by names the administrator acting; only while no "
        "active administrator exists may the administrator role be granted without it (the first one). "
        "The ethics-committee and administrator roles are proposed (the id is printed) and take effect "
        "when a different administrator, not the grantee, confirms: --confirm ID --by ADMIN2 "
        "(or --withdraw ID --by ADMIN)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", nargs="?")
        parser.add_argument("role", nargs="?", choices=[role.value for role in Role])
        parser.add_argument("--revoke", action="store_true", help="revoke the role instead of granting it")
        parser.add_argument("--confirm", type=int, metavar="ID", help="confirm role proposal ID")
        parser.add_argument("--withdraw", type=int, metavar="ID", help="withdraw role proposal ID")
        parser.add_argument(
            "--by", metavar="USERNAME", help="the administrator acting (required once an administrator exists)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["confirm"] is not None or options["withdraw"] is not None:
            self._close(options)
            return
        if options["username"] is None or options["role"] is None:
            raise CommandError("give USERNAME and ROLE, or --confirm ID / --withdraw ID")
        user = User.objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"no user named {options['username']!r}")
        role = Role(options["role"])
        label = role.noun
        if (
            options["by"] is None
            and role == Role.ADMIN
            and not options["revoke"]
            and not administrators_exist(superusers=False)
        ):
            # The first administrator: nobody could name one. The event records the operating-system user.
            role_grant(user=user, role=role, granted_by=None)
            self.stdout.write(f"Granted the {label} role to {user.username} (by the first-administrator bootstrap).")
            return
        acting = cli_user(options["by"], role=Role.ADMIN, flag="--by")
        if options["revoke"]:
            if role_revoke(user=user, role=role, revoked_by=acting):
                self.stdout.write(f"Revoked the {label} role from {user.username}.")
            else:
                self.stdout.write(f"{user.username} does not hold the {label} role; nothing changed.")
            return
        if user.has_role(role):
            self.stdout.write(f"{user.username} already holds the {label} role; nothing changed.")
            return
        try:
            result = role_grant_propose(user=user, role=role, by=acting)
        except (UserError, PermissionDenied) as exc:
            raise CommandError(str(exc)) from exc
        if isinstance(result, RoleGrantProposal):
            self.stdout.write(
                f"Proposed the {label} role for {user.username}: role proposal #{result.pk}. It takes effect when "
                f"another administrator (neither {acting.username} nor {user.username}) runs "
                f"`manage.py grant_role --confirm {result.pk} --by ADMIN`."
            )
        else:
            self.stdout.write(f"Granted the {label} role to {user.username} (by {acting.username}).")

    def _close(self, options: dict[str, Any]) -> None:
        if options["confirm"] is not None and options["withdraw"] is not None:
            raise CommandError("--confirm and --withdraw: give one of them")
        if options["username"] is not None or options["revoke"]:
            raise CommandError("--confirm ID / --withdraw ID take no USERNAME, ROLE or --revoke")
        pk = options["confirm"] if options["confirm"] is not None else options["withdraw"]
        flag = "--confirm" if options["confirm"] is not None else "--withdraw"
        acting = cli_user(options["by"], role=Role.ADMIN, flag="--by")
        proposal = RoleGrantProposal.objects.select_related("user").filter(pk=pk).first()
        if proposal is None:
            raise CommandError(f"{flag} {pk}: no role proposal with that id")
        label = Role(proposal.role).noun
        try:
            if options["confirm"] is not None:
                grant: RoleGrant = role_grant_confirm(proposal=proposal, by=acting)
                self.stdout.write(
                    f"Confirmed role proposal #{pk}: granted the {label} role to {grant.user.username} "
                    f"(proposed by {proposal.proposed_by.username}, confirmed by {acting.username})."
                )
            else:
                role_grant_withdraw(proposal=proposal, by=acting)
                self.stdout.write(f"Withdrew role proposal #{pk} ({proposal.user.username} as {label}).")
        except (UserError, PermissionDenied) as exc:
            raise CommandError(str(exc)) from exc
