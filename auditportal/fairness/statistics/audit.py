"""Audit an existing model's predictions: read a CSV/Parquet file, count, compare, document.

Pure pyarrow/numpy (no Django). Reading reuses the dataset registry's ingestion
(:func:`auditportal.datasets.ingest.read_columns`), so labels, groups and unknown values mean the
same here as in a registered dataset, and errors carry the same file/row/column detail. Only the
needed columns are parsed. The common file (integer label, numeric score or 0/1 prediction) is
counted block by block straight from the parsed columns (:mod:`auditportal.fairness.statistics.counting`);
anything else, and every file with a problem, takes the general path, which decodes each column with
registration's checks and finds the row to document. Everything after counting is on small tables.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from auditportal.fairness.errors import UserError
from auditportal.fairness.files.tabular import (
    DEFAULT_UNKNOWN_TOKENS,
    NO_LIMITS,
    DatasetError,
    DatasetSpec,
    RawColumns,
    ReadLimits,
    decode_labelled,
    numpy_view,
    read_columns,
    repeated_columns_warnings,
)
from auditportal.fairness.statistics import judge, stats
from auditportal.fairness.statistics.counting import Counted, GroupCounts, count_blocks, intersection_table

# 2: small-cell intervals, the ratio's interval and three-way four-fifths verdict, the per-group noise
# floor, positives_needed v2, and the headline (docs/audit-json.md, "Changes from version 1").
SCHEMA_VERSION = 2
MAX_INTERSECTION_CELLS = 1_000_000
_VALUES_SHOWN = 10
_NUMBER = r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$"

JSON = dict[str, Any]
# pyarrow arrays and chunked arrays: the stubs' overloads do not follow the compute kernels' results.
Column = Any


class AuditSpecError(UserError):
    """An impossible combination of parameters; ``field`` names the parameter to fix."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field)


