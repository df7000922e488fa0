"""The audit document as rows of formatted text, shared by the result page and the CLI table."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from auditportal.fairness.files.intersections import group_values, split_key
from auditportal.fairness.statistics import stats
from auditportal.fairness.text import numbers

RATE_COLUMNS = ("tpr", "fpr", "fnr", "ppv", "selection_rate")
METRIC_LABELS = {
    "tpr": "TPR (equal opportunity)",
    "fpr": "FPR",
    "fnr": "FNR",
    "ppv": "PPV (predictive parity)",
    "selection_rate": "Selection rate (demographic parity)",
    "equalized_odds": "Equalized odds",
}
SHORT_LABELS = {
    "tpr": "TPR",
    "fpr": "FPR",
    "fnr": "FNR",
    "ppv": "PPV",
    "selection_rate": "Selection rate",
    "equalized_odds": "Equalized odds",
}


def exact_below(alpha: float) -> int:
    """The count of successes or failures below which a rate's interval at 1 - alpha is exact, as a
    whole number (z⁴ is 14.8 at 95%: a count is below it exactly when it is below 15)."""
    return numbers.whole_below(float(stats.small_cell_threshold(alpha)))


# The tables' numbers, through the one formatter of numbers people read (fairness/text/numbers.py):
# rates, gaps and ratios to 3 significant digits, p-values as "< 0.0001" or 2 significant digits.
def fmt(value: float | None, digits: int = numbers.DIGITS) -> str:
    return numbers.significant(value, digits)


def fmt_signed(value: float | None, digits: int = numbers.DIGITS) -> str:
    return numbers.significant(value, digits, signed=True)


def fmt_p(value: float | None) -> str:
    return numbers.pvalue(value)


def fmt_interval(low: float | None, high: float | None, digits: int = numbers.DIGITS) -> str:
    return numbers.interval(low, high, digits=digits)


HPARAM_DIGITS = 4


def hparam_text(value: object) -> str:
    """A hyperparameter's value as every page shows it (the trial table, progress.json for the live
    page, the charts' hover text): floats to 4 significant digits (``0.0007631``, ``1e-05``),
    integers whole (a seed is never rounded), booleans as JSON writes them, lists item by item."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.{HPARAM_DIGITS}g}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(hparam_text(item) for item in value) + "]"
    if value is None:
        return "null"
    return str(value)


def hparams_text(hparams: Mapping[str, object]) -> list[tuple[str, str]]:
    """``(name, value)`` pairs, sorted by name, each value through :func:`hparam_text`."""
    return [(name, hparam_text(hparams[name])) for name in sorted(hparams)]


@dataclass(frozen=True)
class GroupRow:
    group: str  # the key
    values: tuple[str, ...]  # its value in each of the table's columns
    is_reference: bool
    n: int
    positives: int
    negatives: int
    predicted_positives: int
    rates: list[tuple[str, str]]  # ("0.812", "[0.701, 0.889]") per RATE_COLUMNS entry
    undefined: list[str]

    @property
    def rate_texts(self) -> list[str]:
        return [f"{value} {interval}".strip() for value, interval in self.rates]


@dataclass(frozen=True)
class ComparisonRow:
    metric: str
    metric_label: str
    metric_title: str
    group: str
    group_values: tuple[str, ...]
    difference: str
    ratio: str
    ratio_interval: str  # "" in documents stored before ratios had intervals
    ratio_verdict: str  # four-fifths: PASS, INCONCLUSIVE or FAIL; "" when undefined or not stored
    interval: str  # equalized odds: an interval on the gap's magnitude, "|gap| ≤ 0.401 (TPR)"
    interval_parts: list[str]  # equalized odds: each component's interval, "TPR [-0.401, -0.020]"
    parts_level: str  # the components' level, "99.2%"; "" without components
    level: str
    noise_floor: str  # per group: z·√(p(1−p)/n) at the unadjusted z
    noise_floor_family: str  # two-sample, at the family's z
    p_value: str
    p_adjusted: str
    test: str
    verdict: str
    positives_needed: str
    needed_plan: str  # "towards FAIL at -0.075": the verdict and the gap positives_needed plans for
    not_decidable: bool
    note: str
    judged: bool  # False: shown, but the fairness policy does not count it towards a verdict


@dataclass(frozen=True)
class SpreadRow:
    metric_label: str
    max_minus_min: str
    min_over_max: str
    between: str


