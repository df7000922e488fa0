from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError, CommandParser

from auditportal.accounts.cli import PortalCommand, cli_user
from auditportal.datasets import rules, services
from auditportal.fairness.errors import UserError
from auditportal.fairness.files.tabular import DEFAULT_UNKNOWN_TOKENS, DatasetError, DatasetSpec
from auditportal.fairness.text import numbers


class Command(PortalCommand):
    help = "Register a CSV or Parquet file as a new dataset version. Prints the new version's id as the last line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--name", required=True, help="dataset name; an existing name gets a new version")
        parser.add_argument("--label", required=True, help="the binary label column")
        parser.add_argument("--positive", required=True, help="the label value that counts as positive")
        parser.add_argument(
            "--attribute", action="append", required=True, dest="attributes", help="a sensitive attribute column"
        )
        parser.add_argument(
            "--unknown-token",
            action="append",
            dest="unknown_tokens",
            help="a value meaning unknown (repeatable; replaces the defaults: empty, NaN, -1, unknown; "
            "empty values are always unknown)",
        )
        parser.add_argument("--features", help="comma-separated feature columns (default: all remaining)")
        parser.add_argument("--user", help="act as this user (needs the data steward role)")

    def handle(self, *args: Any, **options: Any) -> None:
        source: Path = options["file"]
        tokens = options["unknown_tokens"]
        spec = DatasetSpec(
            label=options["label"],
            positive=options["positive"],
            attributes=tuple(options["attributes"]),
            unknown_tokens=("", *tokens) if tokens is not None else DEFAULT_UNKNOWN_TOKENS,
            features=tuple(f.strip() for f in options["features"].split(",") if f.strip())
            if options["features"]
            else None,
            max_groups=settings.DATASET_MAX_GROUPS,
        )
        user = cli_user(options["user"], role=rules.STEWARD_ROLE)
        try:
            version = services.dataset_version_register(
                user=user, source=source, original_name=source.name, name=options["name"], spec=spec
            )
        except DatasetError as exc:
            raise CommandError(str(exc)) from exc  # names the file, row and column itself
        except UserError as exc:
            raise CommandError(f"--{exc.field}: {exc}" if exc.field else str(exc)) from exc
        for warning in version.warnings:
            self.stderr.write(f"warning: {version.original_name}: {warning}")
        self.stdout.write(
            f"Registered {version} from {version.original_name}: {numbers.plural(version.num_rows, 'row')}, "
            f"{numbers.count(version.positives)} positive, sha256 {version.sha256}"
        )
        for attribute in version.attributes.order_by("position"):
            self.stdout.write(
                f"  {attribute.name}: {numbers.plural(len(attribute.groups), 'group')}, "
                f"{numbers.count(attribute.unknown_count)} unknown"
            )
        self.stdout.write(str(version.pk))
