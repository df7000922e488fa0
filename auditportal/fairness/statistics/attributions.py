"""Why a gap exists: per-group summaries of per-row feature attributions, and proxy features.

Pure numpy (no Django). Reads what ``python -m trainer.attribute`` writes (trainer/README.md,
"Attributions file"): per sampled validation row, each feature's attribution of the positive class's
probability against one baseline row, the row's attributions summing to ``score - baseline_score``.
Because of that completeness, a group's mean score minus the reference group's is the sum over
features of the group's mean attribution minus the reference's (the baseline cancels): the gap
splits into per-feature contributions that add up to it (docs/attributions.md).

Means are weighted by the file's ``weights`` (each row's cell: validation rows over sampled rows;
1 when the file has none), so a group's mean estimates its mean over all its validation rows
although the sample keeps small groups whole. Intervals are seeded bootstrap percentiles: the
rows of the group and of the reference are resampled, each within itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from auditportal.fairness.errors import UserError
from auditportal.fairness.statistics.distributions import normal_quantile

JSON = dict[str, Any]
ATTRIBUTIONS_SCHEMA = 1
FIELD = "attributions"
LEVEL = 0.95
MI_BINS = 10
CODES = "group_codes__"
GAP_KINDS = ("score_gap", "recall_gap")
PROXY_MEASURES = ("auc", "mutual_information")


class AttributionsError(UserError):
    """The attributions file is malformed; the message names the array at fault."""

    def __init__(self, message: str, *, field: str = FIELD) -> None:
        super().__init__(message, field=field)


def _get(arrays: Mapping[str, Any], name: str) -> np.ndarray:
    if name not in arrays:
        raise AttributionsError(f"the attributions file has no {name!r} array")
    return np.asarray(arrays[name])


def _numbers(arrays: Mapping[str, Any], name: str, shape: tuple[int | None, ...]) -> np.ndarray:
    value = _get(arrays, name)
    if value.dtype.kind not in "biuf":
        raise AttributionsError(f"array {name!r} holds {value.dtype} values, not numbers")
    if value.ndim != len(shape) or any(
        want is not None and got != want for got, want in zip(value.shape, shape, strict=True)
    ):
        wanted = " x ".join("any" if want is None else str(want) for want in shape) or "a scalar"
        raise AttributionsError(f"array {name!r} has shape {value.shape}; expected {wanted}")
    if value.dtype.kind == "f" and not np.isfinite(value).all():
        raise AttributionsError(f"array {name!r} holds a value that is not finite")
    return value


def _texts(arrays: Mapping[str, Any], name: str, length: int | None = None) -> list[str]:
    value = _get(arrays, name)
    if value.dtype.kind != "U" or value.ndim != 1 or (length is not None and value.shape[0] != length):
        expected = f"{length} " if length is not None else ""
        raise AttributionsError(f"array {name!r} must hold {expected}strings in one dimension")
    return [str(v) for v in value]


def _text(arrays: Mapping[str, Any], name: str) -> str:
    value = _get(arrays, name)
    if value.dtype.kind != "U" or value.ndim != 0:
        raise AttributionsError(f"array {name!r} must hold one string")
    return str(value)


def _codes(arrays: Mapping[str, Any], name: str, length: int, groups: int) -> np.ndarray:
    value = _numbers(arrays, name, (length,))
    if value.dtype.kind not in "iu" or (value.size and (value.min() < 0 or value.max() > groups)):
        raise AttributionsError(f"array {name!r} must hold group codes from 0 to {groups} ({groups}: unknown)")
    return value.astype(np.int64)


def _weighted_mean(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    out: np.ndarray = weights @ values / weights.sum()
    return out


def _bootstrap(values: np.ndarray, weights: np.ndarray, rng: np.random.Generator, replicates: int) -> np.ndarray:
    """[replicates, ...] weighted means of ``values`` over rows resampled with replacement."""
    n = values.shape[0]
    # Each replicate's count of every row: n draws with replacement (a multinomial, got as a bincount).
    draws = rng.integers(0, n, size=(replicates, n)) + (np.arange(replicates) * n)[:, None]
    counts = np.bincount(draws.reshape(-1), minlength=replicates * n).reshape(replicates, n) * weights
    out: np.ndarray = counts @ values / counts.sum(axis=1, keepdims=True)
    return out


def _gap(
    rows: np.ndarray,
    reference: np.ndarray,
    scores: np.ndarray,
    attributions: np.ndarray,
    weights: np.ndarray,
    features: list[str],
    rng: np.random.Generator,
    replicates: int,
) -> JSON:
    """The mean score of ``rows`` minus the reference's, split per feature, with bootstrap intervals."""
    # One matrix: the score, then each feature's attribution.
    stacked = np.column_stack([scores, attributions])
    gap = _weighted_mean(stacked[rows], weights[rows]) - _weighted_mean(stacked[reference], weights[reference])
    if rows.shape == reference.shape and np.array_equal(rows, reference):
        draws = np.zeros((1, stacked.shape[1]))
    else:
        draws = _bootstrap(stacked[rows], weights[rows], rng, replicates) - _bootstrap(
            stacked[reference], weights[reference], rng, replicates
        )
    tail = (1.0 - LEVEL) / 2.0 * 100.0
    low, high = np.percentile(draws, [tail, 100.0 - tail], axis=0)
    total = float(gap[0])
    contributions = {name: float(gap[1 + j]) for j, name in enumerate(features)}
    intervals = {name: [float(low[1 + j]), float(high[1 + j])] for j, name in enumerate(features)}
    return {
        "total": total,
        "interval": [float(low[0]), float(high[0])],
        "contributions": contributions,
        "intervals": intervals,
        "residual": total - float(gap[1:].sum()),
        "beyond_noise": [name for name in features if intervals[name][0] > 0.0 or intervals[name][1] < 0.0],
    }


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of ``values``, ties sharing their average rank."""
    order = np.argsort(values, kind="mergesort")
    _, first, counts = np.unique(values[order], return_index=True, return_counts=True)
    ranks = np.empty(values.shape[0], dtype=np.float64)
    ranks[order] = np.repeat(first + (counts + 1) / 2.0, counts)
    return ranks


def auc(scores: np.ndarray, members: np.ndarray) -> float:
    """The ROC AUC of ``scores`` for telling ``members`` (bool) from the rest: the Mann-Whitney
    statistic, ties counting one half. 0.5 when either side is empty."""
    return _auc_of_ranks(average_ranks(scores), members)


def _auc_of_ranks(ranks: np.ndarray, members: np.ndarray) -> float:
    positives = int(members.sum())
    negatives = members.shape[0] - positives
    if positives == 0 or negatives == 0:
        return 0.5
    return float((ranks[members].sum() - positives * (positives + 1) / 2.0) / (positives * negatives))


def bin_values(values: np.ndarray, kind: str) -> np.ndarray:
    """Bin indices for the mutual information: a categorical's codes as they are; a numeric
    feature's deciles (at most MI_BINS bins, fewer where values repeat)."""
    if kind == "categorical":
        return values.astype(np.int64)
    edges = np.unique(np.quantile(values, np.arange(1, MI_BINS) / MI_BINS))
    return np.searchsorted(edges, values, side="right").astype(np.int64)