@dataclass(frozen=True)
class AttributeTable:
    name: str  # the key
    columns: tuple[str, ...]  # the attribute, or the intersected attributes
    reference: str | None
    reference_values: tuple[str, ...] | None
    unknown: int
    verdict: str | None
    groups: list[GroupRow]
    comparisons: list[ComparisonRow]
    spreads: list[SpreadRow]

    @property
    def is_intersection(self) -> bool:
        return len(self.columns) > 1


def document_tolerance(document: Mapping[str, Any]) -> float:
    """The tolerance δ a document was judged under: its policy's (audits stored before the policy was
    data have only the top-level ``tolerance``, which is the same number)."""
    policy = document.get("policy") or {}
    return float(policy["tolerance"] if "tolerance" in policy else document["tolerance"])


ATTRIBUTE_LEVEL = "the worst of its metrics' verdicts; each metric's comparisons are held at alpha within their family"
COMPARISON_LEVEL = "each comparison at 1 − alpha/k, k the comparisons of its metric in its attribute (its family)"


@dataclass(frozen=True)
class DocumentVerdict:
    """The document's verdict and the level it is held at, in words: the headline verdict, or for a
    document stored before there was one (schema 1), the worst of its families' verdicts."""

    name: str  # "headline verdict", or "overall verdict" for documents stored before the headline
    verdict: str | None
    level: str  # what the verdict holds, "held at alpha 0.05 over all 7 judged families: ..."
    fails: list[str]  # the comparisons that FAIL at the headline level, with their intervals there

    @property
    def text(self) -> str:
        return f"{self.name}: {self.verdict or 'none'} ({self.level})"


def document_verdict(document: Mapping[str, Any]) -> DocumentVerdict:
    verdict = document.get("verdict")
    stored = document.get("headline")
    if stored is None:  # schema 1: the worst over the families, not held at alpha overall
        level = (
            "the worst of the families' verdicts, each held at alpha within its family, not over the audit; "
            "stored before the headline verdict"
        )
        return DocumentVerdict(name="overall verdict", verdict=verdict, level=level, fails=[])
    families = stored["families"]
    if verdict is None:
        level = "nothing to compare"
    else:
        level = (
            f"held at alpha {stored['alpha']:g} over all {families} judged famil{'y' if families == 1 else 'ies'}: "
            f"a FAIL needs an interval at the family's level with alpha/{families} entirely beyond ±δ, a PASS "
            "every judged comparison to PASS at its family's level"
        )
    fails = [
        f"{item['attribute']} {SHORT_LABELS[item['metric']]} {item['group']} "
        f"{fmt_interval(item['ci_low'], item['ci_high'])} at {item['ci_level'] * 100:.4g}%"
        for item in stored["fails"]
    ]
    return DocumentVerdict(name="headline verdict", verdict=verdict, level=level, fails=fails)


def attribute_tables(document: Mapping[str, Any]) -> list[AttributeTable]:
    return [_table(name, data) for name, data in document.get("attributes", {}).items()]


def _table(name: str, data: Mapping[str, Any]) -> AttributeTable:
    reference = data.get("reference")
    # Documents stored before "columns" and "values" were written out have keys that split the same
    # way, except where a bare "&" inside a name made them ambiguous.
    columns = tuple(data.get("columns") or split_key(name))

    def values_of(group: str) -> tuple[str, ...]:
        entry = data["groups"].get(group)
        stored = entry.get("values") if entry is not None else None
        return tuple(stored) if stored else group_values(group, len(columns))

    groups = [
        GroupRow(
            group=group,
            values=values_of(group),
            is_reference=group == reference,
            n=entry["n"],
            positives=entry["positives"],
            negatives=entry["negatives"],
            predicted_positives=entry["predicted_positives"],
            rates=[_rate(entry, metric) for metric in RATE_COLUMNS],
            undefined=entry["undefined"],
        )
        for group, entry in data["groups"].items()
    ]
    comparisons = [_comparison(item, values_of(item["group"])) for item in data["comparisons"]]
    spreads = [
        SpreadRow(
            metric_label=METRIC_LABELS[metric],
            max_minus_min=fmt(item["max_minus_min"]),
            min_over_max=fmt(item["min_over_max"]),
            between=f"{item['max_group']} vs {item['min_group']}" if item["max_group"] is not None else "—",
        )
        for metric, item in data.get("summary", {}).items()
    ]
    return AttributeTable(
        name=name,
        columns=columns,
        reference=reference,
        reference_values=None if reference is None else values_of(reference),
        unknown=data["unknown"],
        verdict=data.get("verdict"),
        groups=groups,
        comparisons=comparisons,
        spreads=spreads,
    )


