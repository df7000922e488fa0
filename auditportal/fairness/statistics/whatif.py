"""What-if thresholds: a scored prediction file prepared once, then judged at any thresholds.

Pure pyarrow/numpy (no Django). :func:`prepare` reads a scored file as a prediction audit does
(the same reading, validation and messages) and keeps, per *cell* (one combination of every
attribute's group, unknown included) and per label value, the cell's scores sorted. At a threshold t
the cell's label positives predicted positive are ``len - searchsorted(scores, t, "left")`` (score >= t
is predicted positive, as in an audit), so any thresholds cost one binary search per cell and label
(:func:`counts_at`), exactly, whatever the number of rows. The counts are then judged by the audit's
own code (``audit.judged_document``), so a what-if at some thresholds gives the document an audit of
the file with the equivalent prediction column gives.

A threshold may be set globally and overridden per group of one attribute (or of the intersection):
a row takes its group's threshold, else the global one; rows whose group there is unknown take the
global one.

:func:`suggest` searches, per group of one attribute, deterministic thresholds that bring the
equal-opportunity gap (max minus min of the groups' TPR) within the tolerance at the smallest loss of
accuracy (docs/whatif.md, "Suggested thresholds").
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from auditportal.fairness.errors import UserError
from auditportal.fairness.files.intersections import attribute_key, group_key
from auditportal.fairness.files.tabular import (
    NO_LIMITS,
    DatasetError,
    DatasetSpec,
    RawColumns,
    ReadLimits,
    decode_labelled,
    integer_label,
    numpy_view,
    read_columns,
    repeated_columns_warnings,
)
from auditportal.fairness.statistics.audit import AuditSpec, AuditSpecError, judged_document, score_values
from auditportal.fairness.statistics.counting import (
    Counted,
    GroupCounts,
    block_entries,
    dictionary_encoded,
    intersection_table,
    map_entries,
)

# block_entries, dictionary_encoded and map_entries are the audit's block path (count_blocks): the what-if
# reads the common file with the same maps.
JSON = dict[str, Any]
Floats = npt.NDArray[np.float64]

# Cells (combinations of every attribute's groups, unknown included) a what-if keeps apart; each
# threshold change costs two binary searches per cell.
MAX_CELLS = 20_000
# Candidate thresholds per group, and target TPR levels, the suggestion searches over.
SUGGEST_CANDIDATES = 2_000
SUGGEST_LEVELS = 2_000
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Prepared:
    """A scored file ready for any thresholds. ``scores`` holds every row's score, grouped by cell
    then label (negatives first), sorted within each segment; ``offsets[s]:offsets[s + 1]`` is segment
    s = 2 * cell + label. Cell c's position along attribute i is its group index + 1 (0: unknown),
    the first attribute varying slowest."""

    spec: AuditSpec  # its threshold is the global threshold the what-if starts at
    attributes: tuple[tuple[str, tuple[str, ...]], ...]  # (name, groups) per attribute
    offsets: npt.NDArray[np.int64]
    scores: Floats
    num_rows: int
    positives: int
    file: JSON  # name, format, sha256, size_bytes of the scored file
    warnings: tuple[str, ...] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(groups) + 1 for _, groups in self.attributes)

    def meta(self) -> JSON:
        """Everything but the scores, as plain JSON (stored beside the scores' file)."""
        return {
            "format_version": FORMAT_VERSION,
            "spec": self.spec.parameters(),
            "attributes": [[name, list(groups)] for name, groups in self.attributes],
            "offsets": [int(value) for value in self.offsets],
            "num_rows": self.num_rows,
            "positives": self.positives,
            "file": dict(self.file),
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any], scores: Floats) -> Prepared:
        values: dict[str, Any] = {
            key: tuple(value) if isinstance(value, list) else value for key, value in meta["spec"].items()
        }
        return cls(
            spec=AuditSpec(**values),
            attributes=tuple((name, tuple(groups)) for name, groups in meta["attributes"]),
            offsets=np.asarray(meta["offsets"], np.int64),
            scores=scores,
            num_rows=int(meta["num_rows"]),
            positives=int(meta["positives"]),
            file=dict(meta["file"]),
            warnings=tuple(meta.get("warnings", ())),
        )

    def score_range(self) -> tuple[float, float]:
        """The smallest and largest score (each segment is sorted: its ends)."""
        starts = self.offsets[:-1][self.offsets[1:] > self.offsets[:-1]]
        ends = self.offsets[1:][self.offsets[1:] > self.offsets[:-1]] - 1
        if not len(starts):
            return (0.0, 1.0)
        return float(np.min(self.scores[starts])), float(np.max(self.scores[ends]))

    def groups_of(self, key: str) -> tuple[str, ...]:
        """The groups' keys of one attribute, or of the intersection (``key`` as in the document)."""
        for name, groups in self.attributes:
            if name == key:
                return groups
        if self.spec.intersect and key == self.intersection_key:
            return tuple(group_key(values) for values in self._intersection_values())
        raise KeyError(key)

    @property
    def attribute_keys(self) -> tuple[str, ...]:
        names = tuple(name for name, _ in self.attributes)
        return (*names, self.intersection_key) if self.spec.intersect else names

    @property
    def intersection_key(self) -> str:
        return attribute_key([name for name, _ in self.attributes])

    def _intersection_values(self) -> list[tuple[str, ...]]:
        sizes = [len(groups) for _, groups in self.attributes]
        cells = np.arange(math.prod(sizes))
        axes = np.unravel_index(cells, sizes)
        return [
            tuple(groups[int(axis[k])] for (_, groups), axis in zip(self.attributes, axes, strict=True))
            for k in range(len(cells))
        ]


