"""What a signed audit report says, as plain data (docs/reports.md).

A ``ReportContext`` is everything the PDF shows: the subject, the decision and the votes, the
provenance (data, experiment, policy, the activity log's chain head), the frozen verdict documents
whose comparisons it tabulates, waivers, acknowledged INCONCLUSIVE items, figures as SVG, and who signs.
It holds no database object and imports no Django: the approvals app fills one when a request is
decided, the reports app renders, certifies and stores it. ``as_json``/``from_json`` give one JSON
value for it (the report stores it, and its SHA-256 makes generation idempotent).

Also here, because they only read the context: the plain-language summary of page 1, the comparison
tables per document, and the CSV group tables embedded in the PDF beside the verdict documents.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import hashlib
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from auditportal.fairness.documents import plain
from auditportal.fairness.documents.canonical import canonical_json, canonical_sha256
from auditportal.fairness.documents.findings import document_attributes
from auditportal.fairness.documents.verdict_documents import PAIRED_COMPARISON
from auditportal.fairness.text import numbers, presentation
from auditportal.fairness.text.csvsafe import csv_text

# The layout of ``as_json``; a change to its keys or their meaning is a new version. Versions 1 (no
# ``trials``) and 2 (no ``attributions``) are still read: stored reports keep the context they were made from.
SCHEMA_VERSION = 3
READABLE_SCHEMA_VERSIONS = (1, 2, 3)
# How many features of each group's gap, and of the proxies, a report's attribution tables list.
REPORT_TOP_FEATURES = 5

# Above this many attribute tables (all documents together) the report opens with a table of contents.
# Figures do not count: a few pages of them need none, and every PDF viewer lists the headings too.
LONG_REPORT_TABLES = 3

# A local checkpoint's folder name printed as it is (a UUID, "ckpt-12"): letters, digits, . _ -.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

OUTCOMES = ("approved", "rejected", "revoked", "pending")
VOTES = ("approve", "reject", "abstain")

# A stored report's signing state, one vocabulary for the reports API and the review request's answer
# (which counts the reports' events, as approvals sits below reports): awaiting its signatories'
# signatures, or signed by every one of them (at once when none is named: a revocation by an
# administrator outside the committee is signed by the organisation's certification alone).
AWAITING_SIGNATURES = "awaiting_signatures"
SIGNED = "signed"
REPORT_STATES = (AWAITING_SIGNATURES, SIGNED)


def signing_state(*, signatories: int, signed: int) -> str:
    """The state of a report naming ``signatories`` people, ``signed`` of whom have signed it (each
    signatory signs once, and only they sign)."""
    return SIGNED if signed >= signatories else AWAITING_SIGNATURES


RATES = presentation.RATE_COLUMNS


@dataclass(frozen=True)
class Person:
    """A portal user as the report names them: ``key`` is the username, ``name`` how people read it."""

    key: str
    name: str
    role: str


@dataclass(frozen=True)
class Subject:
    """What was decided on: ``kind`` is ``prediction_audit`` or ``trial``; ``details`` are (label, value) rows
    shown on the cover (experiment, trial number, file...)."""

    kind: str
    label: str
    model: str
    details: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Vote:
    member: Person
    vote: str  # one of VOTES
    reason: str
    at: str  # ISO 8601, UTC

    @property
    def at_text(self) -> str:
        return display_time(self.at)


@dataclass(frozen=True)
class Decision:
    outcome: str  # one of OUTCOMES
    at: str  # ISO 8601, UTC
    requester: Person | None
    request_label: str = ""  # e.g. "Review request #12"
    note: str = ""

    @property
    def at_text(self) -> str:
        return display_time(self.at)


@dataclass(frozen=True)
class AttributeGroups:
    """One sensitive attribute of a dataset version: (group, rows) pairs, unknown rows apart."""

    attribute: str
    groups: tuple[tuple[str, int], ...]
    unknown: int = 0


@dataclass(frozen=True)
class DatasetProvenance:
    name: str
    version: int
    sha256: str
    rows: int
    attributes: tuple[AttributeGroups, ...] = ()


@dataclass(frozen=True)
class ExperimentProvenance:
    label: str
    config_sha256: str
    hparams: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class PolicyProvenance:
    version: int
    tolerance: float
    alpha: float
    metrics: tuple[str, ...]
    reference_rule: str
    min_group_size: int | None


@dataclass(frozen=True)
class ChainHead:
    """The activity log's head when the decision was taken (``verify_audit_log --expect-head``)."""

    seq: int
    hash: str


