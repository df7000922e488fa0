"""The base of every portal management command that writes: ``PortalCommand`` names the command and
the operating-system user who ran it in each event it writes (activity/context.py).

It lives in activity, the lowest app that writes events, so that a command of any app may use it,
activity's own ``db_roles`` included; accounts.cli re-exports it beside ``cli_user``.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from auditportal.activity.context import command_context


class PortalCommand(BaseCommand):
    """A management command whose events record the command and the operating-system user who ran it
    (``data["cli"]``, covered by the hash chain: activity/context.py)."""

    def execute(self, *args: Any, **options: Any) -> Any:
        with command_context(command=self._command_name()):
            return super().execute(*args, **options)

    def _command_name(self) -> str:
        return type(self).__module__.rsplit(".", 1)[-1]
