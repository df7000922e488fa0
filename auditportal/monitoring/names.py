"""A deployment's name: what it may hold, and how URLs carry it (docs/monitoring.md, "Deployments").

A name is one or more segments joined by ``/`` (``credit-scoring/prod``), so URLs take it with its
slashes as they are: ``/api/v1/deployments/credit-scoring/prod/``. What acts on a deployment, or lists
what belongs to it, follows a ``-`` segment (``/api/v1/deployments/credit-scoring/prod/-/promote/``),
as GitLab separates a project's path from its pages: a segment starts with a letter or a digit, so
``-`` is never part of a name and no name can shadow an action, today's or one added later.
"""

from __future__ import annotations

import re
from typing import Final

MAX_NAME: Final = 100
# One segment: a lowercase letter or digit, then lowercase letters, digits, '.', '_' or '-'.
_SEGMENT = r"[a-z0-9][a-z0-9._-]*"
NAME_PATTERN: Final = rf"{_SEGMENT}(?:/{_SEGMENT})*"
_NAME = re.compile(rf"^{NAME_PATTERN}\Z")

NAME_RULE: Final = (
    f"A deployment's name is 1 to {MAX_NAME} characters: lowercase letters, digits, '.', '_' and '-', in "
    "segments joined by '/', each starting with a letter or a digit (e.g. credit-scoring/prod)"
)


def name_problem(name: object) -> str | None:
    """What is wrong with ``name`` as a deployment's name, in words; None when nothing is."""
    if not isinstance(name, str) or not name:
        return f"{NAME_RULE}; it is empty."
    if len(name) > MAX_NAME:
        return f"{NAME_RULE}; this one is {len(name)} characters long."
    if not _NAME.match(name):
        return f"{NAME_RULE}, not {name[:MAX_NAME]!r}."
    return None


class DeploymentNameConverter:
    """``<deployment:name>`` in the URLconfs: anything that could be a name, slashes included, but no
    segment starting with '-' (the actions' separator). Whether it is a valid name, and names a
    deployment, is the selectors' (a 404 that says which name it did not find)."""

    regex = r"[^/\-][^/]*(?:/[^/\-][^/]*)*"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value