@dataclass(frozen=True)
class _StoredDocument:
    """A stored JSON document a report names and embeds: ``canonical`` is its stored text, byte for byte."""

    label: str
    sha256: str
    canonical: str

    @property
    def document(self) -> dict[str, Any]:
        import json

        value: dict[str, Any] = json.loads(self.canonical)
        return value

    @property
    def short_hash(self) -> str:
        return self.sha256[:12]


@dataclass(frozen=True)
class EvidenceDocument(_StoredDocument):
    """A frozen verdict document: ``canonical`` is its stored text, embedded in the PDF byte for byte."""

    @property
    def verdict(self) -> str | None:
        verdict = self.document.get("verdict")
        return str(verdict) if verdict is not None else None


@dataclass(frozen=True)
class AttributionEvidence(_StoredDocument):
    """The reviewed trial's attributions (docs/attributions.md): why its model has its gaps, per group, and
    which features stand in for a sensitive attribute. ``canonical`` is the stored summary's text, embedded
    in the PDF byte for byte; context for the committee, not a verdict."""

    @property
    def tables(self) -> list[AttributionTable]:
        return attribution_tables(self.document)


@dataclass(frozen=True)
class Waiver:
    scope: str
    reason: str
    expires: str  # ISO date, or "" for none
    approved_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class Acknowledgement:
    """An INCONCLUSIVE item the approving members acknowledged, with the positives it would need."""

    item: str
    positives_needed: str
    by: tuple[str, ...] = ()


@dataclass(frozen=True)
class Figure:
    """A static figure: ``svg`` is the SVG text (rendered from a Plotly figure in the worker)."""

    title: str
    svg: str
    caption: str = ""


@dataclass(frozen=True)
class TrialOverview:
    """One trial of the reviewed trial's experiment as it stood at the decision: a row of the report's
    compact table of trials, and its eod per validation step for the EOD timeline (downsampled:
    ``steps``, ``eod_series`` and ``verdicts``, the verdict in force at each step, are parallel)."""

    number: int
    reviewed: bool
    latest_step: int | None = None
    accuracy: float | None = None
    eod: float | None = None
    lowest_eod: float | None = None
    lowest_eod_step: int | None = None
    noise_floor: float | None = None
    verdict: str | None = None
    hparams: tuple[tuple[str, str], ...] = ()
    steps: tuple[int, ...] = ()
    eod_series: tuple[float | None, ...] = ()
    verdicts: tuple[str | None, ...] = ()

    def __post_init__(self) -> None:
        if not len(self.steps) == len(self.eod_series) == len(self.verdicts):
            raise ValueError(
                f"trial {self.number}: {len(self.steps)} steps, {len(self.eod_series)} eod values and "
                f"{len(self.verdicts)} verdicts: the timeline's series must pair up"
            )


@dataclass(frozen=True)
class ExperimentTrials:
    """Every trial of the experiment a trial report is about, the reviewed one marked: context for the
    committee, not evidence (the reviewed trial's frozen documents are the evidence)."""

    label: str
    tolerance: float | None
    noise_floor: float | None
    trials: tuple[TrialOverview, ...]

    def __post_init__(self) -> None:
        reviewed = [trial.number for trial in self.trials if trial.reviewed]
        if len(reviewed) != 1:
            raise ValueError(f"{self.label}: {len(reviewed)} trials are marked as reviewed, not one")

    @property
    def reviewed(self) -> TrialOverview:
        return next(trial for trial in self.trials if trial.reviewed)

    @property
    def others(self) -> list[TrialOverview]:
        return [trial for trial in self.trials if not trial.reviewed]


