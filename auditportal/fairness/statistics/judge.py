"""Judge one attribute: per-group confusion counts in, its section of the audit document out
(rates, comparisons with the reference group, verdicts; docs/audit-json.md).

The prediction audit and the per-trial verdicts both judge with it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from auditportal.fairness.statistics import stats

JSON = dict[str, Any]

TEST_NAMES = {"score": "score", "fisher": "fisher", "equalized_odds": "min of tpr/fpr x2"}

HEADLINE_RULE = (
    "FAIL when a judged comparison's interval at 1 - alpha/(F k) lies entirely beyond ±δ (each of the F "
    "judged families, one metric of one attribute with k comparisons, judged again at alpha/F: Bonferroni "
    "over the families); PASS when every judged comparison PASSes at its family's level 1 - alpha/k "
    "(an intersection-union test: a false PASS needs a comparison beyond δ to PASS, at most alpha/k); "
    "otherwise INCONCLUSIVE. Both FAIL and PASS hold alpha over the whole document."
)
# What level each verdict and number of an audit document has; written into the document.
LEVELS = {
    "comparison": (
        "each comparison's interval and verdict at 1 - alpha/k: Bonferroni over the k comparisons of its "
        "family (one metric of one attribute), so each family's verdicts hold alpha"
    ),
    "attribute": (
        "the worst verdict of the attribute's judged families, each held at alpha within itself; the "
        "attribute's verdict is a summary, not held at alpha over its families"
    ),
    "headline": "the document's verdict, held at alpha over all judged families: " + HEADLINE_RULE,
    "p_adjusted": (
        "Holm-adjusted p-values of the test of no gap (score test, or Fisher's exact test in small "
        "cells) within the family. They are not what the verdicts rest on and can disagree with the "
        "intervals: they test a gap of 0, not the tolerance; by another test than the interval's "
        "inversion; and Holm's step-down compares the j-th smallest p with alpha/(k - j + 1), where "
        "every interval is at alpha/k. An adjusted p below alpha while the interval holds 0 is "
        "therefore possible; the verdicts come from the intervals alone"
    ),
}


def number(value: float | np.floating[Any] | stats.Floats) -> float | None:
    """A JSON-safe float: NaN and infinities become None."""
    result = float(value)
    return None if math.isnan(result) or math.isinf(result) else result


def count(value: float | np.floating[Any]) -> int | None:
    result = float(value)
    return None if math.isnan(result) or math.isinf(result) else int(result)


def default_reference(counts: stats.Counts) -> int | None:
    """The group with the most rows (the first of equals), or None without groups."""
    if len(counts) == 0:
        return None
    return int(np.argmax(np.asarray(counts).sum(axis=1)))


def judge_attribute(
    counts: stats.Counts,
    groups: Sequence[str],
    *,
    unknown: int,
    reference: int | None = None,
    tolerance: float = stats.DEFAULT_TOLERANCE,
    alpha: float = stats.DEFAULT_ALPHA,
    power: float = stats.DEFAULT_POWER,
    columns: Sequence[str] | None = None,
    values: Sequence[Sequence[str]] | None = None,
    metrics: Sequence[str] = stats.COMPARED,
    min_group_size: int | None = None,
) -> JSON:
    """The JSON of one attribute: groups, comparisons against the reference, spreads and verdict.

    ``groups`` are the groups' keys; ``columns`` (the attribute, or the intersected attributes) and
    ``values`` (per group, its value in each column), when given, are written out as lists beside
    them, so a reader never has to take a key apart (auditportal/fairness/files/intersections.py).

    The fairness policy's rules: only comparisons of ``metrics`` are judged (count towards the
    attribute's verdict; the others are still shown, with ``judged`` false), and a comparison whose
    group or reference has fewer than ``min_group_size`` rows cannot PASS: it is INCONCLUSIVE with a
    note. It can still FAIL, so a small group never hides a real gap.
    """
    counts = np.asarray(counts, dtype=np.int64).reshape(len(groups), 4)
    if reference is None:
        reference = default_reference(counts)
    rates = stats.group_rates(counts, alpha=alpha)
    group_json = {name: _group(counts[index], rates, index) for index, name in enumerate(groups)}
    if values is not None:
        for name, group_values in zip(groups, values, strict=True):
            group_json[name]["values"] = list(group_values)
    comparisons: list[JSON] = []
    if reference is not None and len(groups) > 1:
        compared = stats.compare(counts, reference=reference, tolerance=tolerance, alpha=alpha, power=power)
        for metric, comparison in compared.items():
            for index, name in enumerate(groups):
                if index != reference:
                    entry = _comparison(metric, name, groups[reference], comparison, index, power)
                    entry["judged"] = metric in metrics
                    entry["note"] = _small_group(entry, counts, index, reference, min_group_size)
                    comparisons.append(entry)
    verdicts = [item["verdict"] for item in comparisons if item["judged"]]
    return {
        **({"columns": list(columns)} if columns is not None else {}),
        "reference": None if reference is None else groups[reference],
        "unknown": int(unknown),
        "groups": group_json,
        "comparisons": comparisons,
        "summary": _summary(rates, groups) if len(groups) else {},
        "verdict": worst(verdicts),
        "verdicts": {name: verdicts.count(name) for name in stats.VERDICTS},
    }


def headline(
    attributes: Mapping[str, JSON],
    counts: Mapping[str, stats.Counts],
    *,
    tolerance: float = stats.DEFAULT_TOLERANCE,
    alpha: float = stats.DEFAULT_ALPHA,
) -> JSON:
    """The document's one verdict over all judged families of ``attributes`` (their judged sections,
    as :func:`judge_attribute` wrote them, from ``counts``, keyed alike), held at alpha overall
    (:func:`stats.headline_verdict`). A family is one judged metric of one attribute with at least
    one defined comparison; ``fails`` lists the comparisons that FAIL at the headline level, with
    their intervals there."""
    sections = [(name, section) for name, section in attributes.items() if section["comparisons"]]
    families = sum(
        1
        for _, section in sections
        for metric in stats.COMPARED
        if any(c["metric"] == metric and c["judged"] and not c["undefined"] for c in section["comparisons"])
    )
    strict_alpha = stats.headline_alpha(alpha, families)
    family_codes: list[npt.NDArray[np.int8]] = []
    strict_codes: list[npt.NDArray[np.int8]] = []
    fails: list[JSON] = []
    for name, section in sections:
        judged = [c for c in section["comparisons"] if c["judged"]]
        if not judged:
            continue
        groups = list(section["groups"])
        table = np.asarray(counts[name], dtype=np.int64).reshape(len(groups), 4)
        strict = stats.compare(
            table,
            reference=groups.index(section["reference"]),
            tolerance=tolerance,
            alpha=strict_alpha,
            p_values=False,
            sample_sizes=False,
        )
        for item in judged:
            index = groups.index(item["group"])
            comparison = strict[item["metric"]]
            code = int(comparison.verdict[index])
            family_codes.append(np.array([stats.VERDICTS.index(item["verdict"])], np.int8))
            strict_codes.append(np.array([code], np.int8))
            if code == stats.FAIL:
                fails.append(
                    {
                        "attribute": name,
                        "metric": item["metric"],
                        "group": item["group"],
                        "ci_low": number(comparison.ci_low[index]),
                        "ci_high": number(comparison.ci_high[index]),
                        "ci_level": number(comparison.level[index]),
                    }
                )
    code = int(stats.headline_verdict(family_codes, strict_codes))
    return {
        "verdict": None if code == stats.NO_VERDICT else stats.VERDICTS[code],
        "alpha": alpha,
        "families": families,
        "level": 1 - strict_alpha if families else None,
        "rule": HEADLINE_RULE,
        "fails": fails,
    }


def _small_group(
    entry: JSON, counts: stats.Counts, index: int, reference: int, min_group_size: int | None
) -> str | None:
    """Demote a PASS resting on a group below the policy's minimum size; the note says why."""
    if min_group_size is None:
        return None
    sizes = {entry["group"]: int(counts[index].sum()), entry["reference"]: int(counts[reference].sum())}
    small = [(name, size) for name, size in sizes.items() if size < min_group_size]
    if not small:
        return None
    name, size = min(small, key=lambda item: item[1])
    role = "the reference" if name == entry["reference"] and name != entry["group"] else "the group"
    if entry["verdict"] == stats.Verdict.PASS:
        entry["verdict"] = stats.Verdict.INCONCLUSIVE.value
        return f"{role} has {size:,} rows, fewer than the policy's minimum of {min_group_size:,}: it cannot PASS"
    return f"{role} has {size:,} rows, fewer than the policy's minimum of {min_group_size:,}"