@dataclass(frozen=True)
class AuditSpec:
    label: str
    attributes: tuple[str, ...]
    positive: str = "1"
    prediction: str | None = None
    score: str | None = None
    threshold: float | None = None
    intersect: bool = False
    # "GROUP" (for every attribute that has it) or "ATTRIBUTE=GROUP"; default: the largest group.
    references: tuple[str, ...] = ()
    unknown_tokens: tuple[str, ...] = DEFAULT_UNKNOWN_TOKENS
    tolerance: float = stats.DEFAULT_TOLERANCE
    alpha: float = stats.DEFAULT_ALPHA
    power: float = stats.DEFAULT_POWER
    max_groups: int = 50
    # The fairness policy's judged metrics and minimum group size (judge.judge_attribute).
    metrics: tuple[str, ...] = stats.COMPARED
    min_group_size: int | None = None

    @classmethod
    def from_input(
        cls,
        *,
        label: str,
        attributes: str | Sequence[str],
        positive: str = "1",
        prediction: str | None = None,
        score: str | None = None,
        threshold: float | None = None,
        intersect: bool = False,
        references: str | Sequence[str] = (),
        unknown_tokens: str | Sequence[str] | None = None,
        tolerance: float = stats.DEFAULT_TOLERANCE,
        alpha: float = stats.DEFAULT_ALPHA,
        power: float = stats.DEFAULT_POWER,
        max_groups: int = 50,
        metrics: Sequence[str] = stats.COMPARED,
        min_group_size: int | None = None,
    ) -> AuditSpec:
        """The spec for what a user gave the form, the API or the command, normalised one way.

        Column names and the positive value are stripped; an empty prediction or score column is
        none. Attributes, references and unknown tokens may come as one comma-separated text or as
        several values, each of which is split on commas; pieces are stripped and empty ones dropped.
        A repeated attribute is kept for ``check()`` to report. Unknown tokens match case-insensitively,
        so they are lower-cased, deduplicated and sorted, and the empty value is always one of them;
        ``None`` means the defaults (empty, nan, -1, unknown).
        """
        tokens = DEFAULT_UNKNOWN_TOKENS if unknown_tokens is None else _split(unknown_tokens)
        return cls(
            label=label.strip(),
            positive=positive.strip(),
            prediction=(prediction or "").strip() or None,
            score=(score or "").strip() or None,
            threshold=threshold,
            attributes=_split(attributes),
            intersect=intersect,
            references=_split(references),
            unknown_tokens=("", *sorted({token.strip().lower() for token in tokens} - {""})),
            tolerance=tolerance,
            alpha=alpha,
            power=power,
            max_groups=max_groups,
            metrics=tuple(metrics),
            min_group_size=min_group_size,
        )

    def check(self) -> None:
        if not self.label.strip():
            raise AuditSpecError("label", "name the label column")
        if self.prediction and self.score:
            raise AuditSpecError(
                "prediction", "give either a prediction column or a score column with a threshold, not both"
            )
        if not self.prediction and not self.score:
            raise AuditSpecError("prediction", "give a prediction column (0/1), or a score column and a threshold")
        if self.score and self.threshold is None:
            raise AuditSpecError(
                "threshold",
                "a score column needs a threshold: rows whose score is at least the threshold are predicted positive",
            )
        if self.prediction and self.threshold is not None:
            raise AuditSpecError("threshold", "a threshold applies to a score column, not to a 0/1 prediction column")
        if self.threshold is not None and not math.isfinite(self.threshold):
            raise AuditSpecError("threshold", f"the threshold must be a finite number, not {self.threshold}")
        if not self.attributes:
            raise AuditSpecError("attributes", "declare at least one sensitive attribute column")
        repeated = sorted({name for name in self.attributes if self.attributes.count(name) > 1})
        if repeated:
            raise AuditSpecError("attributes", f"{_listed(repeated)} declared more than once as an attribute")
        output = cast(str, self.prediction or self.score)
        if output == self.label:
            raise AuditSpecError(
                "prediction" if self.prediction else "score",
                f"{output!r} is the label column; the model's output must be a separate column",
            )
        for name in (self.label, output):
            if name in self.attributes:
                raise AuditSpecError(
                    "attributes", f"{name!r} cannot be both a sensitive attribute and the label or output"
                )
        if self.intersect and len(self.attributes) < 2:
            raise AuditSpecError("intersect", "an intersection needs at least two attribute columns")
        if not 0 <= self.tolerance < 1:
            raise AuditSpecError("tolerance", f"the tolerance must be at least 0 and below 1, not {self.tolerance}")
        if not 0 < self.alpha < 1:
            raise AuditSpecError("alpha", f"alpha must be between 0 and 1, not {self.alpha}")
        if not 0 < self.power < 1:
            raise AuditSpecError("power", f"the power must be between 0 and 1, not {self.power}")
        unknown = [metric for metric in self.metrics if metric not in stats.COMPARED]
        if unknown or not self.metrics:
            raise AuditSpecError(
                "metrics", f"judge one or more of {', '.join(stats.COMPARED)}, not {', '.join(unknown) or 'none'}"
            )
        if self.min_group_size is not None and self.min_group_size < 1:
            raise AuditSpecError(
                "min_group_size", f"the minimum group size must be a positive integer, not {self.min_group_size}"
            )

    def columns_spec(self) -> DatasetSpec:
        """The label and attributes as the dataset registry reads them (no features)."""
        return DatasetSpec(
            label=self.label,
            positive=self.positive,
            attributes=self.attributes,
            unknown_tokens=self.unknown_tokens,
            features=(),
            max_groups=self.max_groups,
        )

    def parameters(self) -> JSON:
        values = asdict(self)
        for key in ("attributes", "references", "unknown_tokens", "metrics"):
            values[key] = list(values[key])
        return values


def _split(values: str | Sequence[str]) -> tuple[str, ...]:
    """Comma-separated text, or several values each of which may be comma-separated."""
    texts = [values] if isinstance(values, str) else values
    return tuple(piece.strip() for text in texts for piece in text.split(",") if piece.strip())


@dataclass(frozen=True)
class AuditOutcome:
    document: JSON
    file_format: str
    num_rows: int
    sha256: str
    size_bytes: int


