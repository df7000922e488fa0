"""Why a gap exists: per-group summaries of per-row feature attributions, and proxy features.

Pure numpy (no Django). Reads what ``python -m trainer.attribute`` writes (trainer/README.md,
"Attributions file"): per sampled validation row, each feature's attribution of the positive class's
probability against a baseline, the rows summing to ``score - baseline_score``. Because of that
completeness, a group's mean score minus the reference group's is exactly the sum over features of
the group's mean attribution minus the reference's: the gap splits into per-feature contributions
that add up to it (docs/attributions.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from auditportal.fairness.errors import UserError

JSON = dict[str, Any]
ATTRIBUTIONS_SCHEMA = 1
FIELD = "attributions"


class AttributionsError(UserError):
    """The attributions file is malformed; the message names the array at fault."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field=FIELD)


def summarise(
    arrays: Mapping[str, Any],
    *,
    seed: int,
    reference: Mapping[str, str] | None = None,
    bootstrap: int = 200,
    tolerance: float = 1e-3,
) -> JSON:
    """The JSON-able summary document of one attributions file (docs/attributions.md).

    ``reference`` maps an attribute key to its reference group (default: the attribute's largest
    group in the sample). Intervals are seeded (``seed``) bootstrap percentiles at 95%, resampling
    rows within each group. Raises :class:`AttributionsError` naming the array at fault.
    """
    raise NotImplementedError


def top_features(
    document: Mapping[str, Any], attribute: str, group: str, kind: str = "score_gap", n: int = 5
) -> list[str]:
    """The ``n`` features with the largest absolute contribution to ``group``'s gap (``kind``:
    "score_gap" or "recall_gap") or, with kind "mean_abs", the largest mean absolute attribution."""
    raise NotImplementedError
