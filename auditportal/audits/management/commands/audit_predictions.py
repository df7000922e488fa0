from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any, cast

from django.conf import settings
from django.core.management.base import CommandError, CommandParser

from auditportal.accounts.cli import PortalCommand, cli_user
from auditportal.accounts.models import Role, User
from auditportal.audits import rules, services
from auditportal.audits.models import PredictionAudit
from auditportal.evidence.selectors import verdict_document_of_audit
from auditportal.fairness.errors import UserError
from auditportal.fairness.files.tabular import DatasetError
from auditportal.fairness.statistics import stats
from auditportal.fairness.statistics.audit import AuditSpec
from auditportal.fairness.text import numbers, presentation

FLAGS = {
    "label": "--label",
    "prediction": "--prediction",
    "score": "--score",
    "threshold": "--threshold",
    "attributes": "--attribute",
    "intersect": "--intersect",
    "tolerance": "--tolerance",
    "alpha": "--alpha",
    "power": "--power",
}
FAIL_ON_EXIT_STATUS = 3


class Command(PortalCommand):
    help = (
        "Audit an existing model's predictions in a CSV or Parquet file: per-group rates with intervals and "
        "sample-size-aware PASS/FAIL/INCONCLUSIVE verdicts against a tolerance. Stores the result."
    )
    # CI pipelines run this on every build. The system checks would import every URL pattern, view and
    # API module first (0.3 s); `manage.py check` and the web server's start run them.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--label", required=True, help="the true binary label column")
        parser.add_argument("--positive", default="1", help="the label value that counts as positive (default 1)")
        parser.add_argument("--prediction", help="the model's 0/1 prediction column")
        parser.add_argument("--score", help="the model's score column (needs --threshold)")
        parser.add_argument("--threshold", type=float, help="predicted positive when score >= threshold")
        parser.add_argument(
            "--attribute",
            action="append",
            required=True,
            dest="attributes",
            help="a sensitive attribute column (repeatable, or comma-separated)",
        )
        parser.add_argument("--intersect", action="store_true", help="also audit the attributes' intersection")
        parser.add_argument(
            "--reference",
            action="append",
            dest="references",
            default=[],
            help="reference group: GROUP (every attribute that has it) or ATTRIBUTE=GROUP (repeatable, or "
            "comma-separated); default: largest group",
        )
        parser.add_argument(
            "--unknown-token",
            action="append",
            dest="unknown_tokens",
            help="a value meaning unknown, matched case-insensitively (repeatable, or comma-separated; replaces "
            "the defaults: empty, NaN, -1, unknown; empty values are always unknown)",
        )
        # Refused with a message: the active fairness policy sets them (`fairness_policy show`).
        parser.add_argument("--tolerance", help="refused: the fairness policy sets it (`fairness_policy show`)")
        parser.add_argument("--alpha", help="refused: the fairness policy sets it (`fairness_policy show`)")
        parser.add_argument(
            "--power", type=float, default=stats.DEFAULT_POWER, help="power for the sample sizes of INCONCLUSIVE"
        )
        parser.add_argument("--format", choices=["json", "table"], default="table", dest="output_format")
        parser.add_argument(
            "--fail-on",
            choices=["FAIL", "INCONCLUSIVE"],
            help=f"exit with status {FAIL_ON_EXIT_STATUS} when the headline verdict (held at alpha over all judged "
            "families) is this or worse (for CI)",
        )
        parser.add_argument("--user", help="act as this user (needs the ML engineer or reviewer role)")

    def run_from_argv(self, argv: list[str]) -> None:
        # On the command line (not call_command) this process exists for this one command. Everything
        # imported so far lives until it exits, and freezing it spares the collector going over it:
        # above all at exit, where finalizing Django's modules otherwise takes 0.1 s.
        gc.freeze()
        super().run_from_argv(argv)

    def handle(self, *args: Any, **options: Any) -> None:
        source: Path = options["file"]
        try:
            services.refuse_policy_parameters([name for name in ("tolerance", "alpha") if options[name] is not None])
        except UserError as exc:
            raise CommandError(f"{FLAGS[cast(str, exc.field)]}: {exc}") from exc
        spec = AuditSpec.from_input(
            label=options["label"],
            positive=options["positive"],
            prediction=options["prediction"],
            score=options["score"],
            threshold=options["threshold"],
            attributes=options["attributes"],
            intersect=options["intersect"],
            references=options["references"],
            unknown_tokens=options["unknown_tokens"],
            power=options["power"],
            max_groups=settings.DATASET_MAX_GROUPS,
        )
        user = _actor(options["user"])
        try:
            audit = services.prediction_audit_run(user=user, source=source, original_name=source.name, spec=spec)
        except DatasetError as exc:
            raise CommandError(str(exc)) from exc  # names the file, row and column itself
        except UserError as exc:
            raise CommandError(f"{FLAGS.get(exc.field, exc.field)}: {exc}" if exc.field else str(exc)) from exc
        for warning in audit.result.get("warnings", ()):
            self.stderr.write(f"warning: {audit.original_name}: {warning}")
        frozen = verdict_document_of_audit(audit=audit)
        if options["output_format"] == "json":
            output = {
                "id": audit.pk,
                **audit.result,
                "policy": frozen.document["policy"],
                "document_sha256": frozen.sha256,
            }
            self.stdout.write(json.dumps(output, allow_nan=False, indent=2))
        else:
            self.stdout.write(render_table(audit))
            self.stdout.write(f"\nverdict document sha256 {frozen.sha256} (policy v{frozen.policy.version})")
        fail_on = options["fail_on"]
        verdict = audit.result["verdict"]
        if fail_on and verdict and stats.VERDICTS.index(verdict) >= stats.VERDICTS.index(fail_on):
            raise CommandError(
                f"the {presentation.document_verdict(audit.result).name} is {verdict}",
                returncode=FAIL_ON_EXIT_STATUS,
            )