def audit_predictions(
    path: Path,
    spec: AuditSpec,
    *,
    display_name: str,
    max_bytes: int,
    sha256: str | None = None,
    policy: JSON | None = None,
    limits: ReadLimits = NO_LIMITS,
) -> AuditOutcome:
    """Audit the predictions in ``path``; raise DatasetError (file problems) or AuditSpecError.

    ``sha256``: the file's digest when the caller already has it (see ``ingest.read_columns``).
    ``policy``: the fairness policy the spec's tolerance, alpha, metrics and minimum group size came
    from (its document, plain values), written into the result as it is.
    """
    spec.check()
    output = cast(str, spec.prediction or spec.score)
    columns_spec = spec.columns_spec()
    others = [(output, "prediction" if spec.prediction else "score")]
    raw = read_columns(
        path,
        columns_spec,
        others=others,
        display_name=display_name,
        max_bytes=max_bytes,
        sha256=sha256,
        limits=limits,
    )
    counted = count_blocks(
        raw.table,
        spec=columns_spec,
        output=output,
        threshold=spec.threshold if spec.score else None,
        intersect=spec.intersect,
        display_name=display_name,
    ) or _count_decoded(raw, columns_spec, spec, display_name)
    num_rows = raw.table.num_rows
    file: JSON = {"name": display_name, "format": raw.file_format, "sha256": raw.sha256, "size_bytes": raw.size_bytes}
    prediction: JSON = {
        "column": spec.prediction,
        "score": spec.score,
        "threshold": spec.threshold,
    }
    document = judged_document(
        counted,
        spec,
        file=file,
        num_rows=num_rows,
        prediction=prediction,
        policy=policy,
        warnings=repeated_columns_warnings(raw.columns, [columns_spec.label, *columns_spec.attributes, output]),
        display_name=display_name,
    )
    return AuditOutcome(
        document=document,
        file_format=raw.file_format,
        num_rows=num_rows,
        sha256=raw.sha256,
        size_bytes=raw.size_bytes,
    )


def judged_document(
    counted: Counted,
    spec: AuditSpec,
    *,
    file: JSON,
    num_rows: int,
    prediction: JSON,
    policy: JSON | None,
    warnings: list[str],
    display_name: str,
) -> JSON:
    """The audit document of ``counted`` (docs/audit-json.md): every attribute judged, the headline.

    The one place an audit document is put together: an audit of a file and a what-if at some
    thresholds (fairness/statistics/whatif.py) judge their counts alike. ``prediction`` is the
    document's prediction object without ``predicted_positives``, which comes from ``counted``.
    """
    tables = counted.tables
    references = _references(spec.references, {table.name: table.groups for table in tables}, display_name)
    attributes = {
        table.name: judge.judge_attribute(
            table.counts,
            table.groups,
            unknown=table.unknown,
            reference=references.get(table.name),
            tolerance=spec.tolerance,
            alpha=spec.alpha,
            power=spec.power,
            columns=table.columns,
            values=table.values,
            metrics=spec.metrics,
            min_group_size=spec.min_group_size,
        )
        for table in tables
    }
    headline = judge.headline(
        attributes, {table.name: table.counts for table in tables}, tolerance=spec.tolerance, alpha=spec.alpha
    )
    return {
        "schema_version": SCHEMA_VERSION,
        "file": dict(file),
        "rows": num_rows,
        "label": {
            "column": spec.label,
            "positive": spec.positive.strip(),
            "positives": counted.positives,
            "negatives": num_rows - counted.positives,
        },
        "prediction": {**prediction, "predicted_positives": counted.predicted_positives},
        "unknown_tokens": list(spec.unknown_tokens),
        "tolerance": spec.tolerance,
        "alpha": spec.alpha,
        "power": spec.power,
        **({"policy": dict(policy)} if policy is not None else {}),
        "verdict": headline["verdict"],
        "headline": headline,
        "levels": dict(judge.LEVELS),
        "attributes": attributes,
        "warnings": warnings,
    }


