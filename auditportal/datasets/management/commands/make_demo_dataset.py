from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError, CommandParser

from auditportal.accounts.cli import DEMO_STEWARD, PortalCommand, cli_user, demo_steward
from auditportal.datasets import demo, rules, services
from auditportal.datasets.models import DatasetVersion
from auditportal.fairness.errors import UserError
from auditportal.fairness.files.tabular import DEFAULT_UNKNOWN_TOKENS, DatasetSpec
from auditportal.fairness.text import numbers


class Command(PortalCommand):
    help = (
        "Generate the seeded demo credit dataset (no download) with a known recall gap between genders, "
        "register it, and print the new version's id as the last line."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--rows", type=int, default=50_000)
        parser.add_argument("--seed", type=int, default=demo.DEFAULT_SEED)
        parser.add_argument("--name", default="credit-demo")
        parser.add_argument(
            "--user",
            help=f"act as this user (needs the data steward role); by default the demo steward ({DEMO_STEWARD!r}, "
            "made by seed_demo) where that account exists, otherwise the portal-cli system account",
        )
        parser.add_argument(
            "--if-missing", action="store_true", help="do nothing if a dataset of this name already has a version"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["rows"] < 100:
            raise CommandError(f"--rows must be at least 100, got {options['rows']}")
        if options["if_missing"]:
            existing = DatasetVersion.objects.filter(dataset__name=options["name"]).order_by("-number").first()
            if existing is not None:
                self.stdout.write(f"{existing} already exists")
                self.stdout.write(str(existing.pk))
                return
        # Written in a directory of its own and registered from there (the store keeps its copy): two
        # runs at once (two terminals, the suite's parallel workers) never read each other's half-file.
        scratch = Path(settings.VAR_DIR) / "demo"
        scratch.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=scratch) as directory:
            out = Path(directory) / f"credit-demo-{options['rows']}-seed{options['seed']}.csv"
            demo.write_demo_csv(out, rows=options["rows"], seed=options["seed"])
            spec = DatasetSpec(
                label=demo.LABEL,
                positive="1",
                attributes=("gender", "age_group"),
                unknown_tokens=DEFAULT_UNKNOWN_TOKENS,
                max_groups=settings.DATASET_MAX_GROUPS,
            )
            # The demo's dataset belongs to the demo's steward (they can add versions and retire it on
            # the pages), not to the system account, whenever seed_demo made one.
            user = (None if options["user"] is not None else demo_steward()) or cli_user(
                options["user"], role=rules.STEWARD_ROLE
            )
            try:
                version = services.dataset_version_register(
                    user=user, source=out, original_name=out.name, name=options["name"], spec=spec
                )
            except UserError as exc:
                raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"Registered {version}: {numbers.plural(version.num_rows, 'row')}, "
            f"{numbers.count(version.positives)} positive"
        )
        self.stdout.write(str(version.pk))