def _rate(entry: Mapping[str, Any], metric: str) -> tuple[str, str]:
    value = entry[metric]
    interval = entry["ci"][metric]
    if value is None:
        return ("undefined", "")
    return (numbers.rate(value), numbers.interval(interval[0], interval[1], signed=False))


def _comparison(item: Mapping[str, Any], group_values: tuple[str, ...]) -> ComparisonRow:
    # Documents stored before the policy chose metrics judged every comparison.
    judged = bool(item.get("judged", True))
    notes: list[str] = [] if judged else ["not judged under the policy"]
    if item.get("note"):
        notes.append(item["note"])
    if item["undefined"]:
        notes.append("undefined: a rate has no denominator")
    if item.get("component"):
        notes.append(f"larger gap: {item['component'].upper()}")
    # Stored before ratios had intervals: the four-fifths label on the point ratio, as it was.
    if item.get("four_fifths") and "ratio_verdict" not in item:
        notes.append(f"disparate impact {fmt(item['disparate_impact'])}, four-fifths {item['four_fifths']}")
    needed = item.get("positives_needed")
    if item["metric"] == "equalized_odds":
        interval, parts = magnitude_interval(item)
    else:
        interval, parts = fmt_interval(item["ci_low"], item["ci_high"]), []
    parts_level = f"{item['components']['tpr']['ci_level'] * 100:.1f}%" if parts else ""
    # Documents stored before ratios had intervals have a two-sample noise_floor at the unadjusted
    # z, not the family's: only their per-group floor (on the raw rate) is shown.
    family_floor = item["noise_floor"] if "ratio_verdict" in item else None
    group_floor = item.get("noise_floor_group")
    if item.get("needed_reason"):
        notes.append(item["needed_reason"])
    # Documents stored before needed_decidable was written have no key: a null number reads "—".
    if needed is not None:
        needed_text = numbers.count(needed)
    elif item.get("needed_decidable") is False:
        needed_text = "not decidable"
    else:
        needed_text = "—"
    towards, planned = item.get("needed_towards"), item.get("planning_difference")
    needed_plan = f"towards {towards} at {numbers.gap(planned)}" if towards is not None and planned is not None else ""
    return ComparisonRow(
        metric=item["metric"],
        metric_label=SHORT_LABELS[item["metric"]],
        metric_title=METRIC_LABELS[item["metric"]],
        group=item["group"],
        group_values=group_values,
        difference=fmt_signed(item["difference"]),
        ratio=fmt(item["ratio"]),
        ratio_interval=_ratio_interval(item.get("ratio_low"), item.get("ratio_high")),
        ratio_verdict=item.get("ratio_verdict") or "",
        interval=interval,
        interval_parts=parts,
        parts_level=parts_level,
        level=f"{item['ci_level'] * 100:.1f}%" if item["ci_level"] is not None else "—",
        noise_floor="—" if group_floor is None else f"±{numbers.rate(group_floor)}",
        noise_floor_family="" if family_floor is None else f"±{numbers.rate(family_floor)}",
        p_value=fmt_p(item["p_value"]),
        p_adjusted=fmt_p(item["p_adjusted"]),
        test=item["test"] or "—",
        verdict=item["verdict"],
        positives_needed=needed_text,
        needed_plan=needed_plan,
        not_decidable=item.get("needed_decidable") is False,
        note="; ".join(notes),
        judged=judged,
    )


