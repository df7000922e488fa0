from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from auditportal.approvals import selectors
from auditportal.fairness.errors import UserError


class Command(BaseCommand):
    help = (
        "Is this model approved? Prints the gate's answer as JSON and exits 0 when it is approved, 1 otherwise "
        "(also when no review request names it): for CI scripts on the portal's host. Pipelines elsewhere ask "
        "GET /api/v1/gate/?model=ID with a gate token."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--model", required=True, help="the model identifier (checkpoint UUID, name:version)")

    def handle(self, *args: Any, **options: Any) -> None:
        model = options["model"].strip()
        try:
            answer = selectors.gate_answer(model_identifier=model)
        except UserError as exc:
            raise CommandError(f"--{exc.field}: {exc.message}" if exc.field else exc.message) from None
        if answer is None:
            self.stderr.write(f"not approved: no review request names the model {model!r}")
            raise SystemExit(1)
        self.stdout.write(json.dumps(answer.as_json(), indent=2))
        if not answer.approved:
            why = f"not approved: review request #{answer.request} is {answer.state}"
            if answer.suspension is not None:
                why += f": {answer.suspension['reason']}\n{answer.suspension['next']}"
            self.stderr.write(why)
            raise SystemExit(1)