@dataclass(frozen=True)
class ReportContext:
    title: str
    organisation: str
    subject: Subject
    policy: PolicyProvenance
    documents: tuple[EvidenceDocument, ...]
    decision: Decision | None = None
    votes: tuple[Vote, ...] = ()
    # Who signs after the organisation's certification: one signature field each, in this order.
    signatories: tuple[Person, ...] = ()
    dataset: DatasetProvenance | None = None
    experiment: ExperimentProvenance | None = None
    chain_head: ChainHead | None = None
    waivers: tuple[Waiver, ...] = ()
    acknowledgements: tuple[Acknowledgement, ...] = ()
    figures: tuple[Figure, ...] = ()
    # A trial report: every trial of its experiment (the compact table, the EOD timeline).
    trials: ExperimentTrials | None = None
    # A trial report: the reviewed checkpoint's attributions, when some were computed (schema 3).
    attributions: tuple[AttributionEvidence, ...] = ()
    schema_version: int = field(default=SCHEMA_VERSION)

    def __post_init__(self) -> None:
        if not self.documents:
            raise ValueError("a report needs at least one verdict document")
        if self.decision is not None and self.decision.outcome not in OUTCOMES:
            raise ValueError(f"decision outcome {self.decision.outcome!r} is not one of {', '.join(OUTCOMES)}")
        for vote in self.votes:
            if vote.vote not in VOTES:
                raise ValueError(f"vote {vote.vote!r} of {vote.member.key} is not one of {', '.join(VOTES)}")
        keys = [person.key for person in self.signatories]
        if len(set(keys)) != len(keys):
            raise ValueError("a signatory is listed twice")

    def as_json(self) -> dict[str, Any]:
        value: dict[str, Any] = _plain(dataclasses.asdict(self))
        # Read from an earlier version's report: its JSON (and SHA-256) stay as they were stored.
        if self.schema_version < 3:
            value.pop("attributions")
        if self.schema_version == 1:
            value.pop("trials")
        return value

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> ReportContext:
        if value.get("schema_version") not in READABLE_SCHEMA_VERSIONS:
            raise ValueError(
                f"report context schema {value.get('schema_version')!r} is not one of "
                f"{', '.join(map(str, READABLE_SCHEMA_VERSIONS))}"
            )
        built: ReportContext = _build(cls, value)
        return built

    @property
    def canonical(self) -> bytes:
        return canonical_json(self.as_json())

    @property
    def sha256(self) -> str:
        return canonical_sha256(self.as_json())

    @property
    def document_tables(self) -> list[DocumentTables]:
        return [document_tables(document) for document in self.documents]

    @property
    def is_long(self) -> bool:
        return sum(len(item.tables) for item in self.document_tables) > LONG_REPORT_TABLES

    @property
    def summary(self) -> list[str]:
        return plain_summary(self)

    @property
    def trial_rows(self) -> list[TrialRow]:
        return trial_rows(self.trials) if self.trials is not None else []


@dataclass(frozen=True)
class DocumentTables:
    """One document's judged attributes as tables, every comparison (PASS too): what the report's
    Findings section shows of it, not only its findings (fairness/documents/findings.py)."""

    document: EvidenceDocument
    verdict: str | None
    tables: list[presentation.AttributeTable]
    # A paired comparison's document: its table per attribute (the audit tables stay empty).
    paired: list[PairedTable] = field(default_factory=list)
    claim: str = ""


@dataclass(frozen=True)
class PairedRow:
    """One group and metric of a paired comparison, as text."""

    metric: str
    group: str
    n: str
    champion: str
    challenger: str
    difference: str
    interval: str
    level: str
    p_adjusted: str
    verdict: str | None
    rows_needed: str


@dataclass(frozen=True)
class PairedTable:
    """One attribute of a paired comparison: each group's verdict over the metrics, and every row."""

    attribute: str
    verdicts: list[tuple[str, str | None]]
    unknown: int
    rows: list[PairedRow]


