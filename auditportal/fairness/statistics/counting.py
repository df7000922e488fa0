"""Confusion cells per group, counted block by block straight from the parsed columns.

Pure pyarrow/numpy (no Django). This is the audit's fast path for the common file: an integer
0/1 label, a numeric score (or an integer 0/1 prediction) and the attributes as the CSV reader hands
them over. Each block of rows (about 50k, the reader's own blocks) is counted while it is in cache:
its confusion cell per row (label, prediction) is computed with numpy, then, per attribute, one
``bincount`` over ``(dictionary entry, cell)`` (the reader dictionary-encodes text as it parses;
numbers are encoded here). Only the small per-value tables are then mapped to groups. No per-row
array of the whole file is built, and the blocks are shared between two threads.

:func:`count_blocks` answers None whenever the columns are anything else, or anything looks wrong
(a missing value, a third label value, NaN scores, too many groups or values, text that is not
UTF-8...): the caller then takes the general path, which decodes every column with registration's
checks and reports the exact row and column. Both paths give the same tables; a test holds them to that.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from auditportal.fairness.files.intersections import attribute_key, group_key
from auditportal.fairness.files.tabular import (
    DatasetError,
    DatasetSpec,
    arrow_scalar,
    attribute_groups,
    entry_texts,
    numpy_view,
)
from auditportal.fairness.files.tabular import integer_label as integer_label_bounds
from auditportal.fairness.statistics import stats

# Beyond this many cells in the intersection's table (or in one block's), the general path is used.
MAX_BLOCK_SLOTS = 1 << 20
# Labels are doubled in int64; beyond this the general path takes them.
_LARGEST_LABEL = 2**61
# Fewer rows than this are counted on one thread.
_THREADED_ROWS = 1_000_000
# Column j of a block's table is label_bit * 2 + predicted; these orders turn it into tp, fn, fp, tn.
_CELLS_WHEN_POSITIVE_BIT = {1: [3, 2, 1, 0], 0: [1, 0, 3, 2]}

Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class GroupCounts:
    columns: tuple[str, ...]  # the attribute, or the intersected attributes
    values: tuple[tuple[str, ...], ...]  # per group, its value in each of ``columns``
    counts: stats.Counts  # (groups, 4): tp, fn, fp, tn
    unknown: int  # rows whose group is unknown

    @classmethod
    def of_attribute(cls, name: str, groups: Sequence[str], counts: stats.Counts, unknown: int) -> GroupCounts:
        return cls((name,), tuple((group,) for group in groups), counts, unknown)

    @property
    def name(self) -> str:
        """The table's key in the audit document (intersections.attribute_key)."""
        return attribute_key(self.columns)

    @property
    def groups(self) -> tuple[str, ...]:
        """The groups' keys (intersections.group_key): never the same for two groups."""
        return tuple(group_key(values) for values in self.values)


@dataclass(frozen=True)
class Counted:
    tables: tuple[GroupCounts, ...]  # one per attribute, then the intersection when asked for
    positives: int
    predicted_positives: int


@dataclass(frozen=True)
class _Attribute:
    name: str
    groups: tuple[str, ...]
    # Per block: the block's dictionary entries (plus a last one for null) mapped to group + 1 (0 = unknown).
    maps: list[Ints]