def worst(verdicts: Sequence[str | None]) -> str | None:
    seen = [stats.VERDICTS.index(v) for v in verdicts if v is not None]
    return stats.VERDICTS[max(seen)] if seen else None


def recall_noise_floor(section: JSON) -> float | None:
    """The largest two-sample noise floor (``noise_floor``, at the family's level) among the defined
    recall (TPR) comparisons of an attribute section; None without one. A recall gap below it may be
    sampling noise in at least one comparison; above it, it exceeds what sampling alone moves any."""
    floors = [
        float(comparison["noise_floor"])
        for comparison in section.get("comparisons", [])
        if comparison.get("metric") == "tpr"
        and not comparison.get("undefined")
        and comparison.get("noise_floor") is not None
    ]
    return max(floors) if floors else None


def _group(cells: stats.Counts, rates: dict[str, stats.Rate], index: int) -> JSON:
    tp, fn, fp, tn = (int(value) for value in cells)
    entry: JSON = {
        "n": tp + fn + fp + tn,
        "positives": tp + fn,
        "negatives": fp + tn,
        "predicted_positives": tp + fp,
        "tp": tp,
        "fn": fn,
        "fp": fp,
        "tn": tn,
    }
    for name, rate in rates.items():
        entry[name] = number(rate.value[index])
    entry["ci"] = {
        name: None if rate.undefined[index] else [number(rate.low[index]), number(rate.high[index])]
        for name, rate in rates.items()
    }
    entry["undefined"] = [name for name, rate in rates.items() if rate.undefined[index]]
    return entry


