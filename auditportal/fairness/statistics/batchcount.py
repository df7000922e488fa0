"""A production batch's per-group confusion counts, from its file or from counts a client aggregated
(docs/monitoring.md, "Production batches"). Pure pyarrow/numpy, no Django.

A file is read once (only the columns used) and counted vectorised: each row's cell is one int8
(tp 0, fn 1, fp 2, tn 3 for a labelled row; 4 and 5 for an unlabelled row the model did not or did
select), each attribute is dictionary-encoded once, and one ``bincount`` over ``(entry, cell)`` gives
the table; only the few distinct values are then turned into groups. So counting costs about what
reading costs.

A row whose label is missing (null, empty) is *unlabelled*: it counts towards the group's rows and
selection rate, not towards the error rates. With a row key column, such rows are also returned
(:class:`PendingRows`) so that labels posted later can move them into the labelled cells.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from auditportal.fairness.errors import UserError
from auditportal.fairness.files.tabular import DEFAULT_UNKNOWN_TOKENS, DatasetError, ReadLimits, numpy_view
from auditportal.fairness.files.tabular.read import check_columns_present, check_size, file_format_of, load
from auditportal.fairness.statistics.audit import _predictions, _scores_at_threshold
from auditportal.fairness.statistics.monitor import WindowCounts

CELLS: Final = ("tp", "fn", "fp", "tn", "unlabelled", "unlabelled_selected")
# The most distinct groups one attribute of a batch may have (a column of ids is not an attribute).
MAX_GROUPS: Final = 1000
MAX_ROW_KEY: Final = 200
_UNKNOWN: Final = frozenset(token.strip().lower() for token in DEFAULT_UNKNOWN_TOKENS) | {""}


class BatchCountsError(UserError):
    """Pre-aggregated counts that cannot be; ``field`` names the value (``counts.gender.f.tp``)."""


Cells = dict[str, int]


def cells_zero() -> Cells:
    return dict.fromkeys(CELLS, 0)


def cells_add(total: Cells, other: Mapping[str, int], sign: int = 1) -> None:
    for name in CELLS:
        total[name] = total.get(name, 0) + sign * int(other.get(name, 0))


def window_counts(cells: Mapping[str, int]) -> WindowCounts:
    return WindowCounts(**{name: int(cells.get(name, 0)) for name in CELLS})


@dataclass
class AttributeCounts:
    """One attribute's cells per group, and of the rows whose group is unknown."""

    groups: dict[str, Cells] = field(default_factory=dict)
    unknown: Cells = field(default_factory=cells_zero)

    @property
    def rows(self) -> int:
        return sum(window_counts(cells).rows for cells in (*self.groups.values(), self.unknown))

    def as_json(self) -> dict[str, Any]:
        return {
            "groups": {group: dict(self.groups[group]) for group in sorted(self.groups)},
            "unknown": dict(self.unknown),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AttributeCounts:
        return cls(
            groups={str(group): {**cells_zero(), **cells} for group, cells in data.get("groups", {}).items()},
            unknown={**cells_zero(), **data.get("unknown", {})},
        )

    def add(self, other: AttributeCounts, sign: int = 1) -> None:
        for group, cells in other.groups.items():
            cells_add(self.groups.setdefault(group, cells_zero()), cells, sign)
        cells_add(self.unknown, other.unknown, sign)


@dataclass(frozen=True)
class BatchColumns:
    """Which columns of a batch file say what: ``prediction`` (0/1 or the positive value) or ``score``
    with ``threshold``; ``label`` (optional: a missing value is an unlabelled row); ``row_key``
    (optional: unlabelled rows are kept for late labels); the sensitive attributes."""

    attributes: tuple[str, ...]
    prediction: str = ""
    score: str = ""
    threshold: float | None = None
    label: str = ""
    positive: str = "1"
    row_key: str = ""


@dataclass(frozen=True)
class PendingRows:
    """The unlabelled rows of a batch with a row key, as one Arrow table (kept by the portal as a
    Parquet side file, not as database rows): ``key`` (text), ``selected`` (whether the model
    selected the row) and, per attribute in the batch's order, ``group_<i>`` (text, dictionary-encoded:
    no text per row to build or write; null: unknown)."""

    table: pa.Table

    @property
    def rows(self) -> int:
        return int(self.table.num_rows)


def group_column(index: int) -> str:
    return f"group_{index}"


@dataclass(frozen=True)
class BatchCount:
    file_format: str
    rows: int
    counts: dict[str, AttributeCounts]
    pending: PendingRows | None


def count_batch_file(
    path: Path, columns: BatchColumns, *, display_name: str, max_bytes: int, limits: ReadLimits
) -> BatchCount:
    """Count ``path``; DatasetError names the file, row and column of what is wrong."""
    file_format = file_format_of(path, display_name)
    check_size(path, display_name, max_bytes)
    output = columns.prediction or columns.score
    if not output:
        raise DatasetError("give the prediction column, or the score column and a threshold", file=display_name)
    if columns.score and columns.threshold is None:
        raise DatasetError("a score column needs a threshold", file=display_name, column=columns.score)
    declared = [
        (output, "prediction" if columns.prediction else "score"),
        *((name, "sensitive attribute") for name in columns.attributes),
        *([(columns.label, "label")] if columns.label else []),
        *([(columns.row_key, "row key")] if columns.row_key else []),
    ]
    wanted = list(dict.fromkeys(name for name, _ in declared))
    loaded = load(path, file_format, display_name, columns=wanted, csv_subset=True, limits=limits)
    check_columns_present(loaded.columns, declared, display_name)
    table = loaded.table
    rows = table.num_rows
    if columns.prediction:
        predicted = _predictions(table.column(output), columns.positive, display_name, output)
    else:
        assert columns.threshold is not None
        predicted = _scores_at_threshold(table.column(output), columns.threshold, display_name, output)
    if columns.label:
        known, positive = _labels(table.column(columns.label), columns.positive, display_name, columns.label)
    else:
        known, positive = np.zeros(rows, dtype=bool), np.zeros(rows, dtype=bool)
    selected = predicted.astype(bool)
    # tp 0, fn 1, fp 2, tn 3; unlabelled 4 (not selected), 5 (selected).
    cell = np.where(known, (~positive).astype(np.int8) * 2 + (~selected).astype(np.int8), 4 + selected.astype(np.int8))
    counts = {}
    group_codes: list[tuple[npt.NDArray[np.int64], list[str | None]]] = []
    for name in columns.attributes:
        codes, groups = _attribute_codes(table.column(name), display_name, name)
        group_codes.append((codes, groups))
        counts[name] = _table(codes, groups, cell)
    pending = None
    if columns.row_key and not known.all():
        pending = _pending(table.column(columns.row_key), ~known, selected, group_codes, display_name, columns.row_key)
    return BatchCount(file_format=file_format, rows=rows, counts=counts, pending=pending)


def _labels(
    column: pa.ChunkedArray[Any], positive: str, display_name: str, name: str
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Which rows have a label, and which of those are positive: 0/1 (or false/true) numbers, or text
    with ``positive`` as the positive value and one other value; null or empty is no label."""
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    kind = column.type
    if pa.types.is_null(kind):  # a column with no label yet (a CSV column of empty values)
        nothing = np.zeros(len(column), dtype=bool)
        return nothing, nothing
    if pa.types.is_boolean(kind) or pa.types.is_integer(kind) or pa.types.is_floating(kind):
        values = column.cast(pa.float64())
        missing = _bools(pc.is_null(values, nan_is_null=True))
        numbers = np.nan_to_num(numpy_view(_fill_null(values, 0.0).combine_chunks()), nan=0.0)
        stray = ~missing & (numbers != 0) & (numbers != 1)
        if stray.any():
            row = int(np.flatnonzero(stray)[0])
            raise DatasetError(
                f"value {numbers[row]:g} is not a 0/1 label; a label is 0 or 1, or empty when not known yet",
                file=display_name,
                row=row + 1,
                column=name,
            )
        return ~missing, ~missing & (numbers == 1)
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise DatasetError(
            f"values of type {kind} cannot be used as labels; give 0/1 values", file=display_name, column=name
        )
    text = _fill_null(pc.utf8_trim_whitespace(_text(column)), "")
    wanted = positive.strip()
    empty, wanted_value = pa.scalar(""), pa.scalar(wanted)
    missing = _bools(pc.equal(text, empty))
    is_positive = _bools(pc.equal(text, wanted_value))
    chosen = pc.and_(pc.not_equal(text, empty), pc.not_equal(text, wanted_value))
    others = [str(value) for value in pc.unique(pc.filter(text, chosen)).to_pylist()]  # filled: no null
    if len(others) > 1:
        shown = ", ".join(repr(value) for value in sorted(others)[:10])
        raise DatasetError(
            f"the label has more than two values ({shown} besides the positive {wanted!r}); a label is the "
            "positive value, one other value, or empty when not known yet",
            file=display_name,
            column=name,
        )
    return ~missing, is_positive


def _text(column: pa.ChunkedArray[Any]) -> pa.StringArray:
    """A column of text as one StringArray (already text: only its chunks joined)."""
    # cast: pyarrow-stubs type combine_chunks() as Array[Any] and a cast's result by its scalar type,
    # not as the StringArray it is at run time.
    return cast(pa.StringArray, column.cast(pa.string()).combine_chunks())


def _positions(where: npt.NDArray[np.intp]) -> pa.Int64Array:
    """Row positions for ``take`` (the stubs infer pa.array of an integer ndarray as a BooleanArray)."""
    return pa.array(where, type=pa.int64())


_Filled = TypeVar("_Filled", "pa.StringArray", "pa.ChunkedArray[Any]", "pa.Array[Any]")


def _fill_null(values: _Filled, fill: Any) -> _Filled:
    """``pc.fill_null``, typed: it answers the kind of array it was given."""
    # cast: the stubs' fill_null binds its type variable to object for arrays.
    return cast(_Filled, pc.fill_null(values, fill))


def _bools(values: Any) -> npt.NDArray[np.bool_]:
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=bool)


def _attribute_codes(
    column: pa.ChunkedArray[Any], display_name: str, name: str
) -> tuple[npt.NDArray[np.int64], list[str | None]]:
    """Per row, the index of its distinct value; per distinct value, its group (None: unknown, the
    last index is null)."""
    if pa.types.is_dictionary(column.type) and _is_text(column.type.value_type):
        # The CSV reader's (and Parquet's) dictionary-encoded text: the chunks' small dictionaries
        # mapped onto one list of entries, without decoding a million values to hash them again.
        codes, entries = _dictionary_codes(column)
    else:
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        if not _is_text(column.type):
            try:
                column = column.cast(pa.string())
            except pa.ArrowException:
                raise DatasetError(
                    f"values of type {column.type} cannot be groups of a sensitive attribute",
                    file=display_name,
                    column=name,
                ) from None
        # cast: the stubs type dictionary_encode's result as Array[Any], not the DictionaryArray it is.
        encoded = cast("pa.DictionaryArray[Any, Any]", pc.dictionary_encode(column.combine_chunks()))
        # a dictionary holds no null (nulls stay in the indices)
        entries = [str(value) for value in encoded.dictionary.to_pylist()]
        indices = _fill_null(encoded.indices, len(entries)).cast(pa.int64())
        codes = np.asarray(indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    if len(entries) > MAX_GROUPS:
        raise DatasetError(
            f"the sensitive attribute has {len(entries)} distinct values, more than {MAX_GROUPS}; bucket it "
            "(e.g. age into age groups)",
            file=display_name,
            column=name,
        )
    groups: list[str | None] = [None if value.strip().lower() in _UNKNOWN else value.strip() for value in entries]
    return codes, [*groups, None]


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _dictionary_codes(column: pa.ChunkedArray[Any]) -> tuple[npt.NDArray[np.int64], list[str]]:
    """A dictionary-encoded text column's codes into its distinct values in use, with ``len(entries)``
    for a null."""
    entries: dict[str, int] = {}
    parts: list[npt.NDArray[np.int64]] = []
    for chunk in column.chunks:
        # cast: the stubs type a chunk as Array[Any], not the DictionaryArray it is.
        encoded = cast("pa.DictionaryArray[Any, Any]", chunk)
        indices = np.asarray(_fill_null(encoded.indices, -1).cast(pa.int64()).to_numpy(zero_copy_only=False))
        values = encoded.dictionary.to_pylist()
        # only the values in use (a Parquet dictionary may hold others)
        used = np.flatnonzero(np.bincount(indices[indices >= 0], minlength=len(values)))
        mapping = np.full(len(values) + 1, -1, dtype=np.int64)
        for index in used.tolist():
            mapping[index] = entries.setdefault(str(values[index]), len(entries))
        parts.append(mapping[indices])  # -1 (a null) takes the mapping's last slot: -1
    codes = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    codes[codes < 0] = len(entries)
    return codes, list(entries)


def _table(codes: npt.NDArray[np.int64], groups: Sequence[str | None], cell: npt.NDArray[Any]) -> AttributeCounts:
    width = len(CELLS)
    table = np.bincount(codes * width + cell.astype(np.int64), minlength=len(groups) * width).reshape(
        len(groups), width
    )
    counts = AttributeCounts()
    for index, group in enumerate(groups):
        row = table[index]
        if not row.any():
            continue
        cells = {
            "tp": int(row[0]),
            "fn": int(row[1]),
            "fp": int(row[2]),
            "tn": int(row[3]),
            "unlabelled": int(row[4] + row[5]),
            "unlabelled_selected": int(row[5]),
        }
        target = counts.unknown if group is None else counts.groups.setdefault(group, cells_zero())
        cells_add(target, cells)
    return counts


def _pending(
    keys_column: pa.ChunkedArray[Any],
    unlabelled: npt.NDArray[np.bool_],
    selected: npt.NDArray[np.bool_],
    group_codes: Sequence[tuple[npt.NDArray[np.int64], list[str | None]]],
    display_name: str,
    name: str,
) -> PendingRows:
    keys = pc.utf8_trim_whitespace(_text(keys_column))
    missing = _bools(pc.or_kleene(pc.is_null(keys), pc.equal(keys, pa.scalar(""))))
    if missing.any():
        raise DatasetError(
            "the row key is missing; every row needs one",
            file=display_name,
            row=int(np.flatnonzero(missing)[0]) + 1,
            column=name,
        )
    if not _ascending(keys) and len(pc.unique(keys)) != len(keys):
        raise DatasetError("row keys repeat; each row of a batch needs its own key", file=display_name, column=name)
    # A key's characters are at most its bytes: count characters only when some key is that long in bytes.
    if pc.max(pc.binary_length(keys)).as_py() > MAX_ROW_KEY and pc.max(pc.utf8_length(keys)).as_py() > MAX_ROW_KEY:
        raise DatasetError(f"a row key is longer than {MAX_ROW_KEY} characters", file=display_name, column=name)
    every = bool(unlabelled.all())  # e.g. a batch whose labels all come later: nothing to take
    where = None if every else np.flatnonzero(unlabelled)
    columns: dict[str, Any] = {
        "key": keys if where is None else keys.take(_positions(where)),
        "selected": pa.array(selected if where is None else selected[where]),
    }
    for index, (codes, groups) in enumerate(group_codes):
        columns[group_column(index)] = _groups_encoded(codes if where is None else codes[where], groups)
    return PendingRows(pa.table(columns))


def _ascending(keys: pa.StringArray) -> bool:
    """Whether every key sorts strictly after the one before, so that no key repeats: one vectorised
    comparison (3 ms for a million keys) where hashing them all takes 40 ms or more. Keys often come in
    order (sequence numbers, time-ordered ids); other keys are hashed (``pc.unique``: half the time of
    ``count_distinct``)."""
    if len(keys) < 2:
        return True
    return bool(pc.all(pc.less(keys.slice(0, len(keys) - 1), keys.slice(1))).as_py())


def _groups_encoded(codes: npt.NDArray[np.int64], groups: Sequence[str | None]) -> pa.DictionaryArray[Any, Any]:
    """Each row's group (null: unknown) as a dictionary of the distinct groups: no text per row to build
    or to write to the side file."""
    distinct = sorted({group for group in groups if group is not None})
    number = {group: index for index, group in enumerate(distinct)}
    mapping = np.array([-1 if group is None else number[group] for group in groups], dtype=np.int32)
    indices = mapping[codes]
    unknown = indices < 0
    return pa.DictionaryArray.from_arrays(
        pa.array(indices, pa.int32(), mask=unknown if unknown.any() else None), pa.array(distinct, pa.string())
    )


@dataclass(frozen=True)
class LabelRows:
    """The labelled rows of a labels file: their key and whether the label is positive (a key given
    twice: its last label)."""

    keys: pa.StringArray
    positive: npt.NDArray[np.bool_]


def read_labels(
    path: Path, *, row_key: str, label: str, positive: str, display_name: str, max_bytes: int, limits: ReadLimits
) -> LabelRows:
    """The rows of a labels file that carry a label: their key and whether the label is positive."""
    file_format = file_format_of(path, display_name)
    check_size(path, display_name, max_bytes)
    declared = [(row_key, "row key"), (label, "label")]
    loaded = load(path, file_format, display_name, columns=[row_key, label], csv_subset=True, limits=limits)
    check_columns_present(loaded.columns, declared, display_name)
    known, is_positive = _labels(loaded.table.column(label), positive, display_name, label)
    keys = pc.utf8_trim_whitespace(_text(loaded.table.column(row_key)))
    where = np.flatnonzero(known)
    return LabelRows(keys=keys.take(_positions(where)), positive=is_positive[where])


@dataclass(frozen=True)
class LabelsApplied:
    """What labels did to a batch's pending rows: the delta per attribute (rows moved out of
    ``unlabelled`` into tp/fn/fp/tn), how many pending rows were labelled, how many distinct keys
    matched none, and the rows still pending."""

    delta: dict[str, AttributeCounts]
    labelled: int
    unmatched: int
    remaining: PendingRows


def labels_apply(pending: PendingRows | None, labels: LabelRows, attributes: Sequence[str]) -> LabelsApplied:
    """Match ``labels`` to ``pending`` (None: no row pending) by key, vectorised (a hash join in
    Arrow): each matched row's cell from its label and selection, one ``bincount`` per attribute."""
    if pending is None:
        pending = PendingRows(
            pa.table(
                {
                    "key": pa.array([], pa.string()),
                    "selected": pa.array([], pa.bool_()),
                    **{group_column(index): pa.array([], pa.string()) for index in range(len(attributes))},
                }
            )
        )
    # The last label of a key wins: look the keys up in the labels reversed.
    count = len(labels.keys)
    reversed_keys = labels.keys.take(_positions(np.arange(count - 1, -1, -1)))
    distinct = int(pc.count_distinct(labels.keys).as_py()) if count else 0
    table = pending.table
    found = pc.index_in(table.column("key"), value_set=reversed_keys)
    matched_mask = _bools(pc.is_valid(found))
    where = np.flatnonzero(matched_mask)
    label_row = count - 1 - np.asarray(_fill_null(found, 0).to_numpy(zero_copy_only=False), dtype=np.int64)[where]
    positive = labels.positive[label_row] if count else np.zeros(0, dtype=bool)
    selected = _bools(table.column("selected"))[where]
    # tp 0, fn 1, fp 2, tn 3; the rows leave unlabelled, and unlabelled_selected when selected.
    cell = (~positive).astype(np.int64) * 2 + (~selected).astype(np.int64)
    delta: dict[str, AttributeCounts] = {}
    taken = _positions(where)
    for index, name in enumerate(attributes):
        column = table.column(group_column(index)).take(taken)
        codes, groups = _attribute_codes(column, "pending rows", name)
        delta[name] = _moved(codes, groups, cell, selected)
    remaining = table.filter(pa.array(~matched_mask))
    return LabelsApplied(
        delta=delta, labelled=len(where), unmatched=distinct - len(where), remaining=PendingRows(remaining)
    )


def _moved(
    codes: npt.NDArray[np.int64], groups: Sequence[str | None], cell: npt.NDArray[np.int64], selected: npt.NDArray[Any]
) -> AttributeCounts:
    width = 4
    table = np.bincount(codes * width + cell, minlength=len(groups) * width).reshape(len(groups), width)
    chosen = np.bincount(codes, weights=selected.astype(np.float64), minlength=len(groups))
    counts = AttributeCounts()
    for index, group in enumerate(groups):
        row = table[index]
        if not row.any():
            continue
        moved = {
            "tp": int(row[0]),
            "fn": int(row[1]),
            "fp": int(row[2]),
            "tn": int(row[3]),
            "unlabelled": -int(row.sum()),
            "unlabelled_selected": -int(chosen[index]),
        }
        target = counts.unknown if group is None else counts.groups.setdefault(group, cells_zero())
        cells_add(target, moved)
    return counts


def counts_from_json(data: object, attributes: Sequence[str]) -> tuple[int, dict[str, AttributeCounts]]:
    """Pre-aggregated counts ``{"<attribute>": {"groups": {"<group>": {"tp": n, ...}}, "unknown": {...}}}``
    checked: every attribute given, whole numbers, unlabelled_selected at most unlabelled, and the same
    rows under every attribute. Returns (rows, counts)."""
    if not isinstance(data, Mapping):
        raise BatchCountsError("The counts are a JSON object keyed by sensitive attribute.", field="counts")
    missing = [name for name in attributes if name not in data]
    if missing:
        raise BatchCountsError(
            f"The counts have no attribute {missing[0]!r}; give {', '.join(repr(name) for name in attributes)}.",
            field=f"counts.{missing[0]}",
        )
    extra = sorted(set(map(str, data)) - set(attributes))
    if extra:
        raise BatchCountsError(
            f"{extra[0][:60]!r} is not a sensitive attribute of this deployment's model ({', '.join(attributes)}).",
            field=f"counts.{extra[0][:60]}",
        )
    counts: dict[str, AttributeCounts] = {}
    for name in attributes:
        section = data[name]
        where = f"counts.{name}"
        if not isinstance(section, Mapping) or not isinstance(section.get("groups", {}), Mapping):
            raise BatchCountsError('An attribute\'s counts are {"groups": {...}, "unknown": {...}}.', field=where)
        unknown_keys = sorted(set(map(str, section)) - {"groups", "unknown"})
        if unknown_keys:
            raise BatchCountsError(
                f"An attribute's counts have groups and unknown, not {unknown_keys[0][:60]!r}.", field=where
            )
        attribute = AttributeCounts()
        for group, cells in section.get("groups", {}).items():
            if not isinstance(group, str) or not group.strip() or len(group) > 255:
                raise BatchCountsError("A group is 1 to 255 characters.", field=f"{where}.groups")
            attribute.groups[group.strip()] = _cells(cells, f"{where}.groups.{group[:60]}")
        if len(attribute.groups) > MAX_GROUPS:
            raise BatchCountsError(f"An attribute has at most {MAX_GROUPS} groups.", field=f"{where}.groups")
        attribute.unknown = _cells(section.get("unknown", {}), f"{where}.unknown")
        counts[name] = attribute
    rows = {name: counts[name].rows for name in attributes}
    first = attributes[0]
    for name in attributes[1:]:
        if rows[name] != rows[first]:
            raise BatchCountsError(
                f"The counts of {name!r} hold {rows[name]} rows and those of {first!r} {rows[first]}: every "
                "attribute counts the same rows (put rows of unknown group under unknown).",
                field=f"counts.{name}",
            )
    if rows[first] == 0:
        raise BatchCountsError("The counts hold no rows.", field="counts")
    return rows[first], counts


def _cells(value: object, where: str) -> Cells:
    if not isinstance(value, Mapping):
        raise BatchCountsError(f"Counts are an object of {', '.join(CELLS)}.", field=where)
    extra = sorted(set(map(str, value)) - set(CELLS))
    if extra:
        raise BatchCountsError(
            f"Counts are {', '.join(CELLS)}, not {extra[0][:60]!r}.", field=f"{where}.{extra[0][:60]}"
        )
    cells = cells_zero()
    for name in CELLS:
        number = value.get(name, 0)
        if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number < 2**53:
            raise BatchCountsError(f"A count is a whole number of at least 0, not {number!r}.", field=f"{where}.{name}")
        cells[name] = number
    if cells["unlabelled_selected"] > cells["unlabelled"]:
        raise BatchCountsError("unlabelled_selected cannot exceed unlabelled.", field=f"{where}.unlabelled_selected")
    return cells