def _count_decoded(raw: RawColumns, columns_spec: DatasetSpec, spec: AuditSpec, display_name: str) -> Counted:
    """The general path: every column decoded with registration's checks, then counted per row."""
    output = cast(str, spec.prediction or spec.score)
    columns = decode_labelled(
        raw, columns_spec, others=[(output, "prediction" if spec.prediction else "score")], display_name=display_name
    )
    if spec.prediction:
        predicted = _predictions(columns.others[output], spec.positive, display_name, output)
    else:
        predicted = _scores_at_threshold(columns.others[output], cast(float, spec.threshold), display_name, output)
    cells = stats.confusion_cells(columns.target, predicted)
    tables: list[GroupCounts] = []
    for info, codes in zip(columns.attributes, columns.codes, strict=True):
        counts, unknown = stats.confusion_counts_from_cells(codes, cells, len(info.groups))
        tables.append(GroupCounts.of_attribute(info.name, info.groups, counts, int(unknown.sum())))
    if spec.intersect:
        tables.append(_intersection(columns.attributes, columns.codes, cells, display_name))
    return Counted(
        tables=tuple(tables),
        positives=int(np.count_nonzero(columns.target)),
        predicted_positives=int(np.count_nonzero(predicted)),
    )


# --------------------------------------------------------------------------- the model's output


def _predictions(column: Column, positive: str, display_name: str, name: str) -> npt.NDArray[np.int8]:
    """0/1 (or false/true) predictions, or predictions coded like the label (its positive value)."""
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    kind = column.type
    if pa.types.is_boolean(kind) or pa.types.is_integer(kind) or pa.types.is_floating(kind):
        _reject_missing(pc.is_null(column, nan_is_null=True), display_name, name, "prediction")
        values = column.cast(pa.float64())
        one = pc.equal(values, pa.scalar(1.0))
        stray = pc.invert(pc.or_(one, pc.equal(values, pa.scalar(0.0))))
        row = _first(stray)
        if row is not None:
            raise DatasetError(
                f"value {_text(values[row - 1].as_py())} is not a 0/1 prediction (values seen: "
                f"{_values_seen(values)}); a prediction column holds 0 or 1 (or false/true)",
                file=display_name,
                row=row,
                column=name,
            )
        return _int8(one)
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise DatasetError(
            f"values of type {kind} cannot be used as predictions; give 0/1 values", file=display_name, column=name
        )
    text = pc.utf8_trim_whitespace(column)
    _reject_missing(pc.or_kleene(pc.is_null(text), pc.equal(text, pa.scalar(""))), display_name, name, "prediction")
    wanted = positive.strip()
    counts = pc.value_counts(text).flatten()
    distinct = cast(list[str], counts[0].to_pylist())
    frequencies = cast(list[int], counts[1].to_pylist())
    seen = _listed(sorted(distinct)[:_VALUES_SHOWN])
    if wanted not in distinct and len(distinct) > 1:
        raise DatasetError(
            f"the positive value {_text(wanted)} does not occur in the predictions (values seen: {seen}); "
            "predictions are 0/1 or use the label's values",
            file=display_name,
            column=name,
        )
    if len(distinct) > 2:
        # The positive value and the most frequent other value are taken as the intended pair.
        other = max((n, value) for n, value in zip(frequencies, distinct, strict=True) if value != wanted)[1]
        row = _first(pc.invert(pc.is_in(text, value_set=pa.array([wanted, other], pa.string()))))
        stray = text[cast(int, row) - 1].as_py()
        raise DatasetError(
            f"value {_text(stray)} makes the prediction non-binary (values seen: {seen}); predictions are 0/1 "
            f"or use the label's two values, with {_text(wanted)} as the positive one",
            file=display_name,
            row=row,
            column=name,
        )
    return _int8(pc.equal(text, pa.scalar(wanted)))


def _scores_at_threshold(column: Column, threshold: float, display_name: str, name: str) -> npt.NDArray[np.int8]:
    predicted: npt.NDArray[np.int8] = np.greater_equal(score_values(column, display_name, name), threshold).view(
        np.int8
    )
    return predicted