def mutual_information(bins: np.ndarray, codes: np.ndarray) -> float:
    """Plug-in mutual information, in bits, of two discrete variables over the same rows."""
    if bins.shape[0] == 0:
        return 0.0
    _, b = np.unique(bins, return_inverse=True)
    _, g = np.unique(codes, return_inverse=True)
    joint = np.zeros((int(b.max()) + 1, int(g.max()) + 1))
    np.add.at(joint, (b.reshape(-1), g.reshape(-1)), 1.0)
    joint /= joint.sum()
    outer = joint.sum(axis=1, keepdims=True) @ joint.sum(axis=0, keepdims=True)
    cells = joint > 0
    return max(0.0, float((joint[cells] * np.log2(joint[cells] / outer[cells])).sum()))


def _chance_auc(sizes: list[int], total: int) -> float:
    """The folded one-vs-rest AUC that a feature unrelated to the group exceeds with probability
    1 - LEVEL: under no association each group's AUC is about normal around 0.5 with variance
    (n1 + n0 + 1) / (12 n1 n0) (no ties); Bonferroni over the groups, two-sided for the fold."""
    if len(sizes) < 2:
        return 0.5
    z = float(normal_quantile(1.0 - (1.0 - LEVEL) / (2.0 * len(sizes))))
    spread = max(math.sqrt((total + 1) / (12.0 * n1 * (total - n1))) for n1 in sizes)
    return min(1.0, 0.5 + z * spread)


def _chance_mutual_information(bins: int, groups: int, rows: int) -> float:
    """The plug-in mutual information (bits) that independent variables exceed with probability
    1 - LEVEL: 2 rows ln(2) MI is about chi-square with (bins - 1)(groups - 1) degrees of freedom
    (the G-test), whose quantile is taken by Wilson and Hilferty's cube-root approximation."""
    df = (bins - 1) * (groups - 1)
    if df < 1 or rows == 0:
        return 0.0
    z = float(normal_quantile(LEVEL))
    quantile = df * (1.0 - 2.0 / (9.0 * df) + z * math.sqrt(2.0 / (9.0 * df))) ** 3
    return quantile / (2.0 * rows * math.log(2.0))