def document_tables(document: EvidenceDocument) -> DocumentTables:
    value = document.document
    if value.get("kind") == PAIRED_COMPARISON:
        champion = (value.get("champion") or {}).get("column")
        challenger = (value.get("challenger") or {}).get("column")
        return DocumentTables(
            document=document,
            verdict=document.verdict,
            tables=[],
            paired=paired_tables(value.get("comparison") or {}),
            claim=f"Challenger {challenger} replaces champion {champion}",
        )
    return DocumentTables(
        document=document,
        verdict=document.verdict,
        tables=presentation.attribute_tables({"attributes": document_attributes(value)}),
    )


def paired_tables(comparison: Mapping[str, Any]) -> list[PairedTable]:
    """A paired comparison's result (docs/comparisons.md) as the report's tables: per attribute, per
    metric and group, each model's rate, the difference B − A with its paired interval and level,
    McNemar's Holm-adjusted p-value, the verdict and the rows that would decide an INCONCLUSIVE one."""
    tables = []
    for attribute, section in (comparison.get("attributes") or {}).items():
        rows = []
        blocks = section.get("metrics") or {}
        # In the comparison's order of metrics (the canonical document's keys are sorted), groups as listed.
        order = [metric for metric in comparison.get("metrics") or [] if metric in blocks]
        for block in [blocks[metric] for metric in order + sorted(set(blocks) - set(order))]:
            groups = block.get("groups") or {}
            for group in [g for g in section.get("groups") or [] if g in groups] + sorted(
                set(groups) - set(section.get("groups") or [])
            ):
                row = groups[group]
                needed = row.get("rows_needed")
                rows.append(
                    PairedRow(
                        metric=str(block.get("name")),
                        group=str(group),
                        n=numbers.count(row.get("n")),
                        champion=numbers.rate((row.get("champion") or {}).get("rate")),
                        challenger=numbers.rate((row.get("challenger") or {}).get("rate")),
                        difference=numbers.gap(row.get("difference")),
                        interval=numbers.interval(row.get("low"), row.get("high")),
                        level=numbers.percent(row.get("level")),
                        p_adjusted=numbers.pvalue(row.get("p_adjusted")),
                        verdict=row.get("verdict"),
                        rows_needed="" if needed is None else f"{numbers.count(needed)} {block.get('denominator')}",
                    )
                )
        tables.append(
            PairedTable(
                attribute=str(attribute),
                verdicts=[(str(group), verdict) for group, verdict in (section.get("verdicts") or {}).items()],
                unknown=int(section.get("unknown") or 0),
                rows=rows,
            )
        )
    return tables


@dataclass(frozen=True)
class AttributionRow:
    """One group against its attribute's reference in a report's attribution table, as text."""

    group: str
    sample: str
    score_gap: str  # the total with its interval
    recall_gap: str
    contributions: list[str]  # "feature +0.123 [+0.100, +0.140]", largest first; * beyond noise


@dataclass(frozen=True)
class ProxyTableRow:
    feature: str
    auc: str
    auc_chance: str
    mutual_information: str
    mutual_information_chance: str


@dataclass(frozen=True)
class AttributionTable:
    attribute: str
    reference: str
    rows: list[AttributionRow]
    proxies: list[ProxyTableRow]


def _pair(value: Any) -> tuple[float | None, float | None]:
    """An interval ``[low, high]`` from a document, or (None, None)."""
    if isinstance(value, list | tuple) and len(value) == 2:
        return value[0], value[1]
    return None, None


def _gap_text(gap: Mapping[str, Any] | None) -> str:
    if not gap:
        return "—"
    return f"{numbers.gap(gap.get('total'))} {numbers.interval(*_pair(gap.get('interval')))}"