def _actor(username: str | None) -> User:
    if username:
        user = User.objects.filter(username=username, is_active=True).first()
        if user is not None and not rules.can_run(user):
            raise CommandError(f"--user {username!r} holds neither the ML engineer nor the reviewer role")
        if user is not None and not user.has_role(Role.ML_ENGINEER):
            return cli_user(username, role=Role.REVIEWER)
    return cli_user(username, role=Role.ML_ENGINEER)


def _policy_text(document: dict[str, Any]) -> str:
    policy = document.get("policy")
    return "" if policy is None else f"fairness policy v{policy['version']}: "


def _note(row: presentation.ComparisonRow) -> str:
    """The row's note; for equalized odds the components' intervals too (the page shows them in the
    interval's cell)."""
    notes = [row.note] if row.note else []
    if row.interval_parts:
        notes.append(f"{', '.join(row.interval_parts)} at {row.parts_level}")
    return "; ".join(notes)


def render_table(audit: PredictionAudit) -> str:
    document = audit.result
    prediction = document["prediction"]
    output = (
        f"prediction column {prediction['column']!r}"
        if prediction["column"]
        else f"score column {prediction['score']!r} >= {prediction['threshold']:g}"
    )
    lines = [
        f"Prediction audit #{audit.pk} of {document['file']['name']} (sha256 {document['file']['sha256']})",
        f"{numbers.count(document['rows'])} rows; label {document['label']['column']!r} positive = "
        f"{document['label']['positive']!r} ({numbers.count(document['label']['positives'])} positive); {output} "
        f"({numbers.count(prediction['predicted_positives'])} predicted positive)",
        f"{_policy_text(document)}tolerance {document['tolerance']:g}, alpha {document['alpha']:g}",
        presentation.document_verdict(document).text,
        *(f"  FAIL at the headline level: {fail}" for fail in presentation.document_verdict(document).fails),
    ]
    for table in presentation.attribute_tables(document):
        lines += [
            "",
            f"== {table.name}: reference {table.reference!r}, {numbers.count(table.unknown)} unknown rows excluded, "
            f"verdict {table.verdict or '—'} ({presentation.ATTRIBUTE_LEVEL})",
            "",
            presentation.text_table(
                ["group", "n", "positives", "negatives", "TPR", "FPR", "FNR", "PPV", "selection rate"],
                [
                    [
                        row.group + (" (ref)" if row.is_reference else ""),
                        numbers.count(row.n),
                        numbers.count(row.positives),
                        numbers.count(row.negatives),
                        *row.rate_texts,
                    ]
                    for row in table.groups
                ],
                right=[False, True, True, True],
            ),
        ]
        if table.comparisons:
            lines += [
                "",
                presentation.text_table(
                    [
                        "metric",
                        "group",
                        "diff",
                        "interval",
                        "level",
                        "noise",
                        "noise 2s",
                        "p",
                        "p adj",
                        "verdict (family α)",
                        "positives needed",
                        "ratio",
                        "ratio interval",
                        "4/5",
                        "note",
                    ],
                    [
                        [
                            row.metric,
                            row.group,
                            row.difference,
                            row.interval,
                            row.level,
                            row.noise_floor,
                            row.noise_floor_family,
                            row.p_value,
                            row.p_adjusted,
                            row.verdict if row.judged else f"({row.verdict})",
                            row.positives_needed,
                            row.ratio,
                            row.ratio_interval,
                            row.ratio_verdict,
                            _note(row),
                        ]
                        for row in table.comparisons
                    ],
                    right=[False, False, True, False, True, True, True, True, True, False, True, True],
                ),
            ]
    return "\n".join(lines)
