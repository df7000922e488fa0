"""What a signed monitoring report says, as plain data (docs/monitoring.md, "Monitoring reports").

A ``MonitoringReportContext`` is everything the PDF of one deployment's period ``[start, end)`` shows:
what served when, the deployment's changes (promotions, rollbacks, suspensions), the batches received
with their per-group counts summed, each watched metric per group with its interval and limit at the
period's last look of each model, the group-share drift at that look, every look's outcome, and the
incidents with their frozen documents. It holds no database object and imports no Django: the
reports app fills one from monitoring's selectors, renders, certifies and stores it. Its canonical
JSON (``canonical``) is embedded in the PDF and its SHA-256 names it, as a review request's report
context does (fairness/documents/report_context.py, whose JSON helpers it shares).

Also here, because they only read the context: the plain-language summary and the CSV of per-batch
per-group counts embedded in the PDF.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from auditportal.fairness.documents.canonical import canonical_json, canonical_sha256
from auditportal.fairness.documents.report_context import Person, build_from_json, display_time, plain_json
from auditportal.fairness.statistics.batchcount import CELLS
from auditportal.fairness.text import numbers
from auditportal.fairness.text.csvsafe import csv_text

KIND = "monitoring"
SCHEMA_VERSION = 1
# The PDF lists at most this many batches and looks (the newest); the embedded CSV and JSON hold all.
PRINTED_ROWS = 60


@dataclass(frozen=True)
class ServingSpan:
    """A stretch of the period during which one model served (``model`` "" while none did: the
    deployment was empty or suspended); ``change`` is the kind of change that began it."""

    model: str
    review_request: int | None
    start: str  # ISO 8601, UTC
    end: str
    change: str


@dataclass(frozen=True)
class ChangeEntry:
    """A promotion, rollback or suspension made in the period."""

    seq: int
    at: str
    kind: str
    model: str
    from_model: str
    reason: str
    incident: int | None
    by: str  # a username, or "" for the system


@dataclass(frozen=True)
class BatchEntry:
    """A batch received in the period: ``counts`` per attribute, as the worker stored them (groups and
    the unknown group's cells), with the labels that arrived for it added; {} until counted."""

    batch_id: str
    model: str
    received_at: str
    state: str
    rows: int | None
    sha256: str
    error: str
    counts: dict[str, Any]


@dataclass(frozen=True)
class GroupTotal:
    """One group's cells summed over the period's counted batches (``unknown``: the rows whose group
    was not given)."""

    attribute: str
    group: str
    unknown: bool
    tp: int
    fn: int
    fp: int
    tn: int
    unlabelled: int
    unlabelled_selected: int

    @property
    def rows(self) -> int:
        return self.tp + self.fn + self.fp + self.tn + self.unlabelled


@dataclass(frozen=True)
class MetricRow:
    """One watched comparison at a model's last look in the period: a rate against its limit
    (``reference`` "") or a gap against the reference group. ``low``/``high`` is the confidence
    sequence's interval at that look."""

    model: str
    look: int
    attribute: str
    kind: str  # "rate" or "gap"
    metric: str
    group: str
    reference: str
    limit: float
    bound: str  # "upper"/"lower" for a rate, the side for a gap
    estimate: float | None
    low: float | None
    high: float | None
    rows: int
    status: str


@dataclass(frozen=True)
class ShareRow:
    """One group's production share against its training share at a model's last look in the period."""

    model: str
    look: int
    attribute: str
    group: str  # "" for the unknown group
    unknown: bool
    production_share: float | None
    training_share: float | None
    shift: float | None
    low: float | None
    high: float | None
    limit: float
    status: str


@dataclass(frozen=True)
class LookEntry:
    seq: int
    at: str
    model: str
    batch_id: str
    window: int | None
    rows: int
    status: str
    breached: bool


@dataclass(frozen=True)
class IncidentEntry:
    """An incident opened in the period; ``canonical`` is its frozen document's canonical JSON, embedded
    byte for byte (its SHA-256 is ``sha256``)."""

    id: int
    opened_at: str
    model: str
    reason: str
    sha256: str
    canonical: str

    @property
    def file_name(self) -> str:
        return f"incident-{self.id}-{self.sha256[:12]}.json"


@dataclass(frozen=True)
class PolicyVersion:
    """A monitor policy version the period's looks were judged under; ``spec`` its values as JSON text."""

    version: int
    spec: str


@dataclass(frozen=True)
class MonitoringReportContext:
    title: str
    organisation: str
    deployment: str
    description: str
    start: str  # ISO 8601, UTC, inclusive
    end: str  # exclusive
    requested_by: Person
    serving: tuple[ServingSpan, ...] = ()
    changes: tuple[ChangeEntry, ...] = ()
    batches: tuple[BatchEntry, ...] = ()
    totals: tuple[GroupTotal, ...] = ()
    looks: tuple[LookEntry, ...] = ()
    metrics: tuple[MetricRow, ...] = ()
    drift: tuple[ShareRow, ...] = ()
    incidents: tuple[IncidentEntry, ...] = ()
    policies: tuple[PolicyVersion, ...] = ()
    # Who signs after the organisation's certification: nobody (docs/monitoring.md, "Who signs").
    signatories: tuple[Person, ...] = ()
    kind: str = field(default=KIND)
    schema_version: int = field(default=SCHEMA_VERSION)

    def __post_init__(self) -> None:
        if self.kind != KIND:
            raise ValueError(f"a monitoring report's kind is {KIND!r}, not {self.kind!r}")
        if not self.start < self.end:
            raise ValueError(f"a monitoring report's period must start before it ends ({self.start} to {self.end})")

    def as_json(self) -> dict[str, Any]:
        value: dict[str, Any] = plain_json(dataclasses.asdict(self))
        return value

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> MonitoringReportContext:
        if value.get("kind") != KIND or value.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(
                f"not a monitoring report context of schema {SCHEMA_VERSION}: kind {value.get('kind')!r}, "
                f"schema {value.get('schema_version')!r}"
            )
        built: MonitoringReportContext = build_from_json(cls, value)
        return built

    @property
    def canonical(self) -> bytes:
        return canonical_json(self.as_json())

    @property
    def sha256(self) -> str:
        return canonical_sha256(self.as_json())

    @property
    def subject_label(self) -> str:
        return f"Deployment {self.deployment}, {self.period_text}"

    @property
    def period_text(self) -> str:
        return f"{display_time(self.start)} to {display_time(self.end)}"

    @property
    def counted(self) -> int:
        return sum(batch.state == "counted" for batch in self.batches)

    @property
    def failed(self) -> int:
        return sum(batch.state == "failed" for batch in self.batches)

    @property
    def rows(self) -> int:
        return sum(batch.rows or 0 for batch in self.batches if batch.state == "counted")

    @property
    def rollbacks(self) -> int:
        return sum(change.kind == "rolled_back" for change in self.changes)

    @property
    def printed_batches(self) -> tuple[BatchEntry, ...]:
        return self.batches[-PRINTED_ROWS:]

    @property
    def printed_looks(self) -> tuple[LookEntry, ...]:
        return self.looks[-PRINTED_ROWS:]

    @property
    def summary(self) -> list[str]:
        return monitoring_summary(self)


def monitoring_summary(context: MonitoringReportContext) -> list[str]:
    """The report's first paragraph, in sentences a reader without statistics follows."""
    sentences = [f"This report covers deployment {context.deployment} from {context.period_text}."]
    models = sorted({span.model for span in context.serving if span.model})
    if models:
        sentences.append(f"{numbers.plural(len(models), 'model')} served in it: {', '.join(models)}.")
    else:
        sentences.append("No model served in it.")
    if not context.batches:
        sentences.append("No batches were received in this period: there was nothing to judge.")
    else:
        sentences.append(
            f"{numbers.plural(len(context.batches), 'batch', 'batches')} of predictions were received: "
            f"{numbers.count(context.counted)} counted ({numbers.count(context.rows)} rows), "
            f"{numbers.count(context.failed)} failed, "
            f"{numbers.count(len(context.batches) - context.counted - context.failed)} not yet counted."
        )
    breached = sum(look.breached for look in context.looks)
    if context.looks:
        sentences.append(
            f"The monitor judged {numbers.plural(len(context.looks), 'look')}; "
            + (f"{numbers.count(breached)} confirmed a breach." if breached else "none confirmed a breach.")
        )
    if context.incidents:
        sentences.append(
            f"{numbers.plural(len(context.incidents), 'incident')} opened, "
            f"and the deployment was rolled back {numbers.plural(context.rollbacks, 'time')}."
        )
    else:
        sentences.append("No incident was opened.")
    sentences.append(
        "The evidence is attached to this PDF as files (each incident's frozen document, the counts of every "
        "batch per group as CSV, and this report's context as JSON), and the report is certified by the "
        "organisation: any change to it after certifying shows."
    )
    return sentences


def batch_counts_csv(context: MonitoringReportContext) -> str:
    """Every batch of the period, one row per attribute and group, with its cells, as CSV written by the
    portal's one CSV writer (``fairness/text/csvsafe.py``: a name that begins like a formula gets a
    ``'`` before it). Columns: batch_id, model, received_at, state, attribute, group, is_unknown, then
    the cells (tp, fn, fp, tn, unlabelled, unlabelled_selected). A batch not counted has one row with
    its state and no counts."""
    header = ["batch_id", "model", "received_at", "state", "attribute", "group", "is_unknown", *CELLS]
    rows: list[list[Any]] = []
    for batch in context.batches:
        lead = [batch.batch_id, batch.model, batch.received_at, batch.state]
        if not batch.counts:
            rows.append([*lead, None, None, None, *([None] * len(CELLS))])
            continue
        for attribute in sorted(batch.counts):
            section = batch.counts[attribute] or {}
            for group, cells in sorted((section.get("groups") or {}).items()):
                rows.append([*lead, attribute, group, False, *(int(cells.get(cell, 0)) for cell in CELLS)])
            unknown = section.get("unknown") or {}
            if any(unknown.get(cell) for cell in CELLS):
                rows.append([*lead, attribute, None, True, *(int(unknown.get(cell, 0)) for cell in CELLS)])
    return csv_text(header, rows)


def incident_document(entry: IncidentEntry) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(entry.canonical)
    return value