def score_values(column: Column, display_name: str, name: str) -> npt.NDArray[np.float64]:
    """A score column as float64, every value a number (DatasetError naming the row otherwise)."""
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        not_number = pc.invert(pc.match_substring_regex(pc.fill_null(column, "0"), _NUMBER))
        row = _first(not_number)
        if row is not None:
            raise DatasetError(
                f"value {_text(column[row - 1].as_py())} is not a number; the score column must hold numbers",
                file=display_name,
                row=row,
                column=name,
            )
        column = pc.utf8_trim_whitespace(column)
    elif not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)):
        raise DatasetError(
            f"values of type {kind} cannot be used as scores; give numbers", file=display_name, column=name
        )
    values = column.cast(pa.float64(), safe=False)
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    scores = numpy_view(array)
    # The common case (no nulls, no NaN) costs one numpy pass; the error path finds the row.
    if array.null_count or np.isnan(scores).any():
        _reject_missing(pc.is_null(values, nan_is_null=True), display_name, name, "score")
    return cast(npt.NDArray[np.float64], scores)


def _reject_missing(mask: Column, display_name: str, name: str, what: str) -> None:
    row = _first(mask)
    if row is not None:
        raise DatasetError(f"the {what} is missing; every row needs a {what}", file=display_name, row=row, column=name)


def _first(mask: Column) -> int | None:
    """The 1-based row of the first true value, or None."""
    index = pc.index(mask, True).as_py()
    return None if index is None or index < 0 else int(index) + 1


def _int8(mask: Column) -> npt.NDArray[np.int8]:
    values = mask.cast(pa.int8())
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    assert array.null_count == 0
    return cast(npt.NDArray[np.int8], numpy_view(array))


def _values_seen(values: Column) -> str:
    distinct = pc.unique(values)
    shown = sorted(cast(list[float], distinct.to_pylist()))[:_VALUES_SHOWN]
    listed = ", ".join(_text(value) for value in shown)
    return listed + (f", … ({len(distinct)} distinct values)" if len(distinct) > _VALUES_SHOWN else "")


def _text(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return repr(value)
    return str(value)


def _listed(values: Sequence[str]) -> str:
    return ", ".join(repr(value) for value in values)


# --------------------------------------------------------------------------- groups


def _intersection(
    attributes: Sequence[Any], codes: Sequence[npt.NDArray[np.int32]], cells: npt.NDArray[np.int8], display_name: str
) -> GroupCounts:
    sizes = [len(info.groups) for info in attributes]
    if math.prod(sizes) > MAX_INTERSECTION_CELLS:
        raise DatasetError(
            f"the intersection of {len(sizes)} attributes has {math.prod(sizes):,} combinations, more than "
            f"{MAX_INTERSECTION_CELLS:,}; intersect fewer or coarser attributes",
            file=display_name,
        )
    combined = np.zeros(len(cells), np.int32)
    unknown = np.zeros(len(cells), bool)
    for size, column in zip(sizes, codes, strict=True):
        combined *= size
        combined += column
        unknown |= column < 0
    combined[unknown] = -1
    counts, unknown_cells = stats.confusion_counts_from_cells(combined, cells, math.prod(sizes))
    return intersection_table([(info.name, info.groups) for info in attributes], counts, int(unknown_cells.sum()))


def _references(raw: Sequence[str], tables: dict[str, tuple[str, ...]], display_name: str) -> dict[str, int]:
    chosen: dict[str, int] = {}
    for text in raw:
        attribute, _, group = text.partition("=")
        if group and attribute.strip() in tables:
            attribute, group = attribute.strip(), group.strip()
            groups = tables[attribute]
            if group not in groups:
                raise DatasetError(
                    f"the reference group {group!r} is not a group of {attribute!r} (groups: "
                    f"{_listed(groups[:_VALUES_SHOWN])}{', …' if len(groups) > _VALUES_SHOWN else ''})",
                    file=display_name,
                    column=attribute,
                )
            chosen[attribute] = groups.index(group)
            continue
        group = text.strip()
        found = [name for name, groups in tables.items() if group in groups]
        if not found:
            raise DatasetError(
                f"the reference group {group!r} is not a group of any attribute; name one of its groups, "
                "or write ATTRIBUTE=GROUP",
                file=display_name,
            )
        for name in found:
            chosen.setdefault(name, tables[name].index(group))
    return chosen