def _ratio_interval(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return ""
    return numbers.interval(low, high, signed=False)


def magnitude_interval(item: Mapping[str, Any]) -> tuple[str, list[str]]:
    """Equalized odds' interval as what it is, an interval on |gap| = max(|ΔTPR|, |ΔFPR|), naming the
    component each bound comes from, and the components' own intervals.

    The document stores it signed like ``difference`` ([-0.401, 0] for a gap of at most 0.401 whose
    observed value is negative); the bounds on the magnitude are the absolute values.
    """
    low, high = item["ci_low"], item["ci_high"]
    if low is None or high is None:
        return "—", []
    smallest = 0.0 if low <= 0 <= high else min(abs(low), abs(high))
    largest = max(abs(low), abs(high))
    components = {name: part for name, part in (item.get("components") or {}).items() if part["ci_low"] is not None}
    parts = [f"{name.upper()} {fmt_interval(part['ci_low'], part['ci_high'])}" for name, part in components.items()]
    if not components:  # stored before the components were
        return (f"|gap| ≤ {fmt(largest)}" if smallest == 0 else f"{fmt(smallest)} ≤ |gap| ≤ {fmt(largest)}"), parts

    def largest_of(part: Mapping[str, Any]) -> float:
        return float(max(abs(part["ci_low"]), abs(part["ci_high"])))

    def smallest_of(part: Mapping[str, Any]) -> float:
        return 0.0 if part["ci_low"] <= 0 <= part["ci_high"] else min(abs(part["ci_low"]), abs(part["ci_high"]))

    upper = max(components, key=lambda name: largest_of(components[name])).upper()
    if smallest == 0:
        return f"|gap| ≤ {fmt(largest)} ({upper})", parts
    lower = max(components, key=lambda name: smallest_of(components[name])).upper()
    if lower == upper:
        return f"{fmt(smallest)} ≤ |gap| ≤ {fmt(largest)} ({upper})", parts
    return f"{fmt(smallest)} ({lower}) ≤ |gap| ≤ {fmt(largest)} ({upper})", parts


# The comparison table as data (the audit page's CSV download): one row per comparison, the numbers
# exactly as stored (fractions, full precision; empty where the document has null).
# Keys of the stored comparison, copied as they are:
STORED_COMPARISON_KEYS = (
    "difference",
    "ci_low",
    "ci_high",
    "ci_level",
    "family_size",
    "ratio",
    "ratio_low",
    "ratio_high",
    "ratio_verdict",
    "p_value",
    "p_adjusted",
    "test",
    "noise_floor_group",
    "noise_floor",
    "positives_needed",
    "n_needed",
    "n_unit",
    "planning_difference",
    "needed_towards",
    "needed_reason",
    "component",
    "undefined",
    "note",
)
COMPARISON_COLUMNS = (
    "attribute",
    "metric",
    "group",
    "group_values",
    "reference",
    "judged",
    "verdict",
    "tolerance",
    "group_n",
    "reference_n",
    "group_rate",
    "reference_rate",
    *STORED_COMPARISON_KEYS,
)


def comparison_records(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every comparison of every attribute of an audit document, keyed by ``COMPARISON_COLUMNS``.

    ``attribute``, ``group`` and ``reference`` are the document's keys (docs/audit-json.md),
    ``group_values`` the group's value per column as a JSON list, ``tolerance`` the δ it was judged
    against; ``group_rate`` and ``reference_rate`` are the compared rates (none for equalized odds,
    which compares two: its ``component`` names the one that gave the difference).
    """
    tolerance = document_tolerance(document)
    records: list[dict[str, Any]] = []
    for table in attribute_tables(document):
        section = document["attributes"][table.name]
        for row, item in zip(table.comparisons, section["comparisons"], strict=True):
            group = section["groups"].get(item["group"], {})
            reference = section["groups"].get(item["reference"], {})
            metric = item["metric"]
            is_rate = metric in RATE_COLUMNS
            records.append(
                {
                    "attribute": table.name,
                    "metric": metric,
                    "group": item["group"],
                    "group_values": json.dumps(list(row.group_values), ensure_ascii=False),
                    "reference": item["reference"],
                    "judged": row.judged,
                    "verdict": item["verdict"],
                    "tolerance": tolerance,
                    "group_n": group.get("n"),
                    "reference_n": reference.get("n"),
                    "group_rate": group.get(metric) if is_rate else None,
                    "reference_rate": reference.get(metric) if is_rate else None,
                    # Keys added to the schema later are empty for documents stored before them.
                    **{key: item.get(key) for key in STORED_COMPARISON_KEYS},
                }
            )
    return records


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[bool] = ()) -> str:
    """A plain aligned table for terminals."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    aligned_right = list(right) + [False] * (len(headers) - len(right))

    def line(cells: Sequence[str]) -> str:
        parts = [
            str(cell).rjust(width) if is_right else str(cell).ljust(width)
            for cell, width, is_right in zip(cells, widths, aligned_right, strict=True)
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])