def _comparison(
    metric: str, group: str, reference: str, comparison: stats.Comparison, index: int, power: float
) -> JSON:
    defined = bool(comparison.defined[index])
    verdict = stats.VERDICTS[int(comparison.verdict[index])]
    if metric == "equalized_odds":
        test = TEST_NAMES["equalized_odds"]
    else:
        test = TEST_NAMES["fisher" if comparison.exact[index] else "score"]
    entry: JSON = {
        "metric": metric,
        "group": group,
        "reference": reference,
        "difference": number(comparison.difference[index]),
        "ratio": number(comparison.ratio[index]),
        "ratio_low": number(comparison.ratio_low[index]),
        "ratio_high": number(comparison.ratio_high[index]),
        "ratio_verdict": _ratio_verdict(comparison, index),
        "ci_low": number(comparison.ci_low[index]),
        "ci_high": number(comparison.ci_high[index]),
        "ci_level": number(comparison.level[index]) if defined else None,
        "family_size": int(comparison.family_size),
        "p_value": number(comparison.p_value[index]),
        "p_adjusted": number(comparison.p_adjusted[index]),
        "test": test if defined else None,
        "noise_floor": number(comparison.noise_floor[index]),
        "noise_floor_group": number(comparison.noise_floor_group[index]),
        "verdict": verdict,
        "positives_needed": count(comparison.positives_needed[index]),
        "n_needed": count(comparison.n_needed[index]),
        "n_unit": stats.DENOMINATOR.get(metric),
        "planning_difference": number(comparison.planning_difference[index]),
        "needed_towards": _towards(int(comparison.needed_towards[index])),
        "needed_decidable": _decidable(int(comparison.needed_reason[index]), verdict, defined),
        "needed_reason": _needed_reason(metric, comparison, index, power),
        "undefined": not defined,
    }
    if metric == "equalized_odds":
        entry["component"] = ("tpr", "fpr")[int(comparison.component[index])] if defined else None
        entry["components"] = {
            name: {
                "difference": number(part.difference[index]),
                "ci_low": number(part.low[index]),
                "ci_high": number(part.high[index]),
                "ci_level": number(part.level[index]) if defined else None,
            }
            for name, part in comparison.components.items()
        }
    if metric == "selection_rate":
        entry["disparate_impact"] = entry["ratio"]
        entry["four_fifths"] = entry["ratio_verdict"]
    return entry


def _ratio_verdict(comparison: stats.Comparison, index: int) -> str | None:
    """The four-fifths verdict on the ratio's interval; None where the ratio is undefined."""
    verdict = int(comparison.ratio_verdict[index])
    return None if verdict == stats.NO_VERDICT else stats.VERDICTS[verdict]


def _towards(code: int) -> str | None:
    return None if code == stats.INCONCLUSIVE else stats.VERDICTS[code]


def _decidable(reason: int, verdict: str, defined: bool) -> bool | None:
    if verdict != stats.Verdict.INCONCLUSIVE or not defined:
        return None
    return reason not in (stats.NEEDED_OVER_CAP, stats.NEEDED_TOO_CLOSE, stats.NEEDED_NO_PASS)


def _needed_reason(metric: str, comparison: stats.Comparison, index: int, power: float) -> str | None:
    """Why ``positives_needed`` is null for an INCONCLUSIVE comparison; None when it is a number."""
    reason = int(comparison.needed_reason[index])
    unit = stats.DENOMINATOR.get(metric, "positives or negatives")
    if reason == stats.NEEDED_OVER_CAP:
        return f"not decidable at this gap: more than {stats.NEEDED_CAP:,} {unit} in the group would be needed"
    if reason == stats.NEEDED_TOO_CLOSE:
        planned = float(comparison.planning_difference[index])
        return (
            f"not decidable at this gap: the data at hand would already decide a gap of {planned:+.3f} "
            f"with power {power:g}, and the observed gap would take more than "
            f"{stats.NEEDED_MAX_GROWTH} times the data"
        )
    if reason == stats.NEEDED_NO_PASS:
        return "not decidable: with a tolerance of 0 no interval lies within ±δ"
    if reason == stats.NEEDED_NO_POSITIVES:
        return f"the group has no label positives; n_needed counts {unit}"
    return None


def _summary(rates: dict[str, stats.Rate], groups: Sequence[str]) -> JSON:
    def name(index: int) -> str | None:
        return None if index < 0 else groups[index]

    return {
        metric: {
            "max_minus_min": number(item.max_minus_min),
            "min_over_max": number(item.min_over_max),
            "max_group": name(int(item.argmax)),
            "min_group": name(int(item.argmin)),
        }
        for metric, item in stats.spreads(rates).items()
    }