def attribution_tables(document: Mapping[str, Any], *, top: int = REPORT_TOP_FEATURES) -> list[AttributionTable]:
    """A trial's attributions summary (docs/attributions.md) as the report's tables: per attribute, each
    group against the reference (its score and recall gaps with their intervals, the ``top`` features'
    contributions to the score gap, those beyond sampling noise starred) and the ``top`` proxies by AUC."""
    tables = []
    for attribute, section in (document.get("attributes") or {}).items():
        reference = str(section.get("reference"))
        rows = []
        for group, entry in (section.get("groups") or {}).items():
            if str(group) == reference:
                continue
            entry = entry or {}
            score = entry.get("score_gap") or {}
            contributions: Mapping[str, float] = score.get("contributions") or {}
            intervals: Mapping[str, Any] = score.get("intervals") or {}
            beyond = set(score.get("beyond_noise") or ())
            ranked = sorted(contributions, key=lambda feature: (-abs(float(contributions[feature])), feature))[:top]
            rows.append(
                AttributionRow(
                    group=str(group),
                    sample=f"{numbers.count(entry.get('sample'))} of {numbers.count(entry.get('population'))}",
                    score_gap=_gap_text(entry.get("score_gap")),
                    recall_gap=_gap_text(entry.get("recall_gap")),
                    contributions=[
                        f"{feature}{'*' if feature in beyond else ''} {numbers.gap(contributions[feature])} "
                        + numbers.interval(*_pair(intervals.get(feature)))
                        for feature in ranked
                    ],
                )
            )
        proxies: Mapping[str, Mapping[str, Any]] = section.get("proxies") or {}
        strongest = sorted(proxies, key=lambda feature: (-float(proxies[feature].get("auc") or 0.0), feature))[:top]
        tables.append(
            AttributionTable(
                attribute=str(attribute),
                reference=reference,
                rows=rows,
                proxies=[
                    ProxyTableRow(
                        feature=str(feature),
                        auc=numbers.rate(proxies[feature].get("auc")),
                        auc_chance=numbers.rate(proxies[feature].get("auc_chance")),
                        mutual_information=numbers.rate(proxies[feature].get("mutual_information")),
                        mutual_information_chance=numbers.rate(proxies[feature].get("mutual_information_chance")),
                    )
                    for feature in strongest
                ],
            )
        )
    return tables


@dataclass(frozen=True)
class TrialRow:
    """A row of the report's table of trials, as text."""

    number: int
    reviewed: bool
    step: str
    accuracy: str
    eod: str
    lowest_eod: str
    noise_floor: str
    verdict: str | None
    hparams: str


def trial_rows(trials: ExperimentTrials) -> list[TrialRow]:
    """The table of trials: the reviewed one first, then the others by number."""
    ordered = [trials.reviewed, *sorted(trials.others, key=lambda trial: trial.number)]
    return [
        TrialRow(
            number=trial.number,
            reviewed=trial.reviewed,
            step="—" if trial.latest_step is None else str(trial.latest_step),
            accuracy=presentation.fmt(trial.accuracy),
            eod=presentation.fmt(trial.eod),
            lowest_eod=presentation.fmt(trial.lowest_eod)
            + ("" if trial.lowest_eod_step is None else f" (step {trial.lowest_eod_step})"),
            noise_floor=presentation.fmt(trial.noise_floor),
            verdict=trial.verdict,
            hparams=", ".join(f"{name}={value}" for name, value in trial.hparams),
        )
        for trial in ordered
    ]


def group_table_csv(document: EvidenceDocument) -> str:
    """Every group of every attribute of ``document``, with the unrounded counts and rates, as CSV.

    Columns: attribute, group, is_reference, n, positives, negatives, predicted_positives, then each rate
    with its interval (``tpr``, ``tpr_low``, ``tpr_high``, ...); empty where undefined. Values are written
    as the document has them, so a machine can re-check the numbers from the PDF alone; by the one CSV
    writer (``fairness/text/csvsafe.py``): text quoted, and a name that begins like a formula, or with
    ``'``, with one ``'`` before it (``original_text`` takes it off).
    """
    if document.document.get("kind") == PAIRED_COMPARISON:
        return paired_table_csv(document)
    header = ["attribute", "group", "is_reference", "n", "positives", "negatives", "predicted_positives"]
    for rate in RATES:
        header += [rate, f"{rate}_low", f"{rate}_high"]
    rows: list[list[Any]] = []
    for attribute, section in document_attributes(document.document).items():
        reference = section.get("reference")
        for group, entry in section.get("groups", {}).items():
            row: list[Any] = [
                attribute,
                group,
                group == reference,
                entry["n"],
                entry["positives"],
                entry["negatives"],
                entry["predicted_positives"],
            ]
            for rate in RATES:
                value = entry.get(rate)
                low, high = (entry.get("ci") or {}).get(rate) or (None, None)
                if value is None:
                    low = high = None
                row += [value, low, high]
            rows.append(row)
    return csv_text(header, rows)


