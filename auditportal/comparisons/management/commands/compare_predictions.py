from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.http import Http404

from auditportal.accounts.cli import PortalCommand, cli_user
from auditportal.accounts.models import Role, User
from auditportal.audits.selectors import prediction_audit_get
from auditportal.comparisons import audit_services, rules, services, trial_services
from auditportal.comparisons.models import PairedComparison
from auditportal.experiments.selectors import trial_get
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
    "champion_trial": "--champion-trial",
    "challenger_trial": "--challenger-trial",
    "champion_audit": "--champion-audit",
    "challenger_audit": "--challenger-audit",
    "unknown_tokens": "--unknown-token",
    "positive": "--positive",
    "file": "FILE",
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
        parser.add_argument("file", type=Path, nargs="?", help="one file with both models' outputs")
        parser.add_argument("--champion-trial", type=int, help="instead of a file: the champion's trial id")
        parser.add_argument("--challenger-trial", type=int, help="and the challenger's, validated on the same version")
        parser.add_argument(
            "--champion-audit", type=int, help="instead of columns: the champion's prediction audit of FILE"
        )
        parser.add_argument(
            "--challenger-audit", type=int, help="and the challenger's, of the same file (FILE, given again)"
        )
        parser.add_argument("--label", help="the true binary label column")
        parser.add_argument("--positive", default="1", help="the label value that counts as positive (default 1)")
        parser.add_argument("--champion", help="the model in production (A): its prediction column")
        parser.add_argument("--challenger", help="the model that would replace it (B): its column")
        parser.add_argument("--score", action="store_true", help="the two columns are scores: give both thresholds")
        parser.add_argument("--champion-threshold", type=float, help="A predicts positive when its score >= this")
        parser.add_argument("--challenger-threshold", type=float, help="B predicts positive when its score >= this")
        parser.add_argument(
            "--attribute",
            action="append",
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
        if options["champion_audit"] is not None or options["challenger_audit"] is not None:
            comparison = _compare_audits(options)
        elif options["champion_trial"] is not None or options["challenger_trial"] is not None:
            comparison = _compare_trials(options)
        else:
            comparison = self._compare_file(options)
        if options["output_format"] == "json":
            self.stdout.write(json.dumps({"id": comparison.pk, **comparison.result}, allow_nan=False, indent=2))
        else:
            self.stdout.write(render_table(comparison))
        if options["fail_on_worse"] and comparison.result["verdict"] == paired.WORSE:
            raise CommandError("the challenger is worse for at least one group", returncode=WORSE_EXIT_STATUS)

    def _compare_file(self, options: dict[str, Any]) -> PairedComparison:
        source: Path | None = options["file"]
        if source is None:
            raise CommandError(
                "name the file (or two trials: --champion-trial A --challenger-trial B, or two audits of the file: "
                "--champion-audit A --challenger-audit B FILE)"
            )
        for key in ("label", "champion", "challenger", "attributes"):
            if not options[key]:
                raise CommandError(f"{FLAGS[key]} is required with a file")
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
        return comparison


def _compare_trials(options: dict[str, Any]) -> PairedComparison:
    """Two trials: checked, then compared here (the command waits, so no worker is needed)."""
    if options["file"] is not None:
        raise CommandError("compare a file or two trials, not both")
    for key in ("champion_trial", "challenger_trial"):
        if options[key] is None:
            raise CommandError(f"{FLAGS[key]} is required: a paired comparison needs two trials")
    user = _actor(options["user"])
    try:
        champion = trial_get(user=user, trial_id=options["champion_trial"])
        challenger = trial_get(user=user, trial_id=options["challenger_trial"])
    except Http404 as exc:
        raise CommandError(f"no such trial: {exc}") from exc
    try:
        pending = trial_services.comparison_request_trials(
            user=user, champion=champion, challenger=challenger, power=options["power"], queue=False
        )
    except UserError as exc:
        raise CommandError(f"{FLAGS.get(exc.field, exc.field)}: {exc}" if exc.field else str(exc)) from exc
    comparison = trial_services.comparison_compute_trials(comparison_id=pending.pk) or pending
    comparison.refresh_from_db()
    if comparison.state != "done":
        raise CommandError(f"comparison #{comparison.pk} failed: {comparison.error}")
    return comparison


# What two audits' parameters say: given with --champion-audit, these flags are refused.
AUDIT_SPEC_FLAGS = (
    "label",
    "champion",
    "challenger",
    "attributes",
    "champion_threshold",
    "challenger_threshold",
    "unknown_tokens",
)


def _compare_audits(options: dict[str, Any]) -> PairedComparison:
    """Two audits of FILE: each model taken as its audit took it (docs/comparisons.md, "Two audits")."""
    for key in ("champion_audit", "challenger_audit"):
        if options[key] is None:
            raise CommandError(f"{FLAGS[key]} is required: a paired comparison needs two audits of the same file")
    if options["champion_trial"] is not None or options["challenger_trial"] is not None:
        raise CommandError("compare two audits or two trials, not both")
    given = [key for key in AUDIT_SPEC_FLAGS if options[key]] + (["output"] if options["score"] else [])
    given += ["positive"] if options["positive"] != "1" else []
    if given:
        raise CommandError(
            f"{FLAGS[given[0]]}: taken from the audits with --champion-audit; each model is read as its audit read it"
        )
    source: Path | None = options["file"]
    if source is None:
        raise CommandError("FILE: name the file both audits audited (an audit keeps counts, not the file)")
    user = _actor(options["user"])
    try:
        champion = prediction_audit_get(user=user, audit_id=options["champion_audit"])
        challenger = prediction_audit_get(user=user, audit_id=options["challenger_audit"])
    except Http404 as exc:
        raise CommandError(f"no such audit: {exc}") from exc
    try:
        return audit_services.comparison_create_from_audits(
            user=user,
            champion=champion,
            challenger=challenger,
            source=source,
            original_name=source.name,
            power=options["power"],
            metrics=options["metrics"] or paired.METRICS,
        )
    except UserError as exc:
        raise CommandError(f"{FLAGS.get(exc.field, exc.field)}: {exc}" if exc.field else str(exc)) from exc


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
