from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from django.core.management.base import CommandError, CommandParser

from auditportal.accounts.cli import PortalCommand
from auditportal.datasets.models import DatasetVersion
from auditportal.datasets.services import dataset_version_shard, shard_dir_default
from auditportal.fairness.errors import UserError
from auditportal.fairness.files import sharding
from auditportal.fairness.text import numbers


class Command(PortalCommand):
    help = "Write K stratified Parquet parts of a dataset version (see docs/shard-format.md), or --check them."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("version_id", type=int, metavar="DATASET_ID", help="the dataset version id")
        parser.add_argument("--parts", type=int, required=True, help="number of parts (K)")
        parser.add_argument("--out", type=Path, help="output directory (default: under SHARD_DIR)")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
        parser.add_argument(
            "--check", action="store_true", help="re-read existing parts and report mismatches instead of writing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        version = DatasetVersion.objects.filter(pk=options["version_id"]).first()
        if version is None:
            raise CommandError(f"dataset version {options['version_id']} does not exist")
        parts: int = options["parts"]
        if parts < 1:
            raise CommandError(f"--parts must be at least 1, got {parts}")
        if options["check"]:
            out = options["out"] or shard_dir_default(version=version, parts=parts, seed=options["seed"])
            if not out.is_dir():
                raise CommandError(f"{out}: no shard directory to check (write it first, or pass --out DIR)")
            problems = sharding.check_shards(out)
            for problem in problems:
                self.stderr.write(problem)
            if problems:
                raise CommandError(f"{numbers.plural(len(problems), 'problem')} in {out}")
            self.stdout.write(f"{out}: all parts consistent and balanced")
            return
        out = options["out"] or shard_dir_default(version=version, parts=parts, seed=options["seed"])
        if out.exists() and any(out.iterdir()) and not options["overwrite"]:
            raise CommandError(f"{out} already exists and is not empty; pass --overwrite to replace it")
        try:
            out_dir, manifest = dataset_version_shard(
                version=version,
                parts=parts,
                out_dir=out,
                seed=options["seed"],
                overwrite=options["overwrite"],
            )
        except UserError as exc:
            # A failed integrity check is recorded (and its event written) before this refusal.
            raise CommandError(str(exc)) from exc
        rows = numbers.plural(cast(int, manifest["num_examples"]), "row")
        self.stdout.write(f"Wrote {numbers.plural(parts, 'part')} of {version} ({rows})")
        self.stdout.write(str(out_dir))