PAIRED_CSV_HEADER = (
    "attribute", "metric", "group", "n", "champion", "champion_low", "champion_high", "challenger",
    "challenger_low", "challenger_high", "both", "only_champion", "only_challenger", "neither", "difference",
    "low", "high", "level", "p_value", "p_exact", "p_adjusted", "verdict", "rows_needed",
)  # fmt: skip


def paired_table_csv(document: EvidenceDocument) -> str:
    """A paired comparison's every attribute, metric and group with the unrounded values, as CSV (the
    one CSV writer: names that begin like a formula are quoted with ``'``)."""
    comparison = document.document.get("comparison") or {}
    rows: list[list[Any]] = []
    for attribute, section in (comparison.get("attributes") or {}).items():
        for metric, block in (section.get("metrics") or {}).items():
            for group, row in (block.get("groups") or {}).items():
                champion, challenger = row.get("champion") or {}, row.get("challenger") or {}
                table = row.get("table") or {}
                rows.append(
                    [attribute, metric, group, row.get("n")]
                    + [champion.get(key) for key in ("rate", "low", "high")]
                    + [challenger.get(key) for key in ("rate", "low", "high")]
                    + [table.get(key) for key in ("both", "only_champion", "only_challenger", "neither")]
                    + [row.get(key) for key in PAIRED_CSV_HEADER[14:]]
                )
    return csv_text(list(PAIRED_CSV_HEADER), rows)


def plain_summary(context: ReportContext) -> list[str]:
    """Page 1's summary, in sentences a reader without statistics follows."""
    sentences: list[str] = []
    decision = context.decision
    if decision is not None and decision.outcome != "pending":
        sentences.append(
            f"The ethics committee {decision.outcome} {context.subject.label} on {display_time(decision.at)[:10]}"
            + (f" ({decision.request_label})." if decision.request_label else ".")
        )
        approve = sum(vote.vote == "approve" for vote in context.votes)
        reject = sum(vote.vote == "reject" for vote in context.votes)
        abstain = sum(vote.vote == "abstain" for vote in context.votes)
        if context.votes:
            sentences.append(
                f"{_count(len(context.votes), 'member')} voted: {approve} to approve, {reject} to reject"
                + (f", {abstain} abstained." if abstain else ".")
            )
    else:
        sentences.append(f"This report describes {context.subject.label}; no decision is recorded in it.")
    # The same words as the pages' plain-language paragraphs (fairness/documents/plain.py).
    sentences.append(plain.check_sentence(tolerance=context.policy.tolerance, policy_version=context.policy.version))
    counts = [plain.verdict_counts(document.document) for document in context.documents]
    counted = plain.verdict_count_sentence(
        passes=sum(item["PASS"] for item in counts),
        fails=sum(item["FAIL"] for item in counts),
        inconclusive=sum(item["INCONCLUSIVE"] for item in counts),
    )
    if counted:
        sentences.append(counted)
    for document in context.documents:
        if document.document.get("kind") == PAIRED_COMPARISON:
            paired = plain.paired_plain_summary(document.document)
            sentences += [part for part in (paired.judged, paired.outcome, paired.undecided) if part]
    if context.trials is not None and len(context.trials.trials) > 1:
        reviewed = context.trials.reviewed
        sentences.append(
            f"Only trial {reviewed.number} was decided on. It is one of {len(context.trials.trials)} trials of "
            f"{context.trials.label}, which were trained with different settings; the table of trials and the EOD "
            "timeline show how the others compared, for context."
        )
    for attribution in context.attributions:
        value = attribution.document
        sample = value.get("sample") or {}
        sentences.append(
            f"Why the gaps: the reviewed checkpoint's feature attributions ({value.get('method', 'attributions')}, "
            f"on {numbers.count(sample.get('size'))} validation rows, seed {sample.get('seed')}) split each group's "
            "gap against its reference into the features that carry it, and name the features that stand in for "
            "a sensitive attribute (section Why the gaps); they explain the model, they are not a verdict."
        )
    if context.waivers:
        waived = len(context.waivers)
        sentences.append(
            f"{_count(waived, 'failing item')} {_was(waived)} accepted by a waiver, with a reason and an expiry "
            "date (see Findings)."
        )
    if context.acknowledgements:
        acknowledged = len(context.acknowledgements)
        sentences.append(
            f"{_count(acknowledged, 'undecided item')} {_was(acknowledged)} acknowledged by the approving members."
        )
    sentences.append(
        "The numbers behind this report are attached to this PDF as files (the frozen verdict documents as JSON "
        "and the group tables as CSV), and the report is digitally signed: any change to it after signing shows."
    )
    return sentences


