"""Registration's checks on the label and the sensitive attributes: the positive value, unknown
tokens, groups, and each row's codes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from auditportal.fairness.files.tabular.encode import (
    ENCODE_THREADS,
    INTEGRAL_FLOAT_LIMIT,
    arrow_numbers,
    arrow_scalar,
    arrow_texts,
    encode,
    first_row,
    index_of,
    is_numeric,
    numpy_view,
    pylist,
    to_numpy,
    unusable_type,
    values_seen,
)
from auditportal.fairness.files.tabular.errors import DatasetError, quote
from auditportal.fairness.files.tabular.read import (
    Loaded,
    RawColumns,
    check_columns_present,
    read_columns,
    repeated_names,
)
from auditportal.fairness.files.tabular.spec import (
    ATTRIBUTE_PREFIX,
    LONGEST_ATTRIBUTE_METRIC,
    LONGEST_GROUP_METRIC,
    MAX_STORED_NAME,
    TARGET_COLUMN,
    AttributeInfo,
    Codes,
    DatasetSpec,
    FeatureInfo,
    FileFormat,
    attribute_metric_length,
    group_metric_length,
    metric_part,
)


@dataclass(frozen=True)
class LabelledColumns:
    """The label and sensitive attributes of a file, normalised as for registration, plus raw columns."""

    file_format: FileFormat
    num_rows: int
    columns: tuple[str, ...]  # every column in the file
    target: npt.NDArray[np.int8]  # per row: 1 = the positive label value
    attributes: tuple[AttributeInfo, ...]
    codes: tuple[Codes, ...]  # per attribute, per row: index into its groups, -1 = unknown
    others: dict[str, pa.ChunkedArray[Any]]  # the other requested columns, as read
    sha256: str
    size_bytes: int


def decode_labelled(
    raw: RawColumns, spec: DatasetSpec, *, others: Sequence[tuple[str, str]], display_name: str
) -> LabelledColumns:
    """Registration's checks and messages for the label and the attributes, and their per-row codes.

    ``spec.features`` is not used; the ``others`` columns are returned as read.
    """
    table = raw.table
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="labelled") as pool:
        # The columns are decoded side by side (pyarrow and numpy release the GIL); results are
        # taken in declaration order, so the first bad column is still the one reported.
        target_job = pool.submit(_target, table.column(spec.label), spec, display_name)
        attribute_jobs = [
            pool.submit(_attribute, table.column(name), name, spec, display_name) for name in spec.attributes
        ]
        target = target_job.result()
        attributes = [job.result() for job in attribute_jobs]
    return LabelledColumns(
        file_format=raw.file_format,
        num_rows=table.num_rows,
        columns=raw.columns,
        target=target,
        attributes=tuple(attribute.info for attribute in attributes),
        codes=tuple(attribute.codes for attribute in attributes),
        others={name: table.column(name) for name, _ in others},
        sha256=raw.sha256,
        size_bytes=raw.size_bytes,
    )


def read_labelled_columns(
    path: Path, spec: DatasetSpec, *, others: Sequence[tuple[str, str]], display_name: str, max_bytes: int
) -> LabelledColumns:
    """:func:`read_columns`, then :func:`decode_labelled`."""
    raw = read_columns(path, spec, others=others, display_name=display_name, max_bytes=max_bytes)
    return decode_labelled(raw, spec, others=others, display_name=display_name)


@dataclass(frozen=True)
class AttributeCodes:
    info: AttributeInfo
    codes: Codes  # per row: index into info.groups, -1 = unknown


@dataclass(frozen=True)
class Prepared:
    num_rows: int
    target: npt.NDArray[np.int8]
    positives: int
    features: tuple[FeatureInfo, ...]
    attributes: tuple[AttributeCodes, ...]


def prepare(loaded: Loaded, spec: DatasetSpec, display_name: str) -> Prepared:
    _check_declared_columns(loaded.columns, spec, display_name, loaded.repeats)
    features = _feature_infos(loaded, spec, display_name)
    table = loaded.table
    # pyarrow's hashing kernels are single-threaded per column and release the GIL, so the label
    # and the attributes are encoded side by side.
    with ThreadPoolExecutor(max_workers=ENCODE_THREADS, thread_name_prefix="encode") as pool:
        label_job = pool.submit(_target, table.column(spec.label), spec, display_name)
        attribute_jobs = [
            pool.submit(_attribute, table.column(name), name, spec, display_name) for name in spec.attributes
        ]
        target = label_job.result()
        attributes = tuple(job.result() for job in attribute_jobs)
    return Prepared(
        num_rows=table.num_rows,
        target=target,
        positives=int(np.count_nonzero(target)),
        features=features,
        attributes=attributes,
    )


def _check_declared_columns(
    columns: Sequence[str], spec: DatasetSpec, display_name: str, repeats: Mapping[str, int | None]
) -> None:
    declared = [(spec.label, "label")]
    declared += [(name, "sensitive attribute") for name in spec.attributes]
    declared += [(name, "feature") for name in spec.features or ()]
    check_columns_present(columns, declared, display_name, repeats=repeats)


def _feature_infos(loaded: Loaded, spec: DatasetSpec, display_name: str) -> tuple[FeatureInfo, ...]:
    if spec.features is None:
        # The default leaves every repeated name out (with the warning of read.repeated_columns_warnings),
        # so that only a declared one costs the comparison of its columns; declared, it is used when
        # its columns hold the same values in every row and refused when they differ.
        taken = {spec.label, *spec.attributes, *repeated_names(loaded.columns)}
        names: Iterable[str] = [name for name in loaded.columns if name not in taken]
    else:
        names = spec.features
    infos = []
    for name in names:
        if name == TARGET_COLUMN or name.startswith(ATTRIBUTE_PREFIX):
            raise DatasetError(
                f"the column name {quote(name)} is reserved for the portal's own columns; rename it "
                "or leave it out of the features",
                file=display_name,
                column=name,
            )
        kind = loaded.schema.field(name).type
        value_type = kind.value_type if pa.types.is_dictionary(kind) else kind
        if pa.types.is_nested(value_type):
            raise unusable_type(kind, display_name, name)
        infos.append(FeatureInfo(name, "numeric" if is_numeric(kind) else "categorical"))
    return tuple(infos)


def integer_label(column: pa.ChunkedArray[Any], positive: str) -> tuple[int, int] | None:
    """``(lowest value, positive value)`` of a complete integer label of at most two consecutive
    values, one of them the positive value (the common 0/1 case); None for any other label.

    Such a label needs none of the full checks, so it can be used without hashing every row.
    """
    if not pa.types.is_integer(column.type) or column.null_count or len(column) == 0:
        return None
    try:
        number = float(positive.strip())
    except ValueError:
        return None
    if not number.is_integer():
        return None
    extremes = pc.min_max(column)
    low, high = extremes["min"].as_py(), extremes["max"].as_py()
    if high - low > 1 or not low <= number <= high:
        return None
    return int(low), int(number)


def _integer_target(column: pa.ChunkedArray[Any], positive: str) -> npt.NDArray[np.int8] | None:
    """The common case (a complete 0/1 integer label) without hashing every row; None otherwise."""
    bounds = integer_label(column, positive)
    if bounds is None:
        return None
    equal = cast("pa.ChunkedArray[Any]", pc.equal(column, arrow_scalar(bounds[1], column.type)))
    flags = cast("pa.Array[Any]", equal.combine_chunks().cast(pa.int8()))
    return cast(npt.NDArray[np.int8], numpy_view(flags).copy())


def _target(column: pa.ChunkedArray[Any], spec: DatasetSpec, display_name: str) -> npt.NDArray[np.int8]:
    fast = _integer_target(column, spec.positive)
    if fast is not None:
        if not 0 < np.count_nonzero(fast) < len(fast):
            raise single_value_label(column, spec, display_name)
        return fast
    name = spec.label
    coded = encode(column, display_name, name)
    missing_text = np.zeros(len(coded.texts), bool)
    empty = index_of(coded.texts, "")
    if empty is not None:
        missing_text[empty] = True
    # Cheap test on the dictionary first; the per-row search only runs when a row is missing.
    if column.null_count or coded.per_entry(missing_text, True)[:-1].any():
        raise DatasetError(
            "the label is missing; every row needs a label value",
            file=display_name,
            row=first_row(coded.per_row(missing_text, True)),
            column=name,
        )
    positive = _match_positive(spec.positive, coded.texts, column.type)
    if len(coded.texts) == 1:
        raise single_value_label(column, spec, display_name, coded.texts)
    if len(coded.texts) > 2:
        codes = coded.codes()
        keep = _intended_pair(codes, coded.texts, positive)
        row = first_row(~np.isin(codes, keep))
        value = coded.texts[int(codes[row - 1])].as_py()
        raise DatasetError(
            f"value {quote(value)} makes the label non-binary (values seen: "
            f"{values_seen(coded.texts)}); the label must have exactly two values",
            file=display_name,
            row=row,
            column=name,
        )
    if positive is None:
        raise DatasetError(
            f"the positive value {quote(spec.positive.strip())} does not occur in the label (values "
            f"seen: {values_seen(coded.texts)}); choose one of these",
            file=display_name,
            column=name,
        )
    is_positive = np.zeros(len(coded.texts), np.int8)
    is_positive[positive] = 1
    target: npt.NDArray[np.int8] = coded.per_row(is_positive, 0)
    return target


def single_value_label(
    column: pa.ChunkedArray[Any], spec: DatasetSpec, display_name: str, texts: pa.Array[Any] | None = None
) -> DatasetError:
    """The error for a label whose every row has the same value (the caller has checked that)."""
    if texts is None:
        texts = encode(column, display_name, spec.label).texts
    value = pylist(texts)[0]
    positive = _match_positive(spec.positive, texts, column.type) is not None
    missing = (
        "negatives (rows with another value)"
        if positive
        else f"positives (the positive value is {quote(spec.positive.strip())})"
    )
    return DatasetError(
        f"the label has a single value, {quote(value)}, in all {len(column):,} rows: there are no {missing}, "
        "and a fairness comparison needs rows of both outcomes; check the label column and the positive value",
        file=display_name,
        column=spec.label,
    )


_PARTNERS = {"1": "0", "0": "1", "true": "false", "false": "true", "yes": "no", "no": "yes", "y": "n", "n": "y"}


def _intended_pair(codes: Codes, texts: pa.Array[Any], positive: int | None) -> list[int]:
    """The two label values the user most likely meant, so an error can name the stray one."""
    counts = np.bincount(codes, minlength=len(texts))
    keep: list[int] = [] if positive is None else [positive]
    if positive is not None:
        partner = _PARTNERS.get(str(texts[positive].as_py()).lower())
        matches = [i for i, text in enumerate(pylist(texts)) if text.lower() == partner] if partner else []
        if matches:
            return [positive, max(matches, key=lambda i: int(counts[i]))]
    for code in np.argsort(-counts, kind="stable"):
        if len(keep) == 2:
            break
        if int(code) not in keep:
            keep.append(int(code))
    return keep


def _match_positive(positive: str, texts: pa.Array[Any], kind: pa.DataType) -> int | None:
    wanted = positive.strip()
    candidates = [wanted]
    # Render the user's text as the column's values are rendered: "1.0" finds a float column's 1,
    # "True" finds a boolean column's true.
    try:
        number = float(wanted)
    except ValueError:
        pass
    else:
        if number.is_integer() and abs(number) < INTEGRAL_FLOAT_LIMIT:
            candidates.append(str(int(number)))
    if pa.types.is_boolean(kind):
        candidates.append(wanted.lower())
    for candidate in candidates:
        index = index_of(texts, candidate)
        if index is not None:
            return index
    return None


def _attribute(column: pa.ChunkedArray[Any], name: str, spec: DatasetSpec, display_name: str) -> AttributeCodes:
    coded = encode(column, display_name, name)
    groups, group_of_text = attribute_groups(coded.texts, name, spec, display_name)
    codes = coded.per_row(group_of_text, -1)
    unknown_count = int(np.count_nonzero(codes < 0))
    return AttributeCodes(AttributeInfo(name, groups, unknown_count), codes)


def attribute_groups(
    texts: pa.Array[Any], name: str, spec: DatasetSpec, display_name: str
) -> tuple[tuple[str, ...], Codes]:
    """An attribute's known groups (sorted), and each distinct text's group index (-1 = unknown)."""
    tokens = arrow_texts(sorted({token.strip().lower() for token in spec.unknown_tokens}))
    unknown_values = pc.is_in(pc.utf8_lower(texts), value_set=tokens)
    unknown = to_numpy(unknown_values).astype(bool)
    known = np.flatnonzero(~unknown)
    if not len(known):
        seen = f" (values seen: {values_seen(texts)})" if len(texts) else " (every value is empty)"
        raise DatasetError(
            f"every value of the sensitive attribute is unknown{seen}, so it has no group to compare; "
            "declare another column, or change the values that mean unknown",
            file=display_name,
            column=name,
        )
    if len(known) > spec.max_groups:
        raise DatasetError(
            f"the sensitive attribute has {len(known)} known groups, more than the limit of "
            f"{spec.max_groups}; choose a coarser column or bucket its values (e.g. age into "
            "age groups)",
            file=display_name,
            column=name,
        )
    known_texts = texts.take(arrow_numbers(known))
    order = to_numpy(pc.array_sort_indices(known_texts))
    groups = tuple(pylist(known_texts.take(arrow_numbers(order))))
    group_of_text = np.full(len(texts), -1, np.int32)
    group_of_text[known[order]] = np.arange(len(known), dtype=np.int32)
    return groups, group_of_text


def check_stored_lengths(spec: DatasetSpec, attributes: Sequence[AttributeCodes], display_name: str) -> None:
    """Registration's check that every name it stores, and every metric name the trainer will
    report, fits the database (spec.MAX_STORED_NAME): otherwise PostgreSQL refuses the row, at
    registration or, worse, at every metric insert of every experiment on the dataset."""
    limit = MAX_STORED_NAME

    def too_long(what: str, length: int, **where: Any) -> DatasetError:
        return DatasetError(
            f"{what} is {length} characters long, more than the {limit} the database stores; shorten it",
            file=display_name,
            **where,
        )

    if len(spec.label) > limit:
        raise too_long("the label column's name", len(spec.label), column=spec.label)
    if len(spec.positive.strip()) > limit:
        raise too_long("the positive label value", len(spec.positive.strip()), column=spec.label)
    for attribute in attributes:
        name = attribute.info.name
        if len(name) > limit or attribute_metric_length((name,)) > limit:
            room = limit - (attribute_metric_length(("",)))
            raise DatasetError(
                f"the sensitive attribute's name is {len(name)} characters long; in the trainer's metric names "
                f"(such as {quote(LONGEST_ATTRIBUTE_METRIC)}) it may have at most {room}, to fit the "
                f"{limit} characters the database stores; rename the column",
                file=display_name,
                column=name,
            )
        for index, group in enumerate(attribute.info.groups):
            length = group_metric_length((name,), (group,))
            if length > limit:
                room = limit - group_metric_length((name,), ("",))
                raise DatasetError(
                    f"the value {quote(group)} is {len(group)} characters long; as a group of this attribute "
                    f"it may have at most {room} ('/', '%' and '&' count three; the trainer's metric names, such as "
                    f"{quote(LONGEST_GROUP_METRIC)}, must fit the {limit} characters the database stores); "
                    "shorten or recode the value",
                    file=display_name,
                    row=first_row(attribute.codes == index),
                    column=name,
                )
    if len(attributes) >= 2:
        # The trainer and the group summaries intersect the first two attributes (every combination).
        first, second = attributes[0].info, attributes[1].info
        longest = [max(info.groups, key=lambda g: len(metric_part((g,))), default="") for info in (first, second)]
        length = group_metric_length((first.name, second.name), longest)
        if length > limit:
            fault = first if len(metric_part((longest[0],))) >= len(metric_part((longest[1],))) else second
            raise DatasetError(
                f"the intersection of {quote(first.name)} and {quote(second.name)} makes metric names of up to "
                f"{length} characters (group {quote(longest[0])} with {quote(longest[1])}), more than the "
                f"{limit} the database stores; shorten or recode the longest values, or declare these "
                "attributes in another order (the first two are intersected)",
                file=display_name,
                column=fault.name,
            )
