"""Pair two trials' validation predictions row by row (what ``python -m trainer.predict`` writes).

Pure numpy (no Django). Each side holds, per validation row in shard order, its part and row in part,
the target, the group codes of every monitored attribute (unknown = the attribute's group count) and
the prediction. Two trials pair only when they validated exactly the same rows (same shard layout and
``val_fraction``): anything else is refused naming why, never aligned by guess.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from auditportal.fairness.statistics import paired

JSON = dict[str, Any]
FIELD = "challenger_trial"


def _meta(side: Mapping[str, Any]) -> JSON:
    raw = side["meta"]
    text = raw.item() if isinstance(raw, np.ndarray) else raw
    value: JSON = json.loads(str(text))
    return value


def check_same_rows(champion: Mapping[str, Any], challenger: Mapping[str, Any]) -> None:
    """Raise PairedInputError (``challenger_trial``) unless both sides validated the same rows."""
    a, b = _meta(champion), _meta(challenger)
    if a["val_fraction"] != b["val_fraction"]:
        raise paired.PairedInputError(
            FIELD,
            f"the trials validated on different splits: val_fraction {a['val_fraction']:g} (champion) and "
            f"{b['val_fraction']:g} (challenger); a paired comparison needs the same validation rows",
        )
    if a["attributes"] != b["attributes"]:
        raise paired.PairedInputError(FIELD, "the trials' shards declare different attributes or groups")
    same = (
        champion["part"].shape == challenger["part"].shape
        and np.array_equal(champion["part"], challenger["part"])
        and np.array_equal(champion["row"], challenger["row"])
    )
    if not same:
        raise paired.PairedInputError(
            FIELD,
            f"the trials validated on different rows ({len(champion['part']):,} and {len(challenger['part']):,} "
            "validation rows, or other parts): their shards were written with another layout",
        )
    if not (
        np.array_equal(champion["target"], challenger["target"])
        and np.array_equal(champion["codes"], challenger["codes"])
    ):
        raise paired.PairedInputError(FIELD, "the trials' validation rows hold different labels or groups")


def compare_trials(
    champion: Mapping[str, Any],
    challenger: Mapping[str, Any],
    *,
    tolerance: float,
    alpha: float,
    power: float,
    metrics: Sequence[str] = paired.METRICS,
) -> JSON:
    """The paired comparison of two trials' validation predictions (``paired.compare``'s result, with
    ``rows``, ``agreement`` and the label's ``positives``)."""
    check_same_rows(champion, challenger)
    attributes = _meta(champion)["attributes"]
    label = np.asarray(champion["target"], dtype=np.int64)
    a = np.asarray(champion["predicted"], dtype=np.int64)
    b = np.asarray(challenger["predicted"], dtype=np.int64)
    codes = np.asarray(champion["codes"], dtype=np.int64)
    tables: dict[str, tuple[Sequence[str], paired.Counts, int]] = {}
    for index, attribute in enumerate(attributes):
        groups = list(attribute["groups"])
        column = codes[:, index]
        cells = paired.joint_cells(label, a, b, column, len(groups))
        tables[attribute["name"]] = (groups, cells, int(np.count_nonzero(column >= len(groups))))
    result = paired.compare(tables, tolerance=tolerance, alpha=alpha, power=power, metrics=metrics)
    rows = int(label.shape[0])
    return {
        **result,
        "rows": rows,
        "agreement": int(np.count_nonzero(a == b)) / rows if rows else None,
        "positives": int(label.sum()),
    }
