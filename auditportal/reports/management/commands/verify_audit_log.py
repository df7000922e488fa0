from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from auditportal.activity.selectors import Anchor, chain_verify, format_time
from auditportal.fairness.errors import UserError
from auditportal.reports import heads

# Named by verify_audit_log; in reports, not activity, because the anchors (the reports' embedded heads
# and the heads signed with the organisation key) live here, and activity sits below reports.
MAX_PROBLEMS_SHOWN = 5


class Command(BaseCommand):
    help = (
        "Walk the activity log's hash chain in order and recompute every hash, then hold it to the heads "
        "recorded outside the log: the head every stored report embeds, each signed head file in "
        "AUDIT_LOG_HEAD_DIR and those named with --anchor. Prints the number of events and the head hash "
        "when all hold; otherwise says what does not and exits non-zero."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--expect-head",
            metavar="HASH",
            help="a head hash printed by an earlier run: fail unless that event is still in the chain "
            "(deleting the newest events leaves a shorter chain that holds)",
        )
        parser.add_argument(
            "--anchor",
            metavar="FILE",
            action="append",
            default=[],
            type=Path,
            help="a signed head file (manage.py audit_log_head export): its signature must hold, and the "
            "chain must still reach its head (repeatable)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        expected: str | None = options["expect_head"]
        anchors = list(heads.report_anchors())
        from_reports = len(anchors)
        files: list[Path] = list(options["anchor"])
        if settings.AUDIT_LOG_HEAD_DIR is not None and settings.AUDIT_LOG_HEAD_DIR.is_dir():
            files += heads.head_files_in(settings.AUDIT_LOG_HEAD_DIR)
        anchors += [self._file_anchor(path) for path in files]
        result = chain_verify(expected_hash=expected, anchors=anchors)
        if result.first_break is not None:
            row, problem = result.first_break.row, result.first_break.problem
            raise CommandError(
                f"The activity log is broken at event id {row.id} (seq {row.seq}, {row.verb}, "
                f"{format_time(row.at)}): {problem}. {result.count} events before it verify."
            )
        if result.anchor_problems:
            shown = "\n".join(f"- {problem}" for problem in result.anchor_problems[:MAX_PROBLEMS_SHOWN])
            more = len(result.anchor_problems) - MAX_PROBLEMS_SHOWN
            raise CommandError(
                f"The chain of {result.count} events holds, but not against {len(result.anchor_problems)} of the "
                f"{result.anchors_checked} heads recorded outside the log:\n{shown}"
                + (f"\n- and {more} more" if more > 0 else "")
            )
        if result.head is None:
            if result.emptied_after_id is not None:
                raise CommandError(
                    f"The activity log is empty, but the database gave out event ids up to {result.emptied_after_id}: "
                    "its events were deleted."
                )
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
        if anchors:
            latest = max(anchors, key=lambda anchor: anchor.seq)
            self.stdout.write(
                f"It holds against {len(anchors)} recorded heads ({from_reports} in reports, "
                f"{len(anchors) - from_reports} in head files); the latest is seq {latest.seq}, from {latest.source}."
            )

    def _file_anchor(self, path: Path) -> Anchor:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CommandError(f"--anchor {path}: cannot read it ({exc.strerror}).") from None
        try:
            return heads.head_file_anchor(data=data, source=f"head file {path}")
        except UserError as exc:
            raise CommandError(str(exc)) from None