def proxy_strength(values: np.ndarray, kind: str, codes: np.ndarray, groups: int) -> JSON:
    """How well one feature alone tells each group of an attribute from the rest (unknown rows left out).

    ``auc``: the largest one-vs-rest AUC over the groups, folded (max(a, 1 - a)) so that 0.5 is
    none and 1 is perfect whichever way the feature points. A numeric feature scores by its value;
    a categorical one by its category's share of the group (the best classifier from that feature
    alone, fitted on these rows). ``auc_group`` names the group. ``mutual_information``: in bits,
    between :func:`bin_values` and the group. ``auc_chance`` and ``mutual_information_chance``:
    what a feature unrelated to the group reaches by sampling alone at 95% (a categorical's AUC,
    fitted on the same rows, may pass its chance level with many small categories).
    """
    known = codes < groups
    values, codes = values[known], codes[known]
    best, best_group = 0.5, None
    present = [g for g in range(groups) if (codes == g).any()]
    ranks = average_ranks(values) if kind == "numeric" else None
    if len(present) >= 2:
        for g in present:
            members = codes == g
            if kind == "categorical":
                categories, inverse = np.unique(values, return_inverse=True)
                inverse = inverse.reshape(-1)
                share = np.bincount(inverse, weights=members) / np.bincount(inverse, minlength=categories.shape[0])
                a = auc(share[inverse], members)
            else:
                assert ranks is not None
                a = _auc_of_ranks(ranks, members)
            folded = max(a, 1.0 - a)
            if folded > best:
                best, best_group = folded, g
    bins = bin_values(values, kind)
    mi = mutual_information(bins, codes) if len(present) >= 2 else 0.0
    sizes = [int((codes == g).sum()) for g in present]
    return {
        "auc": best,
        "auc_group": best_group,
        "auc_chance": _chance_auc(sizes, int(codes.shape[0])),
        "mutual_information": mi,
        "mutual_information_chance": _chance_mutual_information(
            int(np.unique(bins).shape[0]), len(present), int(codes.shape[0])
        ),
    }


