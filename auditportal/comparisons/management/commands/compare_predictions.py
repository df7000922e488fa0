from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from auditportal.accounts.cli import PortalCommand, cli_user
from auditportal.accounts.models import Role, User
from auditportal.comparisons import rules, services
from auditportal.comparisons.models import PairedComparison
from auditportal.fairness.errors import UserError
from auditportal.fairness.files.tabular import DatasetError
from auditportal.fairness.statistics import paired, stats
from auditportal.fairness.statistics.paired_file import PairedSpec
from auditportal.fairness.text import numbers

FLAGS = {
    "label": "--label",
    "attributes": "--attribute",
    "champion": "--champion",
    "challenger": "--challenger",
    "output": "--score",
    "champion_threshold": "--champion-threshold",
    "challenger_threshold": "--challenger-threshold",
    "tolerance": "--tolerance",
    "alpha": "--alpha",
    "power": "--power",
    "metrics": "--metric",
}
WORSE_EXIT_STATUS = 3


class Command(PortalCommand):
    help = (
        "Compare two models' predictions on the same rows (champion A against challenger B) per group: each "
        "model's rate, the paired difference with its interval, McNemar's p-value and a verdict (better, worse, "
        "equivalent within the policy's tolerance, or inconclusive with the rows needed). Stores the result."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--label", required=True, help="the true binary label column")
        parser.add_argument("--positive", default="1", help="the label value that counts as positive (default 1)")
        parser.add_argument("--champion", required=True, help="the model in production (A): its prediction column")
        parser.add_argument("--challenger", required=True, help="the model that would replace it (B): its column")
        parser.add_argument("--score", action="store_true", help="the two columns are scores: give both thresholds")
        parser.add_argument("--champion-threshold", type=float, help="A predicts positive when its score >= this")
        parser.add_argument("--challenger-threshold", type=float, help="B predicts positive when its score >= this")
        parser.add_argument(
            "--attribute",
            action="append",
            required=True,
            dest="attributes",
            help="a sensitive attribute column (repeatable, or comma-separated)",
        )
        parser.add_argument(
            "--metric",
            action="append",
            dest="metrics",
            choices=paired.METRICS,
            help="compare only these metrics (repeatable; default: all five)",
        )
        parser.add_argument("--unknown-token", action="append", dest="unknown_tokens")
        parser.add_argument("--power", type=float, default=stats.DEFAULT_POWER, help="power for the rows needed")
        parser.add_argument("--format", choices=["json", "table"], default="table", dest="output_format")
        parser.add_argument(
            "--fail-on-worse",
            action="store_true",
            help=f"exit with status {WORSE_EXIT_STATUS} when the challenger is worse for some group (for CI)",
        )
        parser.add_argument("--user", help="act as this user (needs the ML engineer or reviewer role)")

    def handle(self, *args: Any, **options: Any) -> None:
        source: Path = options["file"]
        spec = PairedSpec.from_input(
            label=options["label"],
            positive=options["positive"],
            attributes=options["attributes"],
            champion=options["champion"],
            challenger=options["challenger"],
            output="score" if options["score"] else "prediction",
            champion_threshold=options["champion_threshold"],
            challenger_threshold=options["challenger_threshold"],
            unknown_tokens=options["unknown_tokens"],
            power=options["power"],
            metrics=options["metrics"] or paired.METRICS,
        )
        user = _actor(options["user"])
        try:
            comparison = services.comparison_create(user=user, source=source, original_name=source.name, spec=spec)
        except DatasetError as exc:
            raise CommandError(f"{FLAGS[exc.field]}: {exc}" if exc.field in MODEL_FIELDS else str(exc)) from exc
        except UserError as exc:
            raise CommandError(f"{FLAGS.get(exc.field, exc.field)}: {exc}" if exc.field else str(exc)) from exc
        if options["output_format"] == "json":
            self.stdout.write(json.dumps({"id": comparison.pk, **comparison.result}, allow_nan=False, indent=2))
        else:
            self.stdout.write(render_table(comparison))
        if options["fail_on_worse"] and comparison.result["verdict"] == paired.WORSE:
            raise CommandError("the challenger is worse for at least one group", returncode=WORSE_EXIT_STATUS)


MODEL_FIELDS = ("champion", "challenger")


def _actor(username: str | None) -> User:
    if username:
        user = User.objects.filter(username=username, is_active=True).first()
        if user is not None and not rules.can_create(user):
            raise CommandError(f"--user {username!r} holds neither the ML engineer nor the reviewer role")
        if user is not None and not user.has_role(Role.ML_ENGINEER):
            return cli_user(username, role=Role.REVIEWER)
    return cli_user(username, role=Role.ML_ENGINEER)


def render_table(comparison: PairedComparison) -> str:
    document = comparison.result
    lines = [
        f"Paired comparison #{comparison.pk} of {comparison.original_name}: {document['rows']:,} rows, "
        f"champion {comparison.champion!r} (A) against challenger {comparison.challenger!r} (B)",
        f"tolerance {document['tolerance']:g}, alpha {document['alpha']:g} (fairness policy "
        f"v{document.get('policy', {}).get('version', '?')}); difference = B - A",
        f"verdict: {document['verdict'] or 'none'}",
    ]
    for name, section in document["attributes"].items():
        lines.append("")
        lines.append(f"{name}: " + ", ".join(f"{g} {v or '—'}" for g, v in section["verdicts"].items()))
        for metric, block in section["metrics"].items():
            for group, row in block["groups"].items():
                needed = f"  rows needed {numbers.count(row['rows_needed'])}" if row["rows_needed"] else ""
                lines.append(
                    f"  {metric:<15} {group:<20} A {numbers.rate(row['champion']['rate'])}  "
                    f"B {numbers.rate(row['challenger']['rate'])}  "
                    f"B-A {numbers.gap(row['difference'])} [{numbers.gap(row['low'])}, {numbers.gap(row['high'])}]  "
                    f"p {numbers.pvalue(row['p_adjusted'])}{' (exact)' if row['p_exact'] else ''}  "
                    f"{row['verdict'] or '—'}{needed}"
                )
    return "\n".join(lines)
