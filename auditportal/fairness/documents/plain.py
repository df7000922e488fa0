"""A judged document in plain language: the paragraph a committee member reads first (what was judged,
what failed, what is undecided and what would decide it), the method's detail left to the tables.

One source for the portal's plain words about verdicts: the audit page and the verdict document page
open with :func:`document_plain_summary`; a signed report's page-1 summary
(``report_context.plain_summary``) words what the check is and its verdict counts with the same
sentences (:func:`check_sentence`, :func:`verdict_count_sentence`).

Every name in the text comes from a user's file (file, column and group names are hostile): they are
quoted, stripped of control and direction-changing characters, and cut to a readable length here;
the pages escape the text as they escape any other (never ``|safe``).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from auditportal.fairness.documents.findings import FAIL, INCONCLUSIVE, Finding, document_attributes, document_findings
from auditportal.fairness.documents.verdict_documents import PAIRED_COMPARISON
from auditportal.fairness.files.intersections import group_values, split_key
from auditportal.fairness.statistics.stats import Verdict
from auditportal.fairness.text import numbers

# How many failing comparisons and undecided groups the paragraph names; the rest are counted.
NAMED: Final = 3
# Longer names are cut (the tables below show them whole).
NAME_LENGTH: Final = 60

# A rate in words, for "the true-positive rate of ... is 0.213 lower than ...".
RATE_WORDS: Final = {
    "tpr": "true-positive rate",
    "fpr": "false-positive rate",
    "fnr": "false-negative rate",
    "ppv": "precision (PPV)",
    "selection_rate": "selection rate",
}
# A judged metric in words, for "judged on ...".
METRIC_WORDS: Final = {
    "tpr": "the true-positive-rate gap (equal opportunity)",
    "fpr": "the false-positive-rate gap",
    "fnr": "the false-negative-rate gap",
    "ppv": "the precision gap (predictive parity)",
    "selection_rate": "the selection-rate gap (demographic parity)",
    "equalized_odds": "equalized odds (the larger of the true- and false-positive-rate gaps)",
}
ALL_METRICS: Final = ("tpr", "fpr", "fnr", "ppv", "selection_rate", "equalized_odds")


@dataclass(frozen=True)
class PlainSummary:
    """The paragraph, as its parts: ``judged`` (what was judged, under which policy), ``outcome`` (the
    verdict and what failed), ``undecided`` (what is undecided and what would decide it; empty when
    nothing is)."""

    verdict: str | None
    judged: str
    outcome: str
    undecided: str

    @property
    def sentences(self) -> list[str]:
        return [part for part in (self.judged, self.outcome, self.undecided) if part]

    @property
    def text(self) -> str:
        return " ".join(self.sentences)


def quoted(name: object) -> str:
    """A name from a user's file as the summary quotes it: “name”, without control or
    direction-changing characters (a name must not reorder the sentence around it), cut at
    ``NAME_LENGTH`` characters."""
    text = "".join(
        character if not unicodedata.category(character).startswith("C") else "\N{REPLACEMENT CHARACTER}"
        for character in str(name)
    )
    if len(text) > NAME_LENGTH:
        text = text[: NAME_LENGTH - 1] + "…"
    return f"“{text}”"


def and_list(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def percentage_points(tolerance: float) -> str:
    """δ in percentage points, as the report has always said it: 0.05 is ``5``."""
    return f"{tolerance * 100:g}"


def check_sentence(*, tolerance: float, policy_version: int | None) -> str:
    """What the check is, for a reader without statistics (a signed report's page 1)."""
    policy = "" if policy_version is None else f" (fairness policy version {policy_version})"
    return (
        "The model was checked for whether it treats groups of people differently: for each group, how often "
        "it gets people right or wrong, compared with a reference group. A gap larger than "
        f"{percentage_points(tolerance)} percentage points counts as unfair{policy}."
    )


def verdict_count_sentence(*, passes: int, fails: int, inconclusive: int) -> str:
    """How many judged comparisons had each verdict; empty when none was judged."""
    checked = passes + fails + inconclusive
    if not checked:
        return ""
    return (
        f"Of {numbers.plural(checked, 'comparison')}, {numbers.count(passes)} showed no unfair gap (PASS), "
        f"{numbers.count(fails)} showed an unfair gap beyond reasonable doubt (FAIL) and "
        f"{numbers.count(inconclusive)} could not be decided with the data available (INCONCLUSIVE): more data "
        "about the groups concerned would be needed."
    )


def verdict_counts(document: Mapping[str, Any]) -> dict[str, int]:
    """The judged comparisons of a document (an audit document or a verdict document of either kind)
    by verdict: ``{"PASS": n, "INCONCLUSIVE": n, "FAIL": n}``."""
    counts = {verdict.value: 0 for verdict in Verdict}
    for section in document_attributes(document).values():
        for comparison in section.get("comparisons") or []:
            # Documents stored before the policy chose its metrics judged every comparison.
            if comparison.get("judged", True) and comparison.get("verdict") in counts:
                counts[comparison["verdict"]] += 1
    return counts


def document_plain_summary(document: Mapping[str, Any]) -> PlainSummary:
    """The plain-language paragraph of a judged document: a prediction audit's result document
    (docs/audit-json.md) or a frozen verdict document of either kind (docs/verdict-documents.md)."""
    if document.get("kind") == PAIRED_COMPARISON:
        return paired_plain_summary(document)
    # In the attributes' names' order, not the stored mapping's: PostgreSQL's jsonb keeps an object's
    # keys in its own order (shortest first), SQLite as written, and the paragraph must read the same.
    attributes = dict(sorted(document_attributes(document).items(), key=_attribute_order))
    findings = sorted(
        document_findings(document, sha256=""), key=lambda item: (item.attribute, item.metric, item.group)
    )
    counts = verdict_counts(document)
    verdict = document.get("verdict")
    return PlainSummary(
        verdict=verdict,
        judged=_judged(document, attributes),
        outcome=_outcome(verdict, counts, [item for item in findings if item.verdict == FAIL], attributes),
        undecided=_undecided([item for item in findings if item.verdict == INCONCLUSIVE], attributes),
    )


def paired_plain_summary(document: Mapping[str, Any]) -> PlainSummary:
    """The paragraph of a paired comparison's document: "challenger B replaces champion A", for which
    groups B is worse, and which are undecided with the rows that would decide them."""
    comparison = document.get("comparison") or {}
    champion = quoted((document.get("champion") or {}).get("column"))
    challenger = quoted((document.get("challenger") or {}).get("column"))
    policy = _policy(document)
    tolerance = float(policy.get("tolerance") or 0)
    file_name = quoted((document.get("file") or {}).get("name"))
    rows = (document.get("file") or {}).get("rows")
    judged = (
        f"This document compares challenger {challenger} with champion {champion}, the model it would replace, "
        f"on the same {numbers.plural(int(rows or 0), 'row')} of {file_name}, group by group, under fairness "
        f"policy version {policy.get('version')}: a difference larger than {tolerance:g} "
        f"({percentage_points(tolerance)} percentage points) counts."
    )
    findings = document_findings(document, sha256="")
    worse = [item for item in findings if item.verdict == FAIL]
    undecided = [item for item in findings if item.verdict == INCONCLUSIVE]
    verdicts = [
        verdict for section in (comparison.get("attributes") or {}).values() for verdict in section["verdicts"].values()
    ]
    if worse:
        outcome = f"The challenger is worse than the champion for {and_list([_paired_group(f) for f in worse])}."
    elif not verdicts:
        outcome = "Nothing could be compared."
    else:
        better = sum(verdict == "BETTER" for verdict in verdicts)
        others = len(verdicts) - better - len(undecided)
        outcome = (
            f"The challenger is worse for no group: better for {numbers.plural(better, 'group')}, "
            f"equivalent or only different in selection rate for {numbers.count(others)}."
        )
    pending = ""
    if undecided:
        pending = (
            "Undecided: "
            + "; ".join(
                f"{_paired_group(item)} ({item.metric}"
                + (
                    f", about {numbers.count(item.positives_needed)} rows would decide it"
                    if item.positives_needed
                    else ""
                )
                + ")"
                for item in undecided
            )
            + "."
        )
    return PlainSummary(verdict=document.get("verdict"), judged=judged, outcome=outcome, undecided=pending)


def _paired_group(finding: Finding) -> str:
    return f"{quoted(finding.group)} in {quoted(finding.attribute)}"


# --------------------------------------------------------------------------- what was judged


def _policy(document: Mapping[str, Any]) -> Mapping[str, Any]:
    if document.get("policy"):
        return dict(document["policy"])
    audit = document.get("audit") or {}
    policy = dict(audit.get("policy") or {})
    # Audits stored before the policy was data: the top-level tolerance and alpha, every metric judged.
    policy.setdefault("tolerance", document.get("tolerance", audit.get("tolerance")))
    policy.setdefault("alpha", document.get("alpha", audit.get("alpha")))
    return policy


def _subject(document: Mapping[str, Any], attributes: Mapping[str, Any]) -> str:
    kind = document.get("kind")
    if kind == "trial_validation":
        trial = (document.get("trial") or {}).get("number")
        experiment = (document.get("experiment") or {}).get("name")
        first = next(iter(attributes.values()), None)
        rows = (
            sum(group.get("n", 0) for group in (first.get("groups") or {}).values()) + int(first.get("unknown") or 0)
            if first is not None
            else 0
        )
        return (
            f"This document judged trial {trial} of {quoted(experiment)} at validation step "
            f"{numbers.count(document.get('step'))} ({numbers.plural(rows, 'validation row')})"
        )
    audit = document.get("audit") if kind == "prediction_audit" else document
    audit = audit or {}
    rows = audit.get("rows")
    name = (audit.get("file") or document.get("file") or {}).get("name")
    what = "This audit" if kind is None else "This document"
    rows_text = "" if rows is None else f"{numbers.plural(int(rows), 'row')} of "
    return f"{what} judged {rows_text}{quoted(name)}"


def _attribute_order(item: tuple[str, Mapping[str, Any]]) -> tuple[int, str]:
    """Single attributes first, then intersections (by how many columns), each by name."""
    key, section = item
    return len(tuple(section.get("columns") or split_key(key))), key


def _attribute_words(key: str, section: Mapping[str, Any]) -> str:
    columns = tuple(section.get("columns") or split_key(key))
    if len(columns) > 1:
        return f"the intersection of {and_list([quoted(column) for column in columns])}"
    return quoted(columns[0])


def _judged(document: Mapping[str, Any], attributes: Mapping[str, Any]) -> str:
    policy = _policy(document)
    comparisons = [item for section in attributes.values() for item in section.get("comparisons") or []]
    # What the comparisons say was judged (documents stored before the policy chose metrics judged all).
    judged = {item.get("metric") for item in comparisons if item.get("judged", True)}
    if not comparisons:
        judged = set(policy.get("metrics") or ALL_METRICS)
    metrics = [metric for metric in ALL_METRICS if metric in judged]
    on = and_list([_attribute_words(key, section) for key, section in attributes.items()]) or "no attribute"
    version = policy.get("version")
    under = "" if version is None else f" under fairness policy version {version}"
    tolerance = policy.get("tolerance")
    unfair = (
        ""
        if tolerance is None
        else f", where a gap larger than {float(tolerance):g} ({percentage_points(float(tolerance))} "
        "percentage points) counts as unfair"
    )
    shown = any(not item.get("judged", True) for item in comparisons)
    others = "; the other metrics are shown below, not judged" if shown else ""
    return (
        f"{_subject(document, attributes)} for {on}, on {and_list([METRIC_WORDS[m] for m in metrics])}"
        f"{under}{unfair}{others}."
    )


# --------------------------------------------------------------------------- what failed


def _group_words(attribute: str, group: str, attributes: Mapping[str, Any], *, where: bool = True) -> str:
    """A group as the paragraph names it: ``“f” in “gender”`` (``where``: with its attribute), or for an
    intersection each column's value, ``“gender” = “f” and “race” = “b”``."""
    section = attributes.get(attribute) or {}
    columns = tuple(section.get("columns") or split_key(attribute))
    entry = (section.get("groups") or {}).get(group) or {}
    values = tuple(entry.get("values") or group_values(group, len(columns)))
    if len(columns) > 1 and len(values) == len(columns):
        return and_list([f"{quoted(column)} = {quoted(value)}" for column, value in zip(columns, values, strict=True)])
    name = quoted(values[0] if values else group)
    return f"{name} in {quoted(columns[0])}" if where and columns else name


def _level(attribute: str, finding: Finding, attributes: Mapping[str, Any]) -> float | None:
    for comparison in (attributes.get(attribute) or {}).get("comparisons") or []:
        if comparison.get("metric") == finding.metric and comparison.get("group") == finding.group:
            level = comparison.get("ci_level")
            return None if level is None else float(level)
    return None


def _failure_words(finding: Finding, attributes: Mapping[str, Any]) -> str:
    group = _group_words(finding.attribute, finding.group, attributes)
    reference = _group_words(finding.attribute, finding.reference, attributes, where=False)
    difference = finding.difference or 0.0
    way = "lower" if difference < 0 else "higher"
    low, high = finding.ci_low, finding.ci_high
    level = _level(finding.attribute, finding, attributes)
    interval = ""
    if low is not None and high is not None:
        near, far = sorted((abs(low), abs(high)))
        at = "" if level is None else f"{level * 100:.4g}% "
        interval = f" ({at}interval {numbers.rate(near)} to {numbers.rate(far)})"
    size = numbers.rate(abs(difference))
    if finding.metric == "equalized_odds":
        return f"the equalized-odds gap of {group} against {reference} is {size}{interval}"
    rate = RATE_WORDS.get(finding.metric, finding.metric)
    return f"the {rate} of {group} is {size} {way} than that of {reference}{interval}"


def _outcome(
    verdict: str | None, counts: Mapping[str, int], fails: list[Finding], attributes: Mapping[str, Any]
) -> str:
    judged = sum(counts.values())
    if verdict is None or not judged:
        return "Nothing could be compared: no judged metric has two groups with a known value to compare."
    headline = f"The verdict is {verdict}."
    of_judged = f"of {numbers.plural(judged, 'judged comparison')}"
    if not fails:
        if not counts[INCONCLUSIVE]:
            if judged == 1:
                return f"{headline} The one judged comparison passes: its gap lies within the tolerance."
            return (
                f"{headline} All {numbers.count(judged)} judged comparisons pass: each gap lies within the tolerance."
            )
        passed = "none passes yet" if not counts["PASS"] else f"{numbers.count(counts['PASS'])} {of_judged} pass"
        return f"{headline} No comparison fails, and {passed}."
    worst = sorted(fails, key=lambda item: -abs(item.difference or 0.0))
    named = [_failure_words(item, attributes) for item in worst[:NAMED]]
    rest = len(worst) - len(named)
    more = f"; and {numbers.plural(rest, 'other failing comparison')} (the tables below list them)" if rest else ""
    listed = _capital("; ".join(named))
    shows = "shows" if len(fails) == 1 else "show"
    order = ", the largest first" if len(named) > 1 else ""
    where = (
        ""
        if verdict == FAIL
        else " within its metric's family, though not at the stricter level held over the whole document"
    )
    return f"{headline} {numbers.count(len(fails))} {of_judged} {shows} an unfair gap{where}{order}. {listed}{more}."


# --------------------------------------------------------------------------- what is undecided


@dataclass(frozen=True)
class _Need:
    group: str  # in words
    needed: int | None  # the most label positives any of its comparisons needs; None when none plans
    has: int  # the label positives it has


def _undecided(inconclusive: list[Finding], attributes: Mapping[str, Any]) -> str:
    if not inconclusive:
        return ""
    needs: dict[tuple[str, str], _Need] = {}
    for item in inconclusive:
        key = (item.attribute, item.group)
        section = attributes.get(item.attribute) or {}
        entry = (section.get("groups") or {}).get(item.group) or {}
        previous = needs.get(key)
        planned = [
            value for value in (item.positives_needed, previous.needed if previous else None) if value is not None
        ]
        needs[key] = _Need(
            group=_group_words(item.attribute, item.group, attributes),
            needed=max(planned) if planned else None,
            has=int(entry.get("positives") or 0),
        )
    with_plan = sorted(
        ((need, need.needed) for need in needs.values() if need.needed is not None), key=lambda pair: -pair[1]
    )
    no_positives = [need for need in needs.values() if need.needed is None and need.has == 0]
    undecidable = [need for need in needs.values() if need.needed is None and need.has > 0]
    sentences = [f"{numbers.plural(len(inconclusive), 'comparison')} cannot be decided yet."]
    plans: list[str] = []
    for need, needed in with_plan[:NAMED]:
        more = needed - need.has
        plans.append(
            f"{need.group} would need about {numbers.count(more)} more label positives ({numbers.count(needed)} in all)"
            if more > 0
            else f"{need.group} would need about {numbers.count(needed)} label positives in all"
        )
    rest = len(with_plan) - len(plans)
    if rest:
        plans.append(f"{numbers.plural(rest, 'other group')} fewer (the tables say how many)")
    if plans:
        sentences.append(
            f"To decide them, with the reference group growing alongside at its present ratio, {'; '.join(plans)}."
        )
    if no_positives:
        named = and_list([need.group for need in no_positives[:NAMED]])
        beyond = (
            "" if len(no_positives) <= NAMED else f" and {numbers.plural(len(no_positives) - NAMED, 'other group')}"
        )
        sentences.append(f"{_capital(named)}{beyond} {'has' if len(no_positives) == 1 else 'have'} no label positives.")
    if undecidable:
        sentences.append(
            f"For {numbers.plural(len(undecidable), 'group')} no amount of data would decide at the gap observed "
            "(the tables say why)."
        )
    return " ".join(sentences)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
