"""The trainer's eod taken apart: at each validation, the pair of groups whose recall gap it is, and
that pair's two-sample noise floor, computed by the statistics the verdicts use (:func:`stats.compare`).

The trainer's ``eod`` (trainer/README.md) is, over every attribute and the intersection, the largest
``max - min`` recall among an attribute's groups with at least one positive. The pair that sets it is
the attribute's group with the highest recall and the one with the lowest; its noise floor is the
``noise_floor`` a recall comparison of the two has in :func:`stats.compare` (the half-width of the
familywise interval at no gap), with the lower group as the reference: at ``1 - alpha/k``, k the
attribute's recall comparisons (its groups with positives, less one), as in the attribute's verdict.
When the pair holds the verdict's reference group, the floor is exactly the one the verdict document
stores for that comparison. The experiment page shades it under the eod (docs/dashboard.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from auditportal.fairness.statistics import stats


@dataclass(frozen=True)
class CountSeries:
    """One attribute's confusion counts at each of S validations: ``counts`` shaped (S, G, 4), the
    cells (tp, fn, fp, tn) of ``groups`` (keys) in order; a group absent at a step has zeros there."""

    groups: Sequence[str]
    counts: stats.Counts


@dataclass(frozen=True)
class EodPair:
    """The pair of groups whose recall gap is the eod at one validation."""

    attribute: str
    high: str  # the group with the higher recall
    low: str  # the group with the lower recall
    gap: float  # recall(high) - recall(low): the eod
    noise_floor: float | None  # the pair's two-sample noise floor at its family's level


def eod_pairs(attributes: Mapping[str, CountSeries], *, steps: int, alpha: float) -> list[EodPair | None]:
    """At each of ``steps`` validations, the pair that sets the eod; None where no attribute has two
    groups with positives (the trainer's eod is 0 there, and no gap to explain). Among attributes
    with equal gaps, the pair with the larger floor: the gap may be noise if that one's may."""
    best: list[EodPair | None] = [None] * steps
    for attribute in sorted(attributes):
        series = attributes[attribute]
        counts = np.asarray(series.counts, dtype=np.int64)
        if counts.shape != (steps, len(series.groups), 4):
            raise ValueError(f"{attribute}: counts shaped {counts.shape}, expected ({steps}, {len(series.groups)}, 4)")
        for step, pair in enumerate(_attribute_pairs(attribute, series.groups, counts, alpha)):
            if pair is not None and _before(pair, best[step]):
                best[step] = pair
    return best


def _before(pair: EodPair, current: EodPair | None) -> bool:
    if current is None:
        return True
    floor, current_floor = _floor_key(pair), _floor_key(current)
    return (pair.gap, floor) > (current.gap, current_floor)


def _floor_key(pair: EodPair) -> float:
    return -1.0 if pair.noise_floor is None else pair.noise_floor


def _attribute_pairs(attribute: str, groups: Sequence[str], counts: stats.Counts, alpha: float) -> list[EodPair | None]:
    steps = counts.shape[0]
    if steps == 0 or len(groups) < 2:
        return [None] * steps
    tp, positives = counts[..., 0], counts[..., 0] + counts[..., 1]
    has = positives > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        recall = np.where(has, tp / np.maximum(positives, 1), np.nan)
    valid = has.sum(axis=1) >= 2
    # First highest and first lowest of the groups with positives (by key order of ``groups``).
    high = np.argmax(np.where(has, recall, -np.inf), axis=1)
    low = np.argmin(np.where(has, recall, np.inf), axis=1)
    # Equal recalls everywhere (a gap of 0): any other group with positives makes the pair.
    same = valid & (high == low)
    if same.any():
        others = has & (np.arange(len(groups)) != low[:, None])
        high = np.where(same, np.argmax(others, axis=1), high)
    rows = np.arange(steps)
    gap = recall[rows, high] - recall[rows, low]
    # As compare() would give it for the pair, the lower group the reference: at 1 - alpha/k, k the
    # attribute's other groups with positives (its recall family, as in its verdict).
    family = np.maximum(has.sum(axis=1) - 1, 1)
    floor = stats.pair_noise_floor(
        tp[rows, high], positives[rows, high], tp[rows, low], positives[rows, low], alpha / family
    )
    return [
        EodPair(
            attribute=attribute,
            high=groups[int(high[step])],
            low=groups[int(low[step])],
            gap=float(gap[step]),
            noise_floor=None if np.isnan(floor[step]) else float(floor[step]),
        )
        if valid[step]
        else None
        for step in range(steps)
    ]
