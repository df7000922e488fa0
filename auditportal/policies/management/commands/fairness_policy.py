from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.management.base import CommandError, CommandParser

from auditportal.accounts.cli import PortalCommand, cli_user
from auditportal.accounts.models import Role, User
from auditportal.policies import selectors, services
from auditportal.policies.models import FairnessPolicy, PolicyProposal
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
        "(set ... --reason TEXT; administrators only). A change that loosens anything is a proposal that a "
        "different administrator confirms (confirm ID) or any administrator withdraws (withdraw ID). Existing "
        "verdicts keep the version they were judged under."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="show|set|confirm|withdraw")
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
        for name, text in (
            ("confirm", "confirm a pending proposal (an administrator other than its proposer)"),
            ("withdraw", "withdraw a pending or stale proposal"),
        ):
            close = actions.add_parser(name, help=text)
            close.add_argument("proposal", type=int, metavar="ID", help="the proposal's number (see show)")
            close.add_argument("--user", help="the administrator acting (required)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "show":
            self._show(history=options["history"])
            return
        user = cli_user(options["user"], role=Role.ADMIN)
        if options["action"] in ("confirm", "withdraw"):
            self._close(user, options["action"], options["proposal"])
            return
        if options["no_min_group_size"]:
            min_group_size: int | Keep | None = None
        elif options["min_group_size"] is not None:
            min_group_size = options["min_group_size"]
        else:
            min_group_size = KEEP
        metrics = options["metrics"]
        try:
            made = services.policy_create(
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
        if isinstance(made, PolicyProposal):
            self.stdout.write(
                f"Proposed #{made.pk}: it loosens {', '.join(made.loosens)}, so it takes effect only when a different "
                f"administrator runs `fairness_policy confirm {made.pk} --user NAME`."
            )
            return
        self.stdout.write(f"Created fairness policy version {made.version}; later verdicts are judged under it.")
        self.stdout.write(describe(made, active=True))

    def _close(self, user: User, action: str, proposal_id: int) -> None:
        proposal = PolicyProposal.objects.filter(pk=proposal_id).first()
        if proposal is None:
            raise CommandError(f"ID {proposal_id}: no such fairness policy proposal")
        try:
            if action == "confirm":
                policy = services.policy_proposal_confirm(user=user, proposal=proposal)
            else:
                services.policy_proposal_withdraw(user=user, proposal=proposal)
        except (PolicyError, PermissionDenied) as exc:
            raise CommandError(str(exc)) from exc
        if action == "confirm":
            self.stdout.write(f"Confirmed proposal #{proposal.pk}: version {policy.version} is active.")
            self.stdout.write(describe(policy, active=True))
        else:
            self.stdout.write(f"Withdrew proposal #{proposal.pk}; the policy is unchanged.")

    def _show(self, *, history: bool) -> None:
        active = selectors.policy_active()
        for proposal in selectors.policy_proposals(open_only=True):
            state = selectors.policy_proposal_state(proposal, active=active)
            self.stdout.write(
                f"Proposal #{proposal.pk} ({state}, against version {proposal.base.version}, by "
                f"{proposal.proposed_by.username}) loosens {', '.join(proposal.loosens)}: {proposal.reason}"
            )
        if not history:
            self.stdout.write(describe(active, active=True))
            return
        for policy in selectors.policy_history():
            self.stdout.write(describe(policy, active=policy.pk == active.pk))
            self.stdout.write("")


def describe(policy: FairnessPolicy, *, active: bool) -> str:
    by = policy.created_by.username if policy.created_by else "the first migrate"
    if policy.confirmed_by:
        by += f", confirmed by {policy.confirmed_by.username}"
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
