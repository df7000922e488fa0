"""Who ran the process that writes an event, beyond the portal account it acts as.

A management command acts as a portal account (``--user``), but the person at the shell is an
operating-system user. ``command_context`` (entered by every portal command, accounts/cli.py
``PortalCommand``) names the command and that user; ``event_record`` stores them in the event's
``data`` under ``"cli"``, which the hash chain covers (activity/chain.py), so the log says who typed
the command and no one can change it afterwards.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

# The key in an event's data; no service writes it itself.
CLI_KEY = "cli"

_command: ContextVar[dict[str, str] | None] = ContextVar("activity_command", default=None)


def os_user() -> str:
    """The operating-system account running this process, by its real user id (what ``sudo`` or an
    edited environment cannot disguise), with the login that invoked ``sudo`` where there was one."""
    try:
        import pwd

        name = pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):  # no passwd entry (a container's arbitrary uid), or not POSIX
        name = f"uid {os.getuid()}" if hasattr(os, "getuid") else getpass.getuser()
    sudo_user = os.environ.get("SUDO_USER", "")
    return f"{name} (sudo by {sudo_user})" if sudo_user and sudo_user != name else name


@contextmanager
def command_context(*, command: str, user: str | None = None) -> Iterator[None]:
    """Within this block every event records that ``command`` ran as the operating-system ``user``
    (default: this process's, ``os_user()``)."""
    token = _command.set({"command": command, "os_user": user if user is not None else os_user()})
    try:
        yield
    finally:
        _command.reset(token)


def command_data() -> dict[str, Any] | None:
    """What the running command adds to each event's data, or None outside a command."""
    current = _command.get()
    return None if current is None else dict(current)