def count_blocks(
    table: pa.Table,
    *,
    spec: DatasetSpec,
    output: str,
    threshold: float | None,
    intersect: bool,
    display_name: str,
) -> Counted | None:
    """Count the confusion cells of every attribute (and their intersection); None when the general
    path must decide. ``threshold`` None means ``output`` holds 0/1 predictions."""
    bounds = integer_label_bounds(table.column(spec.label), spec.positive)
    if bounds is None or not _usable_output(table.column(output), threshold):
        return None
    low, positive = bounds
    if abs(low) > _LARGEST_LABEL:
        return None
    encoded = []
    for name in spec.attributes:
        column = dictionary_encoded(table.column(name))
        if column is None:
            return None
        encoded.append(column)
    arrays = [table.column(spec.label), table.column(output), *encoded]
    blocks = pa.table(arrays, names=[str(i) for i in range(len(arrays))]).to_batches()
    try:
        attributes = [
            map_entries(name, [cast(Any, block.column(2 + i)) for block in blocks], spec, display_name)
            for i, name in enumerate(spec.attributes)
        ]
    except DatasetError:
        return None  # the general path reports it, after any problem with the label
    mapped = attributes
    if intersect and (
        math.prod(len(a.groups) + 1 for a in mapped) * 4 > MAX_BLOCK_SLOTS
        or max(math.prod(len(m) for m in maps) for maps in zip(*(a.maps for a in mapped), strict=True)) * 4
        > MAX_BLOCK_SLOTS
    ):
        return None

    shape = (*(len(a.groups) + 1 for a in mapped), 4) if intersect else None
    parts = _split(len(blocks), threads=2 if table.num_rows >= _THREADED_ROWS else 1)
    if len(parts) == 1:
        results = [_count_part(blocks, parts[0], attributes, low, threshold, shape)]
    else:
        with ThreadPoolExecutor(max_workers=len(parts), thread_name_prefix="count") as pool:
            jobs = [pool.submit(_count_part, blocks, part, attributes, low, threshold, shape) for part in parts]
            results = [job.result() for job in jobs]
    if any(result is None for result in results):
        return None  # NaN scores
    per_thread = cast("list[list[Ints]]", results)

    order = _CELLS_WHEN_POSITIVE_BIT[positive - low]
    if intersect:
        joint = np.sum([part[0] for part in per_thread], axis=0)
        axes = tuple(range(len(mapped)))
        singles = [(a.groups, joint.sum(axis=tuple(b for b in axes if b != i))) for i, a in enumerate(mapped)]
    else:
        joint = None
        singles = [
            (attribute.groups, np.sum([part[i] for part in per_thread], axis=0))
            for i, attribute in enumerate(attributes)
        ]
    tables = [
        GroupCounts.of_attribute(name, groups, counts[1:, order], int(counts[0].sum()))
        for name, (groups, counts) in zip(spec.attributes, singles, strict=True)
    ]
    if joint is not None:
        tables.append(_intersection_table(mapped, joint[..., order]))
    overall = singles[0][1].sum(axis=0)
    positives = int(overall[2] + overall[3]) if positive - low == 1 else int(overall[0] + overall[1])
    if not 0 < positives < table.num_rows:
        return None  # a single-value label: the general path refuses it, naming its value
    return Counted(
        tables=tuple(tables),
        positives=positives,
        predicted_positives=int(overall[1] + overall[3]),
    )


def _usable_output(column: Any, threshold: float | None) -> bool:
    kind = column.type
    if column.null_count or len(column) == 0:
        return False
    if threshold is not None:
        return bool(pa.types.is_integer(kind) or pa.types.is_float32(kind) or pa.types.is_float64(kind))
    if not pa.types.is_integer(kind):
        return False
    extremes = pc.min_max(column)
    return bool(extremes["min"].as_py() >= 0 and extremes["max"].as_py() <= 1)


def dictionary_encoded(column: pa.ChunkedArray[Any]) -> pa.ChunkedArray[Any] | None:
    """The column as dictionary chunks; None when it cannot be (all null, too many values, a nested type)."""
    if pa.types.is_dictionary(column.type):
        return column
    if pa.types.is_null(column.type):
        return None
    try:
        return pc.dictionary_encode(column)
    except pa.ArrowNotImplementedError:
        return None


def map_entries(name: str, chunks: Sequence[Any], spec: DatasetSpec, display_name: str) -> _Attribute:
    """Render every block's (small) dictionary once and map its entries to groups."""
    dictionaries = [chunk.dictionary for chunk in chunks]
    texts, text_of_entry = entry_texts(pa.concat_arrays(dictionaries), display_name=display_name, column=name)
    groups, group_of_text = attribute_groups(texts, name, spec, display_name)
    group_of_entry = np.append(group_of_text, np.int32(-1))[text_of_entry] + 1
    maps = []
    start = 0
    for dictionary in dictionaries:
        end = start + len(dictionary)
        maps.append(np.append(group_of_entry[start:end], 0).astype(np.int64))  # the last entry: null
        start = end
    return _Attribute(name, groups, maps)


