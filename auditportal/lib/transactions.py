from __future__ import annotations

from django.db import transaction


def inside_atomic_block() -> bool:
    """Whether the caller holds an open transaction.

    A record that must commit although the action it guards is refused (a failed integrity check, a
    wrong password at a vote) is written in its own durable transaction, which needs this to be False.
    The test runner's own per-test transaction does not count (Django's durable=True makes the same
    exception), so tests can call such services like production code does.
    """
    blocks = transaction.get_connection().atomic_blocks
    return any(not getattr(block, "_from_testcase", False) for block in blocks)
