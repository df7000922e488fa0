"""The monitored attributes, their groups, and the keys they are written under (numpy only).

An attribute's rows carry one code each: 0..len(groups)-1 for its groups, len(groups) for unknown.
:mod:`trainer.data` encodes the shards' rows with these (without torch, so that a bad shard is
refused before torch is imported); :mod:`trainer.bias` counts and reports per group, and re-exports
these names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Confusion cells per group slot (trainer.bias's tn, fp, fn, tp).
CELLS = 4
INTERSECTION_SEP = "&"


def metric_key_part(name: str) -> str:
    """Escape '%', '/' and '&' so no attribute or group name can break the ``a/b/c`` metric key
    layout or be taken apart at the '&' that joins an intersection's names."""
    return name.replace("%", "%25").replace("/", "%2F").replace("&", "%26")


def metric_key(parts: Sequence[str]) -> str:
    """An attribute or group in a metric name: its names (more than one for an intersection), each
    escaped, joined by '&'. ("a", "b&c") and ("a&b", "c") stay apart: ``a&b%26c`` and ``a%26b&c``."""
    return INTERSECTION_SEP.join(metric_key_part(part) for part in parts)


def stats_key(parts: Sequence[str]) -> str:
    """The key of an attribute in bias_stats.json: its names with '%' and '&' escaped, joined by '&'
    (the portal's auditportal/fairness/files/intersections.py attribute_key)."""
    return INTERSECTION_SEP.join(part.replace("%", "%25").replace("&", "%26") for part in parts)


def stats_group_key(values: Sequence[str]) -> str:
    """The key of a group in bias_stats.json: a declared attribute's value as it is, an
    intersection's tuple as :func:`stats_key` (the portal's group_key)."""
    return values[0] if len(values) == 1 else stats_key(values)


@dataclass(frozen=True)
class Attribute:
    """One monitored attribute, or the intersection of several (``names``); codes
    0..len(groups)-1 are groups, len(groups) is unknown. Each group is the tuple of its values, one
    per name: an intersection's groups are never joined into one string, where ("a", "b&c") and
    ("a&b", "c") would both read "a&b&c"."""

    names: tuple[str, ...]
    groups: tuple[tuple[str, ...], ...]

    @classmethod
    def declared(cls, name: str, groups: Sequence[str]) -> Attribute:
        return cls((name,), tuple((group,) for group in groups))

    @property
    def unknown_code(self) -> int:
        return len(self.groups)

    @property
    def n_slots(self) -> int:
        return len(self.groups) + 1


@dataclass(frozen=True)
class GroupLayout:
    """The monitored attributes in column order: the declared ones, then the intersection."""

    attributes: tuple[Attribute, ...]

    @classmethod
    def from_declared(
        cls, declared: Sequence[tuple[str, Sequence[str]]], *, intersect_first_two: bool = True
    ) -> GroupLayout:
        attrs = [Attribute.declared(name, groups) for name, groups in declared]
        if intersect_first_two and len(attrs) >= 2:
            a, b = attrs[0], attrs[1]
            attrs.append(Attribute((*a.names, *b.names), tuple((*ga, *gb) for ga in a.groups for gb in b.groups)))
        return cls(tuple(attrs))

    @property
    def offsets(self) -> tuple[int, ...]:
        out, acc = [], 0
        for attr in self.attributes:
            out.append(acc)
            acc += attr.n_slots
        return tuple(out)

    @property
    def n_slots(self) -> int:
        return sum(a.n_slots for a in self.attributes)

    @property
    def n_cells(self) -> int:
        return self.n_slots * CELLS

    def names(self) -> list[str]:
        return [stats_key(a.names) for a in self.attributes]


def intersection_codes(codes_a: np.ndarray, codes_b: np.ndarray, a: Attribute, b: Attribute) -> np.ndarray:
    """Codes of the intersection of ``a`` and ``b``: unknown when either side is unknown."""
    known = (codes_a < a.unknown_code) & (codes_b < b.unknown_code)
    inter = codes_a.astype(np.int64) * len(b.groups) + codes_b
    return np.where(known, inter, len(a.groups) * len(b.groups)).astype(np.int64)
