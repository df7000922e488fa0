from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.management.base import CommandError, CommandParser
from django.http import Http404

from auditportal.accounts.cli import PortalCommand
from auditportal.accounts.models import User
from auditportal.fairness.errors import UserError
from auditportal.monitoring import rules, selectors, services
from auditportal.monitoring.models import Deployment
from auditportal.monitoring.selectors import DeploymentStatus

FLAGS = {"name": "NAME", "description": "--description", "model": "MODEL", "reason": "--reason"}
# ``status``'s exit codes: serving its promoted model (approved now), anything else, a usage error.
SERVING, NOT_SERVING, ERROR = 0, 1, 2


class Command(PortalCommand):
    help = (
        "Deployments (docs/monitoring.md). status NAME prints what serves and exits 0 when the deployment serves "
        "the model promoted last and the gate still approves it, 1 otherwise (rolled back, suspended, empty), "
        "2 for a name no deployment has: for CI scripts on the portal's host (elsewhere: GET "
        "/api/v1/deployments/NAME/ with a gate token). list: every deployment. create NAME and promote NAME "
        "MODEL (ML engineers and administrators, --user): only a model the gate approves can be promoted."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="status|list|create|promote")
        status = actions.add_parser("status", help="what serves now; exit 0 when its promoted model serves")
        status.add_argument("name", metavar="NAME", help="the deployment's name, e.g. credit-scoring/prod")
        status.add_argument("--json", action="store_true", help="print the API's JSON instead of lines")
        actions.add_parser("list", help="every deployment: name, state, model, since")
        create = actions.add_parser("create", help="a new deployment, empty or with an approved model")
        create.add_argument("name", metavar="NAME", help="lowercase segments joined by '/', e.g. credit-scoring/prod")
        create.add_argument("--description", default="", help="what it serves, for whom")
        create.add_argument("--model", default="", help="an approved model to promote at once")
        create.add_argument("--user", required=True, help="the ML engineer or administrator acting")
        promote = actions.add_parser("promote", help="promote an approved model: it serves from now on")
        promote.add_argument("name", metavar="NAME", help="the deployment's name")
        promote.add_argument("model", metavar="MODEL", help="the model identifier its review request names")
        promote.add_argument("--reason", default="", help="a note for the history")
        promote.add_argument("--user", required=True, help="the ML engineer or administrator acting")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "list":
            for deployment in selectors.deployment_list_all():
                since = f"{deployment.since:%Y-%m-%d %H:%M} UTC" if deployment.since else "-"
                self.stdout.write(
                    f"{deployment.name}\t{deployment.state}\t{deployment.model_identifier or '-'}\t{since}"
                )
            return
        if action == "status":
            self._status(options["name"], as_json=options["json"])
            return
        user = _deployer(options["user"])
        try:
            if action == "create":
                deployment = services.deployment_create(
                    user=user,
                    name=options["name"],
                    description=options["description"],
                    model_identifier=options["model"],
                )
                self.stdout.write(f"Created deployment {deployment.name} ({deployment.get_state_display().lower()}).")
            else:
                deployment = services.deployment_promote(
                    deployment=_find(options["name"]),
                    model_identifier=options["model"],
                    by=user,
                    reason=options["reason"],
                )
                self.stdout.write(f"{deployment.model_identifier} serves in {deployment.name} from now on.")
        except UserError as exc:
            flag = "--model" if action == "create" and exc.field == "model" else FLAGS.get(exc.field or "", "")
            raise CommandError(f"{flag}: {exc}" if flag else str(exc)) from exc
        except PermissionDenied as exc:
            raise CommandError(str(exc)) from exc

    def _status(self, name: str, *, as_json: bool) -> None:
        try:
            status = selectors.deployment_status(name=name)
        except Http404 as exc:
            raise CommandError(f"NAME: {exc}", returncode=ERROR) from None
        if as_json:
            self.stdout.write(json.dumps(status.as_json(), indent=2))
        else:
            self.stdout.write(describe(status))
        if not status.serving_promoted:
            raise SystemExit(NOT_SERVING)


def describe(status: DeploymentStatus) -> str:
    approved = {True: "yes", False: "no: the gate does not approve it now", None: "-"}[status.approved]
    lines = [
        f"deployment  {status.name}",
        f"state       {status.state}",
        f"model       {status.model or '- (nothing may serve)'}",
        f"since       {f'{status.since:%Y-%m-%d %H:%M} UTC' if status.since else '-'}",
        f"reason      {status.reason or '-'}",
        f"approved    {approved}",
    ]
    return "\n".join(lines)


def _deployer(username: str) -> User:
    user = User.objects.filter(username=username, is_active=True).first()
    if user is None:
        raise CommandError(f"--user {username[:150]!r}: no active user with that name")
    if not rules.can_deploy(user):
        raise CommandError(f"--user {username!r} is neither an ML engineer nor an administrator")
    return user


def _find(name: str) -> Deployment:
    try:
        return selectors.deployment_find(name=name)
    except Http404 as exc:
        raise CommandError(f"NAME: {exc}") from None