def _split(count: int, *, threads: int) -> list[range]:
    threads = max(1, min(threads, count))
    edges = [count * i // threads for i in range(threads + 1)]
    return [range(edges[i], edges[i + 1]) for i in range(threads)]


def _count_part(
    blocks: Sequence[pa.RecordBatch],
    part: range,
    attributes: Sequence[_Attribute],
    low: int,
    threshold: float | None,
    shape: tuple[int, ...] | None,
) -> list[Ints] | None:
    """Per attribute, the table of the blocks in ``part`` (or, when ``shape`` is given, the joint
    table of all of them). None when a score is NaN.

    Work arrays are allocated once and reused for every block: fresh block-sized temporaries would
    each be new pages from the system (they are above malloc's mmap threshold), which costs more
    than the arithmetic.
    """
    if shape is None:
        totals = [np.zeros((len(a.groups) + 1, 4), np.int64) for a in attributes]
    else:
        totals = [np.zeros(shape, np.int64)]
    longest = max((len(blocks[index]) for index in part), default=0)
    bits_buffer = np.empty(longest, np.int64)
    key_buffer = np.empty(longest, np.int64)
    predicted_buffer = np.empty(longest, np.bool_)
    cells = np.arange(4)
    for index in part:
        block = blocks[index]
        rows = len(block)
        # bits = (label - low) * 2 + predicted, in 0..3
        bits, key, predicted = bits_buffer[:rows], key_buffer[:rows], predicted_buffer[:rows]
        label = numpy_view(block.column(0))
        np.add(label, label, out=bits, dtype=np.int64, casting="unsafe")  # in int64: an int8 label may be 100
        if low:
            bits -= 2 * low
        output = numpy_view(block.column(1))
        if threshold is None:
            np.add(bits, output, out=bits, casting="unsafe")  # 0 or 1, checked
        else:
            if np.isnan(np.min(output)):  # min propagates NaN: one fast pass
                return None
            # Compared in float64, as the general path does (a float32 score must not round the threshold).
            np.greater_equal(output, np.float64(threshold), out=predicted)
            np.add(bits, predicted, out=bits)
        if shape is None:
            for i, (total, attribute) in enumerate(zip(totals, attributes, strict=True)):
                column = cast(Any, block.column(2 + i))
                indices, size = block_entries(column)
                np.left_shift(indices, 2, out=key, casting="unsafe")
                key += bits
                counts = np.bincount(key, minlength=size * 4).reshape(size, 4)
                np.add.at(total, attribute.maps[index], counts)
        else:
            mapped = attributes
            entries = [block_entries(cast(Any, block.column(2 + i))) for i in range(len(mapped))]
            indices, size = entries[0]
            np.copyto(key, indices, casting="unsafe")
            sizes = [size]
            for more, size in entries[1:]:
                key *= size
                key += more
                sizes.append(size)
            key <<= 2
            key += bits
            counts = np.bincount(key, minlength=math.prod(sizes) * 4).reshape(*sizes, 4)
            np.add.at(totals[0], np.ix_(*(a.maps[index] for a in mapped), cells), counts)
    return totals


def block_entries(array: Any) -> tuple[npt.NDArray[np.integer[Any]], int]:
    """A dictionary block's indices (null as the entry after the dictionary), and the number of
    entries including that one."""
    size = len(array.dictionary)
    indices = array.indices
    if indices.null_count:
        indices = pc.fill_null(indices, arrow_scalar(size, indices.type))
    return numpy_view(indices), size + 1


def _intersection_table(attributes: Sequence[_Attribute], joint: Ints) -> GroupCounts:
    """The intersection from the joint table, whose index 0 on every attribute axis is unknown."""
    known = joint[(slice(1, None),) * len(attributes)]
    return intersection_table(
        [(a.name, a.groups) for a in attributes], known.reshape(-1, 4), int(joint.sum() - known.sum())
    )


def intersection_table(
    attributes: Sequence[tuple[str, tuple[str, ...]]], counts: stats.Counts, unknown: int
) -> GroupCounts:
    """The intersection of ``attributes`` ((name, groups) pairs) from the counts of every combination
    of known groups (the first attribute's index varying slowest) and the number of rows where any
    attribute is unknown; each group is the tuple of its values. Combinations without rows are left
    out: with no rows every rate is undefined."""
    present = np.flatnonzero(counts.sum(axis=1))
    axes = np.unravel_index(present, [len(groups) for _, groups in attributes])
    values = tuple(
        tuple(groups[int(axis[k])] for (_, groups), axis in zip(attributes, axes, strict=True))
        for k in range(len(present))
    )
    return GroupCounts(tuple(name for name, _ in attributes), values, counts[present], unknown)
