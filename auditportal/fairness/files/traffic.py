"""Synthetic production traffic for a deployed model (``manage.py simulate_traffic``, the demo): seeded
prediction batches whose group mix, base rate and per-group error rates are chosen, so that what the
monitor counts can be compared with what was put in.

Generative story, one seeded ``numpy`` generator per batch (``seed`` and the batch's number fix it):
each row draws its group of every sensitive attribute independently, by that attribute's shares (the
model's training shares by default; the unknown share is written as ``unknown``, one of the portal's
default unknown tokens); its label is 1 (the favourable outcome) with probability ``base_rate``; a row
labelled 1 is refused (prediction 0) with the FNR of its group, a row labelled 0 accepted with the FPR.
Rates are the defaults except for the groups ``overrides`` names (``(attribute, group)``), whose rate
holds for every row of that group whatever its other attributes.

No Django here: the command reads the model's reference and posts the batches.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pyarrow as pa

from auditportal.fairness.errors import UserError

UNKNOWN: Final = "unknown"
ROW_KEY: Final = "row_key"
LABEL: Final = "label"
PREDICTION: Final = "prediction"


@dataclass(frozen=True)
class Rates:
    """A group's error rates; None keeps the default."""

    fnr: float | None = None
    fpr: float | None = None


@dataclass(frozen=True)
class Traffic:
    """What a batch is drawn from. ``shares``: per attribute, per group, its share of the rows
    (``UNKNOWN`` for rows of unknown group); each attribute's shares sum to 1."""

    shares: Mapping[str, Mapping[str, float]]
    base_rate: float = 0.55
    fnr: float = 0.03
    fpr: float = 0.10
    overrides: Mapping[tuple[str, str], Rates] = field(default_factory=dict)

    def check(self) -> None:
        for name, value in (("base_rate", self.base_rate), ("fnr", self.fnr), ("fpr", self.fpr)):
            _rate(value, name)
        if not self.shares:
            raise UserError("The model has no sensitive attribute to draw groups for.", field="deployment")
        for attribute, groups in self.shares.items():
            total = sum(groups.values())
            if not groups or any(share < 0 for share in groups.values()) or not math.isclose(total, 1.0, abs_tol=1e-9):
                raise UserError(f"The shares of {attribute!r} must be at least 0 and sum to 1.", field="shares")
        for (attribute, group), rates in self.overrides.items():
            if group not in self.shares.get(attribute, {}):
                raise UserError(f"{attribute}={group} is not a group of the model's data.", field="drift_group")
            for name, given in (("fnr", rates.fnr), ("fpr", rates.fpr)):
                if given is not None:
                    _rate(given, f"drift_{name}")

    def with_overrides(self, overrides: Mapping[tuple[str, str], Rates]) -> Traffic:
        return Traffic(self.shares, self.base_rate, self.fnr, self.fpr, {**self.overrides, **overrides})


def _rate(value: float, name: str) -> None:
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise UserError(f"--{name.replace('_', '-')} is a rate between 0 and 1, not {value!r}.", field=name)


def shares_from_training(training: Mapping[str, tuple[Mapping[str, int], int]]) -> dict[str, dict[str, float]]:
    """Per attribute the shares of the training rows (``ModelReference.training``: groups' rows and the
    unknown rows), unknown under ``UNKNOWN``."""
    shares: dict[str, dict[str, float]] = {}
    for attribute, (groups, unknown) in training.items():
        rows = {str(group): int(n) for group, n in groups.items() if int(n) > 0}
        if unknown > 0:
            rows[UNKNOWN] = int(unknown)
        total = sum(rows.values())
        if total == 0:
            raise UserError(f"The model's data has no rows of {attribute!r} to take group shares from.")
        shares[attribute] = {group: n / total for group, n in rows.items()}
    return shares


def traffic_batch(traffic: Traffic, *, rows: int, seed: int, number: int, key_prefix: str = "") -> pa.Table:
    """Batch ``number`` (1, 2, ...) of ``rows`` rows: a row key, one column per attribute, the label
    (0/1) and the prediction (0/1). The same arguments give the same table."""
    traffic.check()
    rng = np.random.default_rng([seed, number])
    columns: dict[str, pa.Array[Any]] = {ROW_KEY: pa.array([f"{key_prefix}{number}-{i}" for i in range(rows)])}
    fnr = np.full(rows, traffic.fnr)
    fpr = np.full(rows, traffic.fpr)
    for attribute, shares in traffic.shares.items():
        names = list(shares)
        drawn = rng.choice(len(names), size=rows, p=np.array([shares[name] for name in names]))
        for (at, group), rates in traffic.overrides.items():
            if at != attribute:
                continue
            mask = drawn == names.index(group)
            if rates.fnr is not None:
                fnr[mask] = rates.fnr
            if rates.fpr is not None:
                fpr[mask] = rates.fpr
        columns[attribute] = pa.array(np.array(names, dtype=object)[drawn].tolist(), pa.string())
    label = rng.random(rows) < traffic.base_rate
    draw = rng.random(rows)
    prediction = np.where(label, draw >= fnr, draw < fpr)
    columns[LABEL] = pa.array(label.astype(np.int8))
    columns[PREDICTION] = pa.array(prediction.astype(np.int8))
    return pa.table(columns)
