"""Reading the trainer's metrics file (schema 1, trainer/README.md), incrementally. No Django.

Each line: ``{"schema": 1, "trial": ID, "kind": "training"|"validation", "step": N, "metrics": {..}}``.
Only complete lines are consumed, so a reader that stops at ``end`` and resumes there later sees
every line exactly once, however the writer's appends were split.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from auditportal.fairness.files.intersections import SEPARATOR, attribute_key, group_key

logger = logging.getLogger(__name__)

SCHEMA = 1
KINDS = frozenset({"training", "validation"})
# Names of the form <family>/<attribute>/<group>[/...] carry a group.
GROUP_FAMILIES = frozenset({"count", "recall", "fpr", "tpr", "precision", "positive_rate", "worker_share"})


@dataclass(frozen=True)
class MetricRecord:
    """One line of the metrics file (or one metrics report read from a Determined master)."""

    kind: str  # "training", "validation", or "" for a line that does not follow the schema
    step: int
    metrics: dict[str, float | None]
    # The byte offset just after this line in the metrics file; None when not read from a file.
    end: int | None = None


def metric_group(name: str) -> tuple[str, str]:
    """``count/gender/female/tp`` -> ("gender", "female"); names without a group -> ("", "").

    The trainer percent-encodes "/", "%" and "&" inside attribute and group names and joins an
    intersection's names with "&" (trainer/README.md), so they are decoded here: a group called
    "N/A" is stored and queried as "N/A". What comes back are the keys of
    auditportal/fairness/files/intersections.py: the intersection of gender and race is "gender&race", its
    group ("a&b", "c") is "a%26b&c", never the "a&b&c" that ("a", "b&c") would also give.
    """
    parts = name.split("/")
    if len(parts) >= 3 and parts[0] in GROUP_FAMILIES:
        columns, values = decode_group(parts[1], parts[2])
        return attribute_key(columns), group_key(values)
    return "", ""


def decode_group(attribute: str, group: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The attribute's names and the group's values from the two parts of a metric name.

    A group part that does not split into one value per name is one value: the "unknown" bucket of
    an intersection, or a name written before the trainer escaped "&" (a declared attribute's group
    "a&b" was written as is), so such names are read as they always were.
    """
    columns = tuple(unquote(part) for part in attribute.split(SEPARATOR))
    values = tuple(unquote(part) for part in group.split(SEPARATOR))
    if len(values) != len(columns):
        values = (unquote(group),)
    return columns, values


CONFUSION_CELLS = ("tp", "fn", "fp", "tn")


@dataclass(frozen=True)
class AttributeCounts:
    columns: tuple[str, ...]  # the attribute, or the intersected attributes
    values: tuple[tuple[str, ...], ...]  # per group, its value in each of ``columns``
    groups: tuple[str, ...]  # the groups' keys
    counts: list[tuple[int, int, int, int]]  # (tp, fn, fp, tn) per group, in ``groups`` order
    unknown: int


def confusion_counts(metrics: Mapping[str, float | None]) -> dict[str, AttributeCounts]:
    """Per-attribute confusion counts out of one validation's ``count/...`` metrics, keyed
    by the attributes' keys (see :func:`metric_group`)."""
    cells: dict[tuple[str, ...], dict[tuple[str, ...], dict[str, float]]] = {}
    unknown: dict[tuple[str, ...], int] = {}
    for name, value in metrics.items():
        parts = name.split("/")
        if parts[0] != "count" or value is None:
            continue
        if len(parts) == 3 and parts[2] == "unknown":
            unknown[decode_group(parts[1], "")[0]] = int(value)
        elif len(parts) == 4 and parts[3] in CONFUSION_CELLS:
            columns, values = decode_group(parts[1], parts[2])
            cells.setdefault(columns, {}).setdefault(values, {})[parts[3]] = value
    result = {}
    for columns, by_group in cells.items():
        groups = sorted(g for g, c in by_group.items() if all(cell in c for cell in CONFUSION_CELLS))
        result[attribute_key(columns)] = AttributeCounts(
            columns=columns,
            values=tuple(groups),
            groups=tuple(group_key(values) for values in groups),
            counts=[tuple(int(by_group[g][cell]) for cell in CONFUSION_CELLS) for g in groups],  # type: ignore[misc]
            unknown=unknown.get(columns, 0),
        )
    return result


def parse_line(line: bytes) -> tuple[str, int, dict[str, float | None]] | None:
    """One line as (kind, step, metrics), or None for a line that does not follow the schema."""
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return None
    kind, step, metrics = doc.get("kind"), doc.get("step"), doc.get("metrics")
    if kind not in KINDS or not isinstance(step, int) or step < 0 or not isinstance(metrics, dict):
        return None
    values: dict[str, float | None] = {}
    for name, value in metrics.items():
        if value is None:
            values[str(name)] = None
        elif isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
            values[str(name)] = number if math.isfinite(number) else None
        # Anything else (strings, lists) is not a metric value: skipped.
    return str(kind), step, values


def read_records(path: Path, offset: int, *, max_bytes: int = 16 * 1024 * 1024) -> Iterator[MetricRecord]:
    """Complete lines from ``offset`` on (at most about ``max_bytes``), each with its end offset."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return
    with handle:
        handle.seek(offset)
        chunk = handle.read(max_bytes)
    last_newline = chunk.rfind(b"\n")
    if last_newline < 0:
        return
    position = offset
    for raw in chunk[: last_newline + 1].splitlines(keepends=True):
        position += len(raw)
        if not raw.strip():
            continue
        parsed = parse_line(raw)
        if parsed is None:
            logger.warning("%s: skipped a line that does not follow the metrics schema at byte %d", path, position)
            yield MetricRecord(kind="", step=0, metrics={}, end=position)
            continue
        kind, step, metrics = parsed
        yield MetricRecord(kind=kind, step=step, metrics=metrics, end=position)


def log_tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of a log file (read from the end; logs can be large)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            block = min(size, max(64 * 1024, lines * 400))
            handle.seek(size - block)
            data = handle.read()
    except FileNotFoundError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])
