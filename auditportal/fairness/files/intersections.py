"""The one string key of an attribute or group tuple, and the tuple back from its key. No dependencies.

An intersection is a tuple of attributes and each of its groups a tuple of values, one per
intersected attribute. Joined with a bare "&" two different tuples can read the same: with gender in
{a, a&b} and race in {b&c, c}, (a, b&c) and (a&b, c) are both "a&b&c". So where one string must
stand for a tuple (a JSON object key, a database unique constraint, a shard's ``group_counts``), it
is the tuple's *key*: every part with "%" and "&" percent-encoded ("%25", "%26"), the parts joined by
"&". Different tuples never share a key, and :func:`split_key` gives the tuple back.

Keys of attributes are always encoded, a declared attribute's too, so a column called "R&D" (key
"R%26D") can never be taken for the intersection of "R" and "D". A declared attribute's groups are
keyed by their value as it is: they share a table only with one another, where values are unique.

The trainer (trainer/groups.py) writes the same keys with its own copy of this code, since it imports
nothing from the portal; docs/audit-json.md, docs/shard-format.md and trainer/README.md document it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

SEPARATOR = "&"
_ESCAPED = re.compile("%(25|26)")
_UNESCAPED = {"25": "%", "26": "&"}


def join_key(parts: Sequence[str]) -> str:
    return SEPARATOR.join(part.replace("%", "%25").replace("&", "%26") for part in parts)


def split_key(key: str) -> tuple[str, ...]:
    return tuple(_ESCAPED.sub(lambda match: _UNESCAPED[match.group(1)], part) for part in key.split(SEPARATOR))


def attribute_key(names: Sequence[str]) -> str:
    """The key of a declared attribute (one name) or of an intersection (the intersected names)."""
    return join_key(names)


def group_key(values: Sequence[str]) -> str:
    """A declared attribute's group is keyed by its value; an intersection's by its tuple's key."""
    return values[0] if len(values) == 1 else join_key(values)


def group_values(key: str, arity: int) -> tuple[str, ...]:
    """The values of the group keyed ``key`` in a table of ``arity`` attributes."""
    return (key,) if arity == 1 else split_key(key)