def checkpoint_label(checkpoint: str) -> str:
    """A checkpoint as a report prints it: a Determined checkpoint's UUID as it is; a local one (the
    local backend records its folder, a path on the server) as "local checkpoint <the folder's name>",
    or "local checkpoint <the path's SHA-256, 12 digits>" when that name is not a plain token. Never
    the path itself: a report leaves the portal, its server's folders stay inside."""
    value = checkpoint.strip()
    if "/" not in value and "\\" not in value:
        return value
    name = value.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    if _PLAIN_NAME.fullmatch(name) is None:
        name = hashlib.sha256(value.encode()).hexdigest()[:12]
    return f"local checkpoint {name}"


def display_time(value: str) -> str:
    """An ISO 8601 time as the report prints it, ``2026-11-30 14:05 UTC``; unparseable text as it is."""
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        return value
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC)
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def _count(number: int, noun: str) -> str:
    return numbers.plural(number, noun)


def _was(number: int) -> str:
    return "was" if number == 1 else "were"


def plain_json(value: Any) -> Any:
    """``dataclasses.asdict``'s value as plain JSON: string keys, tuples as lists (the monitoring
    report's context, fairness/documents/monitoring_report.py, is written with it too)."""
    return _plain(value)


def build_from_json(kind: Any, value: Any) -> Any:
    """Plain JSON ``value`` as an instance of the dataclass ``kind`` (dataclasses, tuples, optionals)."""
    return _build(kind, value)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _build(kind: Any, value: Any) -> Any:
    """``value`` (plain JSON) as an instance of the annotated type ``kind``: dataclasses, tuples, optionals."""
    origin = typing.get_origin(kind)
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        hints = _hints(kind)
        unknown = set(value) - hints.keys()
        if unknown:
            raise ValueError(f"{kind.__name__}: unknown keys {', '.join(sorted(unknown))}")
        return kind(**{name: _build(hints[name], item) for name, item in value.items()})
    if origin in (typing.Union, types.UnionType):
        options = [option for option in typing.get_args(kind) if option is not type(None)]
        return None if value is None else _build(options[0], value)
    if origin is tuple:
        arguments = typing.get_args(kind)
        if len(arguments) == 2 and arguments[1] is Ellipsis:
            if _is_plain(arguments[0]):
                return tuple(value)  # a timeline's thousands of numbers: nothing to convert one by one
            return tuple(_build(arguments[0], item) for item in value)
        return tuple(_build(argument, item) for argument, item in zip(arguments, value, strict=True))
    return value


@functools.cache
def _hints(kind: type) -> dict[str, Any]:
    """A dataclass's fields and their types (resolved once: the annotations are strings here)."""
    hints = typing.get_type_hints(kind)
    return {item.name: hints[item.name] for item in dataclasses.fields(kind)}


@functools.cache
def _is_plain(kind: Any) -> bool:
    """Whether JSON values of ``kind`` are its values as they are: str, int, float, bool, None, unions of them."""
    if kind in (str, int, float, bool, type(None)):
        return True
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        return all(_is_plain(option) for option in typing.get_args(kind))
    return False