def summarise(
    arrays: Mapping[str, Any],
    *,
    seed: int,
    reference: Mapping[str, str] | None = None,
    bootstrap: int = 200,
    tolerance: float = 1e-3,
) -> JSON:
    """The JSON-able summary document of one attributions file (docs/attributions.md).

    ``reference`` maps an attribute key to its reference group (default: the attribute's group
    with the most validation rows). Intervals are seeded (``seed``) bootstrap percentiles at 95%,
    resampling rows within each group. Raises :class:`AttributionsError` naming the array at fault.
    """
    if bootstrap < 1:
        raise AttributionsError("bootstrap must be at least 1", field="bootstrap")
    schema = _numbers(arrays, "schema", ())
    if int(schema) != ATTRIBUTIONS_SCHEMA:
        raise AttributionsError(
            f"attributions file schema {int(schema)} is not supported (this reads {ATTRIBUTIONS_SCHEMA})"
        )
    features = _texts(arrays, "features")
    if not features:
        raise AttributionsError("array 'features' names no feature")
    if len(set(features)) != len(features):
        raise AttributionsError("array 'features' names a feature twice")
    kinds = _texts(arrays, "feature_kinds", len(features))
    if set(kinds) - {"numeric", "categorical"}:
        raise AttributionsError("array 'feature_kinds' must hold only 'numeric' and 'categorical'")
    n_features = len(features)
    scores = _numbers(arrays, "scores", (None,)).astype(np.float64)
    n = scores.shape[0]
    if n == 0:
        raise AttributionsError("the attributions file holds no sampled row")
    labels = _numbers(arrays, "labels", (n,))
    if not np.isin(labels, (0, 1)).all():
        raise AttributionsError("array 'labels' must hold only 0 and 1")
    positive = labels == 1
    attributions = _numbers(arrays, "attributions", (n, n_features)).astype(np.float64)
    baseline_score = float(_numbers(arrays, "baseline_score", ()))
    _numbers(arrays, "completeness_error", (n,))
    weights = np.ones(n)
    if "weights" in arrays:
        weights = _numbers(arrays, "weights", (n,)).astype(np.float64)
        if (weights <= 0).any():
            raise AttributionsError("array 'weights' must hold only positive numbers")
    proxy_values = _numbers(arrays, "proxy_values", (None, n_features)).astype(np.float64)
    keys = [name[len(CODES) :] for name in arrays if name.startswith(CODES)]
    references = dict(reference or {})
    unknown_keys = sorted(set(references) - set(keys))
    if unknown_keys:
        raise AttributionsError(f"no attribute {unknown_keys[0]!r} in the attributions file", field="reference")

    error = np.abs(attributions.sum(axis=1) - (scores - baseline_score))
    max_error = float(error.max())
    document: JSON = {
        "schema": ATTRIBUTIONS_SCHEMA,
        "method": _text(arrays, "method"),
        "baseline": {"kind": _text(arrays, "baseline_kind"), "score": baseline_score},
        "completeness": {"max_error": max_error, "tolerance": tolerance, "holds": max_error <= tolerance},
        "sample": {"size": n, "seed": seed, "weighted": "weights" in arrays},
        "bootstrap": {"replicates": bootstrap, "level": LEVEL, "seed": seed},
        "features": features,
        "feature_kinds": dict(zip(features, kinds, strict=True)),
        "attributes": {},
    }
    for index, key in enumerate(keys):
        names = _texts(arrays, f"group_names__{key}")
        codes = _codes(arrays, f"{CODES}{key}", n, len(names))
        population = _numbers(arrays, f"population__{key}", (len(names),)).astype(np.int64)
        proxy_codes = _codes(arrays, f"proxy_group_codes__{key}", proxy_values.shape[0], len(names))
        sample = np.bincount(codes, minlength=len(names) + 1)[: len(names)]
        if not (sample > 0).any():
            raise AttributionsError(f"array '{CODES}{key}' puts no sampled row in a group of {key!r}")
        if key in references:
            if references[key] not in names:
                raise AttributionsError(f"{key!r} has no group {references[key]!r}", field="reference")
            ref = names.index(references[key])
            if sample[ref] == 0:
                raise AttributionsError(f"{key!r}'s group {references[key]!r} has no sampled row", field="reference")
        else:
            ref = max((g for g in range(len(names)) if sample[g] > 0), key=lambda g: (population[g], -g))
        ref_rows = np.flatnonzero(codes == ref)
        ref_positive = ref_rows[positive[ref_rows]]
        groups: JSON = {}
        for g, name in enumerate(names):
            rows = np.flatnonzero(codes == g)
            entry: JSON = {
                "sample": int(rows.shape[0]),
                "population": int(population[g]),
                "positives": int(positive[rows].sum()),
                "mean_abs": None,
                "score_gap": None,
                "recall_gap": None,
            }
            if rows.shape[0]:
                mean_abs = _weighted_mean(np.abs(attributions[rows]), weights[rows])
                entry["mean_abs"] = {feature: float(mean_abs[j]) for j, feature in enumerate(features)}
                rng = np.random.default_rng([seed, index, g, 0])
                entry["score_gap"] = _gap(rows, ref_rows, scores, attributions, weights, features, rng, bootstrap)
                rows_positive = rows[positive[rows]]
                if rows_positive.shape[0] and ref_positive.shape[0]:
                    rng = np.random.default_rng([seed, index, g, 1])
                    entry["recall_gap"] = _gap(
                        rows_positive, ref_positive, scores, attributions, weights, features, rng, bootstrap
                    )
            groups[name] = entry
        proxies: JSON = {}
        for j, (feature, kind) in enumerate(zip(features, kinds, strict=True)):
            strength = proxy_strength(proxy_values[:, j], kind, proxy_codes, len(names))
            group = strength.pop("auc_group")
            proxies[feature] = {**strength, "auc_group": None if group is None else names[group]}
        document["attributes"][key] = {
            "reference": names[ref],
            "groups": groups,
            "proxies": proxies,
            "proxy_rows": int((proxy_codes < len(names)).sum()),
        }
    return document


def top_features(
    document: Mapping[str, Any], attribute: str, group: str, kind: str = "score_gap", n: int = 5
) -> list[str]:
    """The ``n`` features with the largest absolute contribution to ``group``'s gap (``kind``:
    "score_gap" or "recall_gap") or, with kind "mean_abs", the largest mean absolute attribution;
    none when the group has no such gap. Ties keep the features' order."""
    entry = document["attributes"][attribute]["groups"][group]
    if kind == "mean_abs":
        values = entry["mean_abs"]
    elif kind in GAP_KINDS:
        values = entry[kind]["contributions"] if entry[kind] is not None else None
    else:
        raise ValueError(f"kind must be mean_abs, {' or '.join(GAP_KINDS)}, not {kind!r}")
    if values is None:
        return []
    order = sorted(values, key=lambda name: -abs(values[name]))
    return order[:n]


def top_proxies(document: Mapping[str, Any], attribute: str, measure: str = "auc", n: int = 5) -> list[str]:
    """The ``n`` features that tell ``attribute``'s groups apart best by ``measure`` ("auc" or
    "mutual_information"). Ties keep the features' order."""
    if measure not in PROXY_MEASURES:
        raise ValueError(f"measure must be {' or '.join(PROXY_MEASURES)}, not {measure!r}")
    proxies = document["attributes"][attribute]["proxies"]
    return sorted(proxies, key=lambda name: -proxies[name][measure])[:n]
