"""A group's counts as the dataset figures read them (a dataset version's intersection rows), for the
figure tests that draw groups without a database."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Group:
    values: tuple[str, ...]
    is_unknown: bool
    rows: int
    positives: int