@dataclass(frozen=True)
class Thresholds:
    """The global threshold, and overrides for groups of one attribute (its key in the document)."""

    threshold: float
    attribute: str | None = None
    groups: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def as_json(self) -> JSON:
        return {
            "threshold": self.threshold,
            "attribute": self.attribute if self.groups else None,
            "groups": {name: float(value) for name, value in sorted(self.groups.items())},
        }


class ThresholdError(UserError):
    """A threshold a what-if cannot take; ``field`` names the parameter (``threshold[gender=f]``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field)


def override_field(attribute: str, group: str) -> str:
    return f"threshold[{attribute}={group}]"


# --------------------------------------------------------------------------- preparing


def prepare(
    path: Path,
    spec: AuditSpec,
    *,
    display_name: str,
    max_bytes: int,
    sha256: str | None = None,
    limits: ReadLimits = NO_LIMITS,
) -> Prepared:
    """Read a scored prediction file once and keep its scores per cell and label, sorted.

    ``spec`` is an audit's spec with a score column (its threshold the starting global threshold);
    a spec with a prediction column or without a score is refused naming the field ``score``.
    Raises DatasetError for the file's problems, with the audit's messages.
    """
    if not spec.score:
        raise AuditSpecError(
            "score",
            "a what-if needs a score column: it moves the threshold over the scores, which a 0/1 prediction "
            "column does not have",
        )
    if spec.threshold is None:
        spec = dataclasses.replace(spec, threshold=0.5)
    spec.check()
    columns_spec = spec.columns_spec()
    score = cast(str, spec.score)
    others = [(score, "score")]
    raw = read_columns(
        path, columns_spec, others=others, display_name=display_name, max_bytes=max_bytes, sha256=sha256, limits=limits
    )
    # The audit's block path (counting.count_blocks) when the columns are the common kind, else the
    # general path, which decodes every column with registration's checks and names the row at fault.
    done = _prepared_from_blocks(raw.table, columns_spec, score, display_name)
    if done is None:
        done = _prepared_from_columns(raw, columns_spec, score, display_name)
    attributes, grouped, bounds = done
    return Prepared(
        spec=spec,
        attributes=attributes,
        offsets=bounds,
        scores=grouped,
        num_rows=raw.table.num_rows,
        positives=int(np.diff(bounds)[1::2].sum()),
        file={"name": display_name, "format": raw.file_format, "sha256": raw.sha256, "size_bytes": raw.size_bytes},
        warnings=tuple(repeated_columns_warnings(raw.columns, [columns_spec.label, *columns_spec.attributes, score])),
    )


# attributes (name, groups), the scores grouped by segment and sorted, the segments' offsets
Grouped = tuple[tuple[tuple[str, tuple[str, ...]], ...], Floats, npt.NDArray[np.int64]]


def _check_cells(shape: Sequence[int], display_name: str) -> None:
    cells = math.prod(shape)
    if cells > MAX_CELLS:
        raise DatasetError(
            f"the attributes' groups make {cells:,} combinations, more than the {MAX_CELLS:,} a what-if keeps "
            "apart; declare fewer or coarser attributes",
            file=display_name,
        )


def _prepared_from_columns(raw: RawColumns, spec: DatasetSpec, score: str, display_name: str) -> Grouped:
    """The general path: every column decoded with registration's checks (DatasetError naming the row
    and column), then the rows grouped in blocks of the decoded arrays."""
    others = [(score, "score")]
    columns = decode_labelled(raw, spec, others=others, display_name=display_name)
    scores = score_values(columns.others[score], display_name, score)
    attributes = tuple((info.name, tuple(info.groups)) for info in columns.attributes)
    shape = tuple(len(groups) + 1 for _, groups in attributes)
    _check_cells(shape, display_name)
    codes, target = columns.codes, columns.target
    rows = len(scores)
    blocks = [(low, min(low + _BLOCK_ROWS, rows)) for low in range(0, rows, _BLOCK_ROWS)]

    def fill(index: int, out: npt.NDArray[np.signedinteger[Any]]) -> None:
        low, high = blocks[index]
        out[...] = 0
        for size, values in zip(shape, codes, strict=True):
            out *= size
            out += values[low:high]
            out += 1
        out *= 2
        out += target[low:high]

    def scores_of(index: int) -> Floats:
        low, high = blocks[index]
        return scores[low:high]

    grouped, bounds = _sorted_by_segment(rows, 2 * math.prod(shape), blocks, fill, scores_of)
    return attributes, grouped, bounds


def _prepared_from_blocks(table: pa.Table, spec: DatasetSpec, score: str, display_name: str) -> Grouped | None:
    """The common file straight from the reader's blocks, as the audit counts it (counting.count_blocks):
    a complete integer label of two values, float64 scores without a gap or NaN, attributes whose
    blocks are dictionaries (the CSV reader's), each block's dictionary mapped to groups once; no
    per-row array of the whole file is built but the segments. None whenever anything else is found
    (the general path then decides, with its messages). Otherwise the same groups and, row for row,
    the same segments and scores as the general path: the same result, byte for byte (tests hold it)."""
    label_bounds = integer_label(table.column(spec.label), spec.positive)
    scores = table.column(score)
    if label_bounds is None or not pa.types.is_float64(scores.type) or scores.null_count:
        return None
    if any(len(chunk) and np.isnan(np.min(numpy_view(chunk))) for chunk in scores.chunks):
        return None  # min propagates NaN: one fast pass a block
    encoded = []
    for name in spec.attributes:
        column = dictionary_encoded(table.column(name))
        if column is None:
            return None
        encoded.append(column)
    arrays = [table.column(spec.label), scores, *encoded]
    batches = pa.table(arrays, names=[str(i) for i in range(len(arrays))]).to_batches()
    try:
        mapped = [
            map_entries(name, [cast(Any, batch.column(2 + i)) for batch in batches], spec, display_name)
            for i, name in enumerate(spec.attributes)
        ]
    except DatasetError:
        return None  # the general path reports it, after any problem with the label
    shape = tuple(len(attribute.groups) + 1 for attribute in mapped)
    if math.prod(shape) > MAX_CELLS:
        return None
    positive = label_bounds[1]
    pieces: list[tuple[int, pa.RecordBatch]] = []  # (its batch, rows of it): a Parquet row group may be long
    blocks: list[tuple[int, int]] = []
    start = 0
    for number, batch in enumerate(batches):
        for offset in range(0, len(batch), _BLOCK_ROWS):
            piece = batch.slice(offset, _BLOCK_ROWS)
            pieces.append((number, piece))
            blocks.append((start, start + len(piece)))
            start += len(piece)

    def fill(index: int, out: npt.NDArray[np.signedinteger[Any]]) -> None:
        number, piece = pieces[index]
        segment: npt.NDArray[np.int64] | None = None
        for i, (size, attribute) in enumerate(zip(shape, mapped, strict=True)):
            entries, _ = block_entries(cast(Any, piece.column(2 + i)))
            position = attribute.maps[number][entries]  # group + 1, 0 for unknown
            if segment is None:
                segment = position
            else:
                segment *= size
                segment += position
        assert segment is not None  # a spec has at least one attribute
        segment *= 2
        segment += numpy_view(piece.column(0)) == positive
        out[...] = segment

    def scores_of(index: int) -> Floats:
        return cast(Floats, numpy_view(pieces[index][1].column(1)))

    rows = table.num_rows
    grouped, bounds = _sorted_by_segment(rows, 2 * math.prod(shape), blocks, fill, scores_of)
    if not 0 < int(np.diff(bounds)[1::2].sum()) < rows:
        return None  # a single-value label: the general path refuses it, naming its value
    return tuple((attribute.name, attribute.groups) for attribute in mapped), grouped, bounds


# Rows a thread groups at a time: the block's segments, order and scores stay in cache.
_BLOCK_ROWS = 1 << 16
# Threads that group and sort the scores (numpy releases the GIL in argsort, take and sort).
_SORT_THREADS = 2
# Segments up to this many are copied out of a block slice by slice; more, with one scatter.
_GATHER_BY_SLICES = 64


def _sorted_by_segment(
    rows: int,
    segments: int,
    blocks: Sequence[tuple[int, int]],
    fill: Callable[[int, npt.NDArray[np.signedinteger[Any]]], None],
    scores_of: Callable[[int], Floats],
) -> tuple[Floats, npt.NDArray[np.int64]]:
    """The scores grouped by segment (2 * cell + label), each segment sorted, and the segments' offsets.

    ``blocks``: consecutive row ranges covering the rows in order; ``fill(k, out)`` writes block k's
    segments into ``out``, ``scores_of(k)`` gives its scores. Within a segment the scores are laid out
    in row order before they are sorted, as one stable argsort over the segments would lay them, so
    the result is that of a stable argsort followed by a sort of each segment, byte for byte (equal
    scores of different bits, 0.0 and -0.0, included). The blocks are split in two halves, one per
    thread; each half is grouped block by block (a stable sort of the block's segments in cache, then
    one gather), its pieces going after those of the half before; the segments are then sorted,
    largest first, by the two threads. The block's stable order is Arrow's ``array_sort_indices`` (a
    counting sort of small integers), faster here than numpy's stable argsort of them."""
    kind = np.int8 if segments <= 1 << 7 else np.int16 if segments <= 1 << 15 else np.int32
    segment: npt.NDArray[np.signedinteger[Any]] = np.empty(rows, kind)
    middle = next((index for index, (_, end) in enumerate(blocks) if end >= rows // 2), len(blocks) - 1) + 1
    halves = [range(0, middle), range(middle, len(blocks))]
    block_counts: list[npt.NDArray[np.int64] | None] = [None] * len(blocks)

    def number(half: range) -> npt.NDArray[np.int64]:
        counts = np.zeros(segments, np.int64)
        for index in half:
            low, high = blocks[index]
            fill(index, segment[low:high])
            these = np.bincount(segment[low:high], minlength=segments)
            counts += these
            if segments <= _GATHER_BY_SLICES:  # kept for the gathering (few: a few bytes a block)
                block_counts[index] = these
        return counts

    grouped: Floats = np.empty(rows, np.float64)

    def gather(job: tuple[range, npt.NDArray[np.int64]]) -> None:
        half, at = job
        arrow_kind = pa.from_numpy_dtype(segment.dtype)
        for index in half:
            low, high = blocks[index]
            block = segment[low:high]
            size = high - low
            indices = pc.array_sort_indices(pa.Array.from_buffers(arrow_kind, size, [None, pa.py_buffer(block.data)]))
            picked = scores_of(index)[numpy_view(indices).view(np.int64)]
            counts = block_counts[index]
            if counts is None:
                counts = np.bincount(block, minlength=segments)
            if segments <= _GATHER_BY_SLICES:
                taken = 0
                for value in np.flatnonzero(counts).tolist():
                    length, position = int(counts[value]), int(at[value])
                    grouped[position : position + length] = picked[taken : taken + length]
                    taken += length
            else:  # many segments: one scatter rather than a slice per segment
                shift = at - (np.cumsum(counts) - counts)
                grouped[np.arange(size) + np.repeat(shift, counts)] = picked
            at += counts

    with ThreadPoolExecutor(max_workers=_SORT_THREADS, thread_name_prefix="whatif-sort") as pool:
        per_half = list(pool.map(number, halves))
        bounds = np.zeros(segments + 1, np.int64)
        np.cumsum(np.sum(per_half, axis=0, dtype=np.int64), out=bounds[1:])
        starts, at = [], bounds[:-1].copy()
        for counts in per_half:
            starts.append(at.copy())
            at += counts
        list(pool.map(gather, zip(halves, starts, strict=True)))
        sizes = np.diff(bounds)
        largest_first = [int(index) for index in np.argsort(-sizes, kind="stable") if sizes[index] > 1]
        shares: list[list[int]] = [[] for _ in range(_SORT_THREADS)]
        loads = [0] * _SORT_THREADS
        for index in largest_first:
            lightest = loads.index(min(loads))
            shares[lightest].append(index)
            loads[lightest] += int(sizes[index])
        edges = bounds.tolist()

        def sort(share: list[int]) -> None:
            for index in share:
                grouped[edges[index] : edges[index + 1]].sort()

        list(pool.map(sort, shares))
    return grouped, bounds


def save_scores(scores: Floats, path: Path) -> str:
    """Write ``scores`` as ``numpy.save`` writes them (the same bytes: a version 1.0 header, then the
    array's bytes) and return the SHA-256 of the bytes written, taken from memory as they are written
    (one write of the buffer, hashed beside it) instead of reading the file back."""
    array = np.ascontiguousarray(scores)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, np.lib.format.header_data_from_array_1_0(array))
    data = array.data.cast("B")
    digest = hashlib.sha256(header.getvalue())
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="whatif-hash") as pool:
        hashed = pool.submit(digest.update, data)
        with path.open("wb") as handle:
            handle.write(header.getvalue())
            handle.write(data)
        hashed.result()
    return digest.hexdigest()


# --------------------------------------------------------------------------- at some thresholds


def check_thresholds(prepared: Prepared, thresholds: Thresholds) -> None:
    """ThresholdError naming the parameter for a threshold that is not finite, an override on an
    attribute the what-if does not have, or on a group that does not exist."""
    if not math.isfinite(thresholds.threshold):
        raise ThresholdError("threshold", f"the threshold must be a finite number, not {thresholds.threshold}")
    if not thresholds.groups:
        return
    key = cast(str, thresholds.attribute)
    try:
        groups = prepared.groups_of(key)
    except KeyError:
        names = ", ".join(repr(name) for name in prepared.attribute_keys)
        first = next(iter(thresholds.groups))
        raise ThresholdError(
            override_field(key, first), f"{key!r} is not an attribute of this what-if (attributes: {names})"
        ) from None
    for group, value in thresholds.groups.items():
        if group not in groups:
            shown = ", ".join(repr(name) for name in groups[:10]) + (", …" if len(groups) > 10 else "")
            raise ThresholdError(override_field(key, group), f"{group!r} is not a group of {key!r} (groups: {shown})")
        if not math.isfinite(value):
            raise ThresholdError(override_field(key, group), f"the threshold must be a finite number, not {value}")


def thresholds_from_query(
    items: Sequence[tuple[str, str]], *, attribute_keys: Sequence[str], default: float
) -> Thresholds:
    """Thresholds from query parameters: ``threshold=0.5`` (the global one; default ``default``) and
    ``threshold[ATTRIBUTE=GROUP]=0.4`` per group, all for one attribute (or the intersection, its
    key as in the document: ``gender&age``). ThresholdError names the parameter at fault. Other
    parameters are not looked at."""
    threshold = default
    attribute: str | None = None
    groups: dict[str, float] = {}
    # Longest first: an attribute whose name starts with another's and "=" is matched whole.
    keys = sorted(attribute_keys, key=len, reverse=True)
    for name, text in items:
        if not text.strip():
            continue  # an empty box: the default (the global threshold, for a group)
        if name == "threshold":
            threshold = _number(name, text)
            continue
        if not (name.startswith("threshold[") and name.endswith("]")):
            continue
        inner = name[len("threshold[") : -1]
        key = next((key for key in keys if inner.startswith(key + "=")), None)
        if key is None:
            given = inner.partition("=")[0]
            shown = ", ".join(repr(key) for key in attribute_keys)
            raise ThresholdError(
                name,
                f"{given!r} is not an attribute of this what-if (attributes: {shown}); "
                "write threshold[ATTRIBUTE=GROUP]=NUMBER",
            )
        if attribute is not None and key != attribute:
            raise ThresholdError(
                name,
                f"group thresholds apply to one attribute at a time: {attribute!r} has some already, "
                f"{key!r} cannot have others",
            )
        attribute = key
        groups[inner[len(key) + 1 :]] = _number(name, text)
    return Thresholds(threshold=threshold, attribute=attribute, groups=groups)


def _number(name: str, text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise ThresholdError(name, f"{text[:40]!r} is not a number; a threshold is a number such as 0.5") from None
    if not math.isfinite(value):
        raise ThresholdError(name, f"the threshold must be a finite number, not {text[:40]!r}")
    return value


def cell_thresholds(prepared: Prepared, thresholds: Thresholds) -> Floats:
    """Each cell's threshold."""
    shape = prepared.shape
    result = np.full(math.prod(shape), float(thresholds.threshold))
    if not thresholds.groups:
        return result
    key = cast(str, thresholds.attribute)
    names = [name for name, _ in prepared.attributes]
    axes = np.unravel_index(np.arange(len(result)), shape)
    if key in names:
        index = names.index(key)
        groups = prepared.attributes[index][1]
        per_position = np.full(len(groups) + 1, float(thresholds.threshold))
        for group, value in thresholds.groups.items():
            per_position[groups.index(group) + 1] = value
        return cast(Floats, per_position[axes[index]])
    # The intersection: a cell whose every attribute is known is one intersection group.
    known = np.all([axis > 0 for axis in axes], axis=0)
    sizes = [len(groups) for _, groups in prepared.attributes]
    flat = np.ravel_multi_index([axis[known] - 1 for axis in axes], sizes) if known.any() else np.array([], int)
    all_keys = prepared.groups_of(key)
    lookup = {name: position for position, name in enumerate(all_keys)}
    per_combination = np.full(len(all_keys), float(thresholds.threshold))
    for group, value in thresholds.groups.items():
        per_combination[lookup[group]] = value
    result[known] = per_combination[flat]
    return result


def counts_at(prepared: Prepared, thresholds: Thresholds) -> npt.NDArray[np.int64]:
    """(cells, 4) confusion counts (tp, fn, fp, tn) at ``thresholds``: two binary searches a cell."""
    per_cell = cell_thresholds(prepared, thresholds)
    offsets = prepared.offsets
    scores = prepared.scores
    counts = np.zeros((len(per_cell), 4), np.int64)
    for cell, threshold in enumerate(per_cell.tolist()):
        base = 2 * cell
        negatives_start, positives_start, end = offsets[base], offsets[base + 1], offsets[base + 2]
        if negatives_start == end:
            continue
        below_negative = int(np.searchsorted(scores[negatives_start:positives_start], threshold, "left"))
        below_positive = int(np.searchsorted(scores[positives_start:end], threshold, "left"))
        positives = int(end - positives_start)
        negatives = int(positives_start - negatives_start)
        counts[cell] = (positives - below_positive, below_positive, negatives - below_negative, below_negative)
    return counts


def counted_at(prepared: Prepared, thresholds: Thresholds) -> Counted:
    """The audit's per-group tables at ``thresholds``, as ``counting.count_blocks`` gives them."""
    cells = counts_at(prepared, thresholds)
    shape = prepared.shape
    joint = cells.reshape(*shape, 4)
    axes = tuple(range(len(shape)))
    tables = []
    for i, (name, groups) in enumerate(prepared.attributes):
        table = joint.sum(axis=tuple(axis for axis in axes if axis != i))
        tables.append(GroupCounts.of_attribute(name, groups, table[1:], int(table[0].sum())))
    if prepared.spec.intersect:
        known = joint[(slice(1, None),) * len(shape)]
        tables.append(
            intersection_table(list(prepared.attributes), known.reshape(-1, 4), int(joint.sum() - known.sum()))
        )
    overall = cells.sum(axis=0)
    return Counted(
        tables=tuple(tables),
        positives=prepared.positives,
        predicted_positives=int(overall[0] + overall[2]),
    )


def document_at(prepared: Prepared, thresholds: Thresholds, *, policy: JSON | None = None) -> JSON:
    """The audit document at ``thresholds``: what an audit of the file with these thresholds says.

    Its ``prediction`` object also gives ``thresholds`` (the global one and the overrides) when a
    group's threshold differs from the global one."""
    check_thresholds(prepared, thresholds)
    spec = dataclasses.replace(prepared.spec, threshold=float(thresholds.threshold))
    prediction: JSON = {"column": None, "score": spec.score, "threshold": spec.threshold}
    if thresholds.groups:
        prediction["thresholds"] = thresholds.as_json()
    return judged_document(
        counted_at(prepared, thresholds),
        spec,
        file=prepared.file,
        num_rows=prepared.num_rows,
        prediction=prediction,
        policy=policy,
        warnings=list(prepared.warnings),
        display_name=str(prepared.file["name"]),
    )


def answer_at(prepared: Prepared, thresholds: Thresholds, *, policy: JSON | None = None) -> JSON:
    """The document at ``thresholds`` with the accuracy beside it (overall and per group)."""
    document = document_at(prepared, thresholds, policy=policy)
    cells = counts_at(prepared, thresholds)
    overall = cells.sum(axis=0)
    rows = int(overall.sum())
    groups = {
        name: {
            group: (values["tp"] + values["tn"]) / values["n"] if values["n"] else None
            for group, values in section["groups"].items()
        }
        for name, section in document["attributes"].items()
    }
    return {
        "document": document,
        "accuracy": {
            "overall": float(overall[0] + overall[3]) / rows if rows else None,
            "correct": int(overall[0] + overall[3]),
            "groups": groups,
        },
    }


# --------------------------------------------------------------------------- suggested thresholds


@dataclass(frozen=True)
class Suggestion:
    attribute: str
    thresholds: Thresholds
    tolerance: float
    gap_before: float | None  # max - min TPR over the attribute's groups at the starting thresholds
    gap_after: float | None
    accuracy_before: float
    accuracy_after: float
    reached: bool  # whether the gap is within the tolerance at the suggested thresholds
    tpr: Mapping[str, float | None]  # per group with rows, at the suggested thresholds
    # Groups with label positives so few that their TPR moves in steps wider than the tolerance
    # (1 / positives > tolerance): they set which levels are reachable (small intersection groups).
    coarse: tuple[str, ...] = ()
    # Groups without label positives (no TPR): kept at the global threshold.
    kept: tuple[str, ...] = ()

    def as_json(self) -> JSON:
        return {
            "attribute": self.attribute,
            "thresholds": self.thresholds.as_json(),
            "tolerance": self.tolerance,
            "gap_before": self.gap_before,
            "gap_after": self.gap_after,
            "accuracy_before": self.accuracy_before,
            "accuracy_after": self.accuracy_after,
            "accuracy_cost": self.accuracy_before - self.accuracy_after,
            "reached": self.reached,
            "tpr": dict(self.tpr),
            "coarse": list(self.coarse),
            "kept": list(self.kept),
            "method": SUGGEST_METHOD,
        }


SUGGEST_METHOD = (
    "Per group (of one attribute, or of the intersection: its combinations with rows), up to 2,000 candidate "
    "thresholds (the group's distinct scores, evenly thinned); for each candidate its TPR and its correct "
    "predictions from the sorted scores. For every level r among the candidates' TPRs (up to 2,000, evenly "
    "thinned), each group takes its most accurate candidate whose TPR lies in [r, r + tolerance]; the level with "
    "the most correct predictions overall wins. Every pair of groups is then within the tolerance (max - min "
    "TPR), and among the candidates this is the most accurate such choice when nothing was thinned. "
    "Deterministic: one threshold per group, no randomising. A group with fewer than 1/tolerance positives has a "
    "TPR that moves in steps wider than the tolerance, so it limits the levels every group can share."
)


def _tpr_gap(tprs: Sequence[float | None]) -> float | None:
    known = [value for value in tprs if value is not None]
    return max(known) - min(known) if len(known) > 1 else None


def suggest(prepared: Prepared, *, attribute: str | None = None, tolerance: float | None = None) -> Suggestion:
    """Per group of ``attribute`` (default: the first; the intersection's key for its combinations),
    the thresholds that bring the TPR gap within ``tolerance`` (default: the spec's, the policy's) with
    the most correct predictions (the method: SUGGEST_METHOD). Rows of an unknown group, and groups
    without label positives, keep the global threshold; an intersection's combinations without rows
    are not groups (as in the audit document)."""
    key = attribute or prepared.attributes[0][0]
    delta = prepared.spec.tolerance if tolerance is None else tolerance
    start = Thresholds(threshold=cast(float, prepared.spec.threshold))
    base_cells = counts_at(prepared, start)
    total_rows = int(base_cells.sum())
    correct_before = int(base_cells[:, 0].sum() + base_cells[:, 3].sum())

    per_group = _group_scores(prepared, key)
    groups = [group for group in prepared.groups_of(key) if sum(map(len, per_group[group]))]
    fixed_correct = correct_before
    options: list[tuple[str, Floats, Floats, npt.NDArray[np.int64]]] = []  # group, thresholds, tpr, correct
    tprs_before: dict[str, float | None] = {}
    for group in groups:
        negatives, positives = per_group[group]
        at_start = _correct(negatives, positives, np.array([start.threshold]))
        tprs_before[group] = float(at_start[1][0]) if len(positives) else None
        if not len(positives):
            continue
        fixed_correct -= int(at_start[0][0])
        candidates = _candidates(negatives, positives, start.threshold)
        correct, tpr = _correct(negatives, positives, candidates)
        order = np.argsort(tpr, kind="stable")
        options.append((group, candidates[order], tpr[order], correct[order]))
    chosen = _best_level(options, delta=delta, fixed_correct=fixed_correct)
    thresholds = Thresholds(threshold=start.threshold, attribute=key, groups=chosen)
    after_cells = counts_at(prepared, thresholds)
    correct_after = int(after_cells[:, 0].sum() + after_cells[:, 3].sum())
    tprs_after = {
        group: (float(_correct(*per_group[group], np.array([chosen.get(group, start.threshold)]))[1][0]))
        if len(per_group[group][1])
        else None
        for group in groups
    }
    gap_after = _tpr_gap(list(tprs_after.values()))
    return Suggestion(
        attribute=key,
        thresholds=thresholds,
        tolerance=delta,
        gap_before=_tpr_gap(list(tprs_before.values())),
        gap_after=gap_after,
        accuracy_before=correct_before / total_rows,
        accuracy_after=correct_after / total_rows,
        reached=bool(chosen) and gap_after is not None and gap_after <= delta + 1e-9,
        tpr=tprs_after,
        coarse=tuple(group for group in groups if 0 < len(per_group[group][1]) < 1 / max(delta, 1e-300)),
        kept=tuple(group for group in groups if not len(per_group[group][1])),
    )


def _best_level(
    options: Sequence[tuple[str, Floats, Floats, npt.NDArray[np.int64]]], *, delta: float, fixed_correct: int
) -> dict[str, float]:
    """The search over levels, all levels at once: per group (its candidates sorted by TPR), each level's
    window [r, r + delta] of candidates and its most accurate one (the first among equals) by a range
    maximum (:func:`_window_best`). The level with the most correct predictions wins (the first among
    equals); a level where some group has no candidate in its window is out. {} when none is in."""
    if not options:
        return {}
    levels = np.unique(np.concatenate([tpr for _, _, tpr, _ in options]))
    if len(levels) > SUGGEST_LEVELS:
        levels = levels[np.linspace(0, len(levels) - 1, SUGGEST_LEVELS).round().astype(int)]
    totals = np.full(len(levels), fixed_correct, np.int64)
    feasible = np.ones(len(levels), bool)
    picked: list[npt.NDArray[np.intp]] = []
    for _, _, tpr, correct in options:
        low = np.searchsorted(tpr, levels, "left")
        high = np.searchsorted(tpr, levels + delta + 1e-12, "right")
        inside = low < high
        feasible &= inside
        index = _window_best(correct, low, np.where(inside, high, low + 1))
        totals += np.where(inside, correct[np.minimum(index, len(correct) - 1)], 0)
        picked.append(index)
    if not feasible.any():
        return {}
    best = int(np.argmax(np.where(feasible, totals, -1)))
    return {
        group: float(candidates[index[best]]) for (group, candidates, _, _), index in zip(options, picked, strict=True)
    }


def _window_best(values: npt.NDArray[np.int64], low: npt.NDArray[np.intp], high: npt.NDArray[np.intp]) -> Any:
    """Per window [low, high) of ``values`` (non-empty; high may pass the end by one where the window is
    not used), the index of its largest value, the first among equals: a sparse table of the leftmost
    maximum over every power-of-two window, two lookups per query."""
    n = len(values)
    high = np.minimum(high, n)
    low = np.minimum(low, high - 1)
    table = [np.arange(n)]
    width = 1
    while 2 * width <= n:
        previous = table[-1]
        left, right = previous[: n - 2 * width + 1], previous[width : n - width + 1]
        table.append(np.where(values[left] >= values[right], left, right))
        width *= 2
    length = high - low
    power = np.floor(np.log2(np.maximum(length, 1))).astype(int)
    result = np.empty(len(low), np.intp)
    for k in np.unique(power).tolist():
        rows = power == k
        left = table[k][low[rows]]
        right = table[k][high[rows] - (1 << k)]
        result[rows] = np.where(values[left] >= values[right], left, right)
    return result


def _group_scores(prepared: Prepared, key: str) -> dict[str, tuple[Floats, Floats]]:
    """Per group of ``key``: its negatives' and positives' scores, each sorted."""
    shape = prepared.shape
    axes = np.unravel_index(np.arange(math.prod(shape)), shape)
    names = [name for name, _ in prepared.attributes]
    groups = prepared.groups_of(key)
    if key in names:
        index = names.index(key)
        position_of_cell = axes[index] - 1  # -1: unknown
    else:
        # The intersection's groups are the combinations with rows, in the order of the flat index.
        known = np.all([axis > 0 for axis in axes], axis=0)
        sizes = [len(g) for _, g in prepared.attributes]
        lookup = {name: position for position, name in enumerate(groups)}
        position_of_cell = np.full(len(known), -1)
        for cell in np.flatnonzero(known).tolist():
            flat = int(np.ravel_multi_index([int(axis[cell]) - 1 for axis in axes], sizes))
            position_of_cell[cell] = lookup.get(group_key(_values(prepared, flat)), -1)
    result: dict[str, tuple[Floats, Floats]] = {}
    offsets, scores = prepared.offsets, prepared.scores
    for position, group in enumerate(groups):
        cells = np.flatnonzero(position_of_cell == position)
        parts = []
        for label in (0, 1):
            pieces = [np.asarray(scores[offsets[2 * c + label] : offsets[2 * c + label + 1]]) for c in cells]
            parts.append(np.sort(np.concatenate(pieces)) if pieces else np.empty(0))
        result[group] = (parts[0], parts[1])
    return result


def _values(prepared: Prepared, flat: int) -> tuple[str, ...]:
    sizes = [len(groups) for _, groups in prepared.attributes]
    positions = np.unravel_index(flat, sizes)
    return tuple(groups[int(p)] for (_, groups), p in zip(prepared.attributes, positions, strict=True))


def _candidates(negatives: Floats, positives: Floats, current: float) -> Floats:
    distinct = np.unique(np.concatenate([negatives, positives]))
    if len(distinct) > SUGGEST_CANDIDATES:
        distinct = distinct[np.linspace(0, len(distinct) - 1, SUGGEST_CANDIDATES).round().astype(int)]
    # Above every score: nobody predicted positive.
    top = np.nextafter(distinct[-1], np.inf) if len(distinct) else current
    return cast(Floats, np.unique(np.concatenate([distinct, [current, top]])))


def _correct(negatives: Floats, positives: Floats, thresholds: Floats) -> tuple[npt.NDArray[np.int64], Floats]:
    """At each threshold: the group's correct predictions, and its TPR."""
    tn = np.searchsorted(negatives, thresholds, "left")
    tp = len(positives) - np.searchsorted(positives, thresholds, "left")
    tpr = tp / len(positives) if len(positives) else np.full(len(thresholds), np.nan)
    return (tp + tn).astype(np.int64), cast(Floats, tpr)


__all__ = [
    "MAX_CELLS",
    "Prepared",
    "Suggestion",
    "ThresholdError",
    "Thresholds",
    "answer_at",
    "check_thresholds",
    "counted_at",
    "counts_at",
    "document_at",
    "override_field",
    "prepare",
    "save_scores",
    "suggest",
    "thresholds_from_query",
]
