"""Summary documents shaped as fairness/statistics/attributions.summarise's (docs/attributions.md), for the
tests of what the portal does with one (pages, figures, the report) without running a checkpoint."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _gap(features: Sequence[str], total: float) -> dict[str, Any]:
    # The first feature carries most of the gap, the rest share what is left; intervals around each.
    weights = [0.7] + [0.3 / max(1, len(features) - 1)] * (len(features) - 1)
    contributions = {feature: round(total * weight, 6) for feature, weight in zip(features, weights, strict=True)}
    total = round(sum(contributions.values()), 6)
    return {
        "total": total,
        "interval": [round(total - 0.02, 6), round(total + 0.02, 6)],
        "residual": 0.0,
        "beyond_noise": [feature for feature, value in contributions.items() if abs(value) > 0.01],
        "contributions": contributions,
        "intervals": {
            feature: [round(value - 0.01, 6), round(value + 0.01, 6)] for feature, value in contributions.items()
        },
    }


def summary_document(
    *,
    features: Sequence[str] = ("signal", "proxy", "income", "region"),
    attributes: Mapping[str, Sequence[str]] | None = None,
    seed: int = 0,
    size: int = 400,
) -> dict[str, Any]:
    """A done summary: every attribute's first group is the reference, the others have a score gap of
    -0.1 per position (the first feature carries 70% of it) and a recall gap half that."""
    attributes = attributes or {"gender": ("male", "female")}
    sections: dict[str, Any] = {}
    for name, groups in attributes.items():
        reference = groups[0]
        entries: dict[str, Any] = {}
        for index, group in enumerate(groups):
            entries[group] = {
                "sample": size // len(groups),
                "population": 5 * size // len(groups),
                "positives": size // (3 * len(groups)),
                "mean_abs": {
                    feature: round(0.05 / (rank + 1) + 0.001 * index, 6) for rank, feature in enumerate(features)
                },
                "score_gap": None if group == reference else _gap(features, -0.1 * index),
                "recall_gap": None if group == reference else _gap(features, -0.05 * index),
            }
        sections[name] = {
            "reference": reference,
            "groups": entries,
            "proxy_rows": 5 * size,
            "proxies": {
                feature: {
                    "auc": round(0.9 - 0.1 * rank, 6),
                    "auc_group": groups[-1],
                    "auc_chance": 0.55,
                    "mutual_information": round(0.2 / (rank + 1), 6),
                    "mutual_information_chance": 0.01,
                }
                for rank, feature in enumerate(features)
            },
        }
    return {
        "schema": 1,
        "method": "Integrated Gradients (Captum 0.8.0), 64 steps; probability of the positive class",
        "baseline": {"kind": "the training data's mean row (numeric means, categorical nulls)", "score": 0.31},
        "completeness": {"max_error": 2e-5, "tolerance": 1e-3, "holds": True},
        "sample": {"size": size, "seed": seed, "weighted": True},
        "bootstrap": {"replicates": 200, "level": 0.95, "seed": seed},
        "features": list(features),
        "feature_kinds": {feature: "numeric" for feature in features},
        "attributes": sections,
    }
