"""Summaries of a file: every column's values (for the declare step), the per-group counts of a
checked file (registration), and the normalised table the shard writer reads."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from auditportal.fairness.files.intersections import attribute_key, group_key
from auditportal.fairness.files.tabular.encode import as_float64, encode, pylist, render
from auditportal.fairness.files.tabular.read import (
    NO_LIMITS,
    ReadLimits,
    check_size,
    file_format_of,
    load,
    merge_repeats,
    repeated_names,
    sha256_of,
)
from auditportal.fairness.files.tabular.spec import (
    ATTRIBUTE_PREFIX,
    TARGET_COLUMN,
    AttributeInfo,
    Codes,
    DatasetSpec,
    FeatureInfo,
    FileFormat,
    check_spec,
    needed_columns,
)
from auditportal.fairness.files.tabular.validate import AttributeCodes, Prepared, check_stored_lengths, prepare


@dataclass(frozen=True)
class GroupStat:
    columns: tuple[str, ...]  # the attribute, or the intersected attributes
    values: tuple[str, ...] | None  # the group's value in each of ``columns``; None: the unknown bucket
    rows: int
    positives: int
    negatives: int
    share: float

    @property
    def attribute(self) -> str:
        return attribute_key(self.columns)

    @property
    def group(self) -> str | None:
        return None if self.values is None else group_key(self.values)

    @property
    def is_intersection(self) -> bool:
        return len(self.columns) > 1


@dataclass(frozen=True)
class Inspection:
    file_format: FileFormat
    num_rows: int
    columns: tuple[str, ...]
    positives: int
    negatives: int
    features: tuple[FeatureInfo, ...]
    attributes: tuple[AttributeInfo, ...]
    groups: tuple[GroupStat, ...]
    sha256: str
    size_bytes: int


@dataclass(frozen=True)
class ColumnProfile:
    name: str
    dtype: str
    distinct: int
    values: tuple[tuple[str, int], ...] | None
    nulls: int


@dataclass(frozen=True)
class Profile:
    file_format: FileFormat
    num_rows: int
    columns: tuple[ColumnProfile, ...]
    # The repeated names whose columns hold the same values in every row: each is one column,
    # offered for every role (the others are offered for none).
    identical: tuple[str, ...] = ()


def profile_file(
    path: Path, *, display_name: str, max_bytes: int, max_values: int = 50, limits: ReadLimits = NO_LIMITS
) -> Profile:
    file_format = file_format_of(path, display_name)
    check_size(path, display_name, max_bytes)
    loaded = load(path, file_format, display_name, columns=None, limits=limits)
    profiles = []
    # By position: a repeated column name is profiled once per column (table.column(name) would refuse it).
    for name, column in zip(loaded.table.column_names, loaded.table.columns, strict=True):
        coded = encode(column, display_name, name)
        codes = coded.codes()
        counts = np.bincount(codes[codes >= 0], minlength=len(coded.texts))
        values: tuple[tuple[str, int], ...] | None = None
        if len(coded.texts) <= max_values:
            texts = pylist(coded.texts)
            values = tuple(sorted(zip(texts, (int(c) for c in counts), strict=True)))
        profiles.append(
            ColumnProfile(
                name=name,
                dtype=str(column.type),
                distinct=len(coded.texts),
                values=values,
                nulls=int(np.count_nonzero(codes < 0)),
            )
        )
    repeated = repeated_names(loaded.table.column_names)
    identical = tuple(name for name in repeated if merge_repeats(loaded, [name]).repeats[name] is None)
    return Profile(
        file_format=file_format, num_rows=loaded.table.num_rows, columns=tuple(profiles), identical=identical
    )


def inspect_file(
    path: Path, spec: DatasetSpec, *, display_name: str, max_bytes: int, limits: ReadLimits = NO_LIMITS
) -> Inspection:
    file_format = file_format_of(path, display_name)
    check_spec(spec, display_name)
    size = check_size(path, display_name, max_bytes)
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sha256") as pool:
        try:
            # Feature kinds come from the schema, so a Parquet file's feature data is never read here;
            # a CSV file is parsed whole regardless, which is what checks every row and column.
            loaded = load(
                path,
                file_format,
                display_name,
                columns=[spec.label, *spec.attributes],
                limits=limits,
                used=[spec.label, *spec.attributes, *(spec.features or ())],
            )
            # Hashed beside the (mostly single-threaded) normalisation rather than the parse, which
            # already keeps every core busy: measured, a third thread there cost more than the hash.
            digest = pool.submit(sha256_of, path, stop)
            prepared = prepare(loaded, spec, display_name)
            check_stored_lengths(spec, prepared.attributes, display_name)
        except BaseException:
            stop.set()
            raise
        sha256 = digest.result()
    return Inspection(
        file_format=file_format,
        num_rows=prepared.num_rows,
        columns=loaded.columns,
        positives=prepared.positives,
        negatives=prepared.num_rows - prepared.positives,
        features=prepared.features,
        attributes=tuple(a.info for a in prepared.attributes),
        groups=_group_stats(prepared),
        sha256=sha256,
        size_bytes=size,
    )


def load_normalized_hashed(path: Path, spec: DatasetSpec, *, display_name: str) -> tuple[pa.Table, str]:
    """``load_normalized`` and the file's SHA-256, hashed beside the read (the shard manifest's hash)."""
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sha256") as pool:
        digest = pool.submit(sha256_of, path, stop)
        try:
            table = load_normalized(path, spec, display_name=display_name)
        except BaseException:
            stop.set()
            raise
        return table, digest.result()


def load_normalized(path: Path, spec: DatasetSpec, *, display_name: str) -> pa.Table:
    file_format = file_format_of(path, display_name)
    check_spec(spec, display_name)
    loaded = load(
        path,
        file_format,
        display_name,
        columns=needed_columns(spec),
        used=[spec.label, *spec.attributes, *(spec.features or ())],
    )
    prepared = prepare(loaded, spec, display_name)
    arrays: list[pa.Array[Any] | pa.ChunkedArray[Any]] = []
    names: list[str] = []
    for feature in prepared.features:
        column = loaded.table.column(feature.name)
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        if feature.kind == "numeric":
            arrays.append(as_float64(column))
        else:
            arrays.append(pa.chunked_array([render(chunk) for chunk in column.chunks], pa.string()))
        names.append(feature.name)
    arrays.append(pa.array(prepared.target, pa.int8()))
    names.append(TARGET_COLUMN)
    for attribute in prepared.attributes:
        groups = pa.array(attribute.info.groups, pa.string())
        indices = pa.array(attribute.codes, type=pa.int32(), mask=attribute.codes < 0)
        arrays.append(groups.take(indices))
        names.append(ATTRIBUTE_PREFIX + attribute.info.name)
    return pa.table(arrays, names=names)


def _group_stats(prepared: Prepared) -> tuple[GroupStat, ...]:
    total = prepared.num_rows
    stats: list[GroupStat] = []

    def add(columns: tuple[str, ...], values: tuple[str, ...] | None, counts: npt.NDArray[np.int64]) -> None:
        negatives, positives = int(counts[0]), int(counts[1])
        rows = negatives + positives
        stats.append(GroupStat(columns, values, rows, positives, negatives, rows / total))

    def add_attribute(attribute: AttributeCodes, counts: npt.NDArray[np.int64]) -> None:
        columns = (attribute.info.name,)
        for index, group in enumerate(attribute.info.groups, start=1):
            add(columns, (group,), counts[index])
        add(columns, None, counts[0])

    attributes = prepared.attributes
    # Index 0 of every axis is the unknown bucket and the last axis is the target, so a single
    # bincount yields rows and positives of every cell; the first two attributes share one pass
    # whose marginals are their own tables.
    if len(attributes) >= 2:
        first, second = attributes[:2]
        shape = (len(first.info.groups) + 1, len(second.info.groups) + 1, 2)
        joint = _count_cells([first.codes, second.codes], prepared.target, shape)
        add_attribute(first, joint.sum(axis=1))
        add_attribute(second, joint.sum(axis=0))
        rest = attributes[2:]
    else:
        joint = None
        rest = attributes
    for attribute in rest:
        add_attribute(attribute, _count_cells([attribute.codes], prepared.target, (len(attribute.info.groups) + 1, 2)))
    if joint is not None:
        first, second = attributes[:2]
        columns = (first.info.name, second.info.name)
        # Every combination is listed, empty ones with 0 rows: an empty intersection is itself a
        # finding for a bias audit.
        for i, group_a in enumerate(first.info.groups, start=1):
            for j, group_b in enumerate(second.info.groups, start=1):
                add(columns, (group_a, group_b), joint[i, j])
        add(columns, None, joint.sum(axis=(0, 1)) - joint[1:, 1:].sum(axis=(0, 1)))
    return tuple(stats)


def _count_cells(codes: Sequence[Codes], target: npt.NDArray[np.int8], shape: tuple[int, ...]) -> npt.NDArray[np.int64]:
    key = codes[0].astype(np.intp)  # in place from here on: no temporaries of the row count
    key += 1
    for more, size in zip(codes[1:], shape[1:-1], strict=True):
        key *= size
        key += more
        key += 1
    key *= 2
    key += target
    counts: npt.NDArray[np.int64] = np.bincount(key, minlength=int(np.prod(shape)))
    return counts.reshape(shape)
