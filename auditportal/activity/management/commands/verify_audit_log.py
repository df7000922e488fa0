from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from auditportal.activity.chain import format_time
from auditportal.activity.selectors import chain_verify


class Command(BaseCommand):
    help = (
        "Walk the activity log's hash chain in order and recompute every hash. Prints the number of events "
        "and the head hash when the chain holds; otherwise names the first broken event and exits non-zero."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--expect-head",
            metavar="HASH",
            help="a head hash printed by an earlier run: fail unless that event is still in the chain "
            "(deleting the newest events leaves a shorter chain that holds)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        expected: str | None = options["expect_head"]
        result = chain_verify(expected_hash=expected)
        if result.first_break is not None:
            row, problem = result.first_break.row, result.first_break.problem
            raise CommandError(
                f"The activity log is broken at event id {row.id} (seq {row.seq}, {row.verb}, "
                f"{format_time(row.at)}): {problem}. {result.count} events before it verify."
            )
        if result.head is None:
            if expected:
                raise CommandError(f"The activity log is empty: the expected head {expected} is missing.")
            self.stdout.write("The activity log is empty.")
            return
        if expected and not result.found_expected:
            raise CommandError(
                f"The chain of {result.count} events holds, but the expected head {expected} is not in it: "
                "events after it were deleted, or the log was replaced."
            )
        seq, head = result.head
        self.stdout.write(f"The activity log verifies: {result.count} events, head seq {seq}, hash {head}.")
