from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from auditportal.reports.presentation import verification_json, verification_lines
from auditportal.reports.selectors import report_verify


class Command(BaseCommand):
    help = (
        "Check every signature of a PDF report (signer, role, time, valid, trusted against the portal's "
        "certificate authorities, modified after it) and whether it is a report the portal stored. Exits "
        "non-zero on any problem."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--format", choices=["text", "json"], default="text", dest="output_format")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["file"]
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CommandError(f"{path}: {exc.strerror}") from exc
        value = verification_json(report_verify(data=data), file_name=str(path))
        if options["output_format"] == "json":
            self.stdout.write(json.dumps(value, indent=2, ensure_ascii=False))
        else:
            self.stdout.write("\n".join(verification_lines(value)))
        if not value["ok"]:
            raise CommandError(f"{path}: verification failed: {'; '.join(value['problems'])}")
