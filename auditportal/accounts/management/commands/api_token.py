from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from auditportal.accounts import services
from auditportal.accounts.cli import PortalCommand, cli_user
from auditportal.accounts.models import ApiToken, Role, TokenScope
from auditportal.fairness.errors import UserError


class Command(PortalCommand):
    help = (
        "API tokens for machine accounts (administrators): create one for the gate or for the API (the token is "
        "printed once; only its hash is kept), revoke one, or list them. An API token acts with its account's "
        "roles: grant them with grant_role."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="create|revoke|list")
        create = actions.add_parser("create", help="a token for a machine account (made if missing)")
        create.add_argument("--account", required=True, help="the machine account's username, e.g. deploy-bot")
        create.add_argument("--name", required=True, help="what the token is for, e.g. 'release pipeline'")
        create.add_argument("--days", type=int, default=90, help="days until it expires (default 90)")
        create.add_argument(
            "--scope",
            choices=TokenScope.values,
            default=TokenScope.GATE.value,
            help=(
                "gate: read the approval gate and deployments' status (default); monitoring: post production "
                "batches and read deployments' status; api: the rest of /api/v1/ with the account's roles"
            ),
        )
        create.add_argument("--user", help="the administrator acting (required)")
        revoke = actions.add_parser("revoke", help="refuse a token from now on")
        revoke.add_argument("id", type=int, help="the token's id (see list)")
        revoke.add_argument("--user", help="the administrator acting (required)")
        actions.add_parser("list", help="every token: id, account, name, scope, expiry, revoked")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "list":
            for token in ApiToken.objects.select_related("user", "revoked_by").order_by("id"):
                revoked = f"revoked {token.revoked_at:%Y-%m-%d %H:%M}" if token.revoked_at else "active"
                self.stdout.write(
                    f"{token.pk}\t{token.user.username}\t{token.name}\t{token.scope}\t{token.token_key}…\t"
                    f"expires {token.expiry:%Y-%m-%d %H:%M}\t{revoked}"
                )
            return
        user = cli_user(options["user"], role=Role.ADMIN)
        try:
            if options["action"] == "create":
                issued = services.api_token_create(
                    user=user,
                    account=options["account"],
                    name=options["name"],
                    days=options["days"],
                    scope=options["scope"],
                )
                token = issued.token
                self.stderr.write(
                    f"Created token #{token.pk} for {token.user.username} (scope {token.scope}), expiring "
                    f"{token.expiry:%Y-%m-%d %H:%M} UTC. It is shown once, below; only its hash is kept."
                )
                if token.scope == TokenScope.API and not token.user.is_member:
                    self.stderr.write(
                        f"{token.user.username} holds no role yet, so the API refuses it everything: "
                        f"grant one with `manage.py grant_role {token.user.username} ROLE`."
                    )
                self.stdout.write(issued.secret)
                return
            found = ApiToken.objects.filter(pk=options["id"]).first()
            if found is None:
                raise CommandError(f"no API token #{options['id']}")
            services.api_token_revoke(user=user, token=found)
            self.stdout.write(f"Revoked token #{found.pk} of {found.user.username}.")
        except UserError as exc:
            flag = {"account": "--account", "name": "--name", "days": "--days", "scope": "--scope"}.get(
                exc.field or "", ""
            )
            raise CommandError(f"{flag}: {exc}" if flag else str(exc)) from exc
