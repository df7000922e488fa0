from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from auditportal.accounts.cli import PortalCommand, cli_user
from auditportal.accounts.models import Role
from auditportal.policies import selectors, services
from auditportal.policies.models import FairnessPolicy
from auditportal.policies.services import KEEP, Keep, PolicyError

FLAGS = {
    "tolerance": "--tolerance",
    "alpha": "--alpha",
    "metrics": "--metrics",
    "min_group_size": "--min-group-size",
    "approval_quorum": "--approval-quorum",
    "reason": "--reason",
}


class Command(PortalCommand):
    help = (
        "Show the fairness policy verdicts are judged under (show [--history]), or create its next version "
        "(set ... --reason TEXT; administrators only). Existing verdicts keep the version they were judged under."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="show|set")
        show = actions.add_parser("show", help="the active version and its values")
        show.add_argument("--history", action="store_true", help="list every version, newest first")
        change = actions.add_parser("set", help="create the next version; values not given carry over")
        change.add_argument("--tolerance", type=float, help="δ: the largest acceptable gap, in [0, 1)")
        change.add_argument("--alpha", type=float, help="familywise error rate per metric and attribute, in (0, 0.5]")
        change.add_argument(
            "--metrics",
            help="comma-separated metrics that count towards a verdict (tpr, fpr, equalized_odds, "
            "selection_rate, ppv); must include tpr",
        )
        size = change.add_mutually_exclusive_group()
        size.add_argument("--min-group-size", type=int, help="a group with fewer rows cannot PASS")
        size.add_argument("--no-min-group-size", action="store_true", help="no minimum group size")
        change.add_argument(
            "--approval-quorum",
            type=int,
            help="distinct ethics-committee members whose approval a review request or a waiver needs",
        )
        change.add_argument("--reason", required=True, help="why the policy changes (shown in its history)")
        change.add_argument("--user", help="the administrator acting (required)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "show":
            self._show(history=options["history"])
            return
        user = cli_user(options["user"], role=Role.ADMIN)
        if options["no_min_group_size"]:
            min_group_size: int | Keep | None = None
        elif options["min_group_size"] is not None:
            min_group_size = options["min_group_size"]
        else:
            min_group_size = KEEP
        metrics = options["metrics"]
        try:
            policy = services.policy_create(
                user=user,
                reason=options["reason"],
                tolerance=KEEP if options["tolerance"] is None else options["tolerance"],
                alpha=KEEP if options["alpha"] is None else options["alpha"],
                metrics=None if metrics is None else metrics.split(","),
                min_group_size=min_group_size,
                approval_quorum=KEEP if options["approval_quorum"] is None else options["approval_quorum"],
            )
        except PolicyError as exc:
            raise CommandError(f"{FLAGS.get(exc.field, exc.field)}: {exc}" if exc.field else str(exc)) from exc
        self.stdout.write(f"Created fairness policy version {policy.version}; later verdicts are judged under it.")
        self.stdout.write(describe(policy, active=True))

    def _show(self, *, history: bool) -> None:
        active = selectors.policy_active()
        if not history:
            self.stdout.write(describe(active, active=True))
            return
        for policy in selectors.policy_history():
            self.stdout.write(describe(policy, active=policy.pk == active.pk))
            self.stdout.write("")


def describe(policy: FairnessPolicy, *, active: bool) -> str:
    by = policy.created_by.username if policy.created_by else "the first migrate"
    lines = [
        f"Fairness policy version {policy.version}{' (active)' if active else ''}",
        f"  tolerance δ     {policy.tolerance:g}",
        f"  alpha           {policy.alpha:g}",
        f"  metrics judged  {', '.join(policy.metrics)}",
        f"  reference       {policy.get_reference_rule_display()}",
        f"  min group size  {policy.min_group_size if policy.min_group_size is not None else 'none'}",
        f"  approval quorum {policy.approval_quorum} committee members",
        f"  created         {policy.created_at:%Y-%m-%d %H:%M} UTC by {by}",
        f"  reason          {policy.reason}",
    ]
    return "\n".join(lines)
