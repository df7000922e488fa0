"""Validate a dataset file and summarise it per sensitive group.

Pure pyarrow/numpy (no Django), so the registration service, the shard writer and tests share one
implementation of parsing and normalisation. Work is vectorised: each column is dictionary-encoded
once, the few distinct values are rendered and classified, and the per-row work is integer codes
counted with ``numpy.bincount``.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import difflib
import hashlib
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from auditportal.fairness.errors import UserError
from auditportal.lib.env import human_size

DEFAULT_UNKNOWN_TOKENS: tuple[str, ...] = ("", "nan", "-1", "unknown")
SUPPORTED_SUFFIXES = (".csv", ".parquet", ".pq")
MAX_FILE_NAME_LENGTH = 200
TARGET_COLUMN = "_target"
ATTRIBUTE_PREFIX = "_attr."
INTERSECTION_SEPARATOR = "&"

FileFormat = Literal["csv", "parquet"]
Codes = npt.NDArray[np.int32]

_SNIFF_BYTES = 64 * 1024
_MAX_HEADER_BYTES = 16 * 1024 * 1024
_HASH_CHUNK_BYTES = 1024 * 1024
_VALUES_SHOWN = 10
_ENCODE_THREADS = 4
# Floats whose magnitude is below this are exactly representable as int64 and render as integers.
_INTEGRAL_FLOAT_LIMIT = 1e15


class DatasetError(UserError):
    """A problem with the file the user must fix; str() is the full user-facing message.

    ``field`` is the column at fault (None for the whole file)."""

    def __init__(self, message: str, *, file: str, row: int | None = None, column: str | None = None) -> None:
        self.file = file
        self.row = row
        self.column = column
        super().__init__(message, field=column)
        self.args = (str(self),)

    def __str__(self) -> str:
        where = [self.file]
        if self.row is not None:
            where.append(f"row {self.row}")
        if self.column is not None:
            where.append(f"column {_q(self.column)}")
        return f"{', '.join(where)}: {self.message}"

    # Keyword-only arguments break the default exception pickling that Celery relies on.
    def __reduce__(self) -> tuple[object, tuple[str, str, int | None, str | None]]:
        return (_rebuild_dataset_error, (self.message, self.file, self.row, self.column))


def _rebuild_dataset_error(message: str, file: str, row: int | None, column: str | None) -> DatasetError:
    return DatasetError(message, file=file, row=row, column=column)


@dataclass(frozen=True)
class DatasetSpec:
    label: str
    positive: str
    attributes: tuple[str, ...]
    unknown_tokens: tuple[str, ...] = DEFAULT_UNKNOWN_TOKENS
    features: tuple[str, ...] | None = None
    max_groups: int = 50


@dataclass(frozen=True)
class GroupStat:
    attribute: str
    group: str | None
    rows: int
    positives: int
    negatives: int
    share: float


@dataclass(frozen=True)
class FeatureInfo:
    name: str
    kind: Literal["numeric", "categorical"]


@dataclass(frozen=True)
class AttributeInfo:
    name: str
    groups: tuple[str, ...]
    unknown_count: int


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


# --------------------------------------------------------------------------- public entry points


def check_file_name(name: str) -> str:
    shown = _escape(name) if name else "(no file name)"

    def reject(message: str) -> DatasetError:
        return DatasetError(message, file=shown)

    if not name.strip():
        raise reject("the file name is empty; upload a file with a name such as 'credit.csv'")
    if len(name) > MAX_FILE_NAME_LENGTH:
        raise reject(
            f"the file name is {len(name)} characters long, more than the limit of "
            f"{MAX_FILE_NAME_LENGTH}; rename the file"
        )
    control = sorted({ch for ch in name if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp")})
    if control:
        listed = ", ".join(ascii(ch) for ch in control)
        raise reject(f"the file name contains control characters ({listed}); rename the file")
    if "/" in name or "\\" in name:
        raise reject(
            "the file name contains a path separator ('/' or '\\'); upload the file under a plain "
            "name such as 'credit.csv'"
        )
    if ".." in name:
        raise reject("the file name contains '..'; rename the file")
    if name.startswith("."):
        raise reject("the file name starts with a dot (a hidden file); rename the file")
    if not name.lower().endswith(SUPPORTED_SUFFIXES):
        raise reject(_unsupported_suffix_message(name))
    return name


def profile_file(path: Path, *, display_name: str, max_bytes: int, max_values: int = 50) -> Profile:
    file_format = _file_format(path, display_name)
    _check_size(path, display_name, max_bytes)
    loaded = _load(path, file_format, display_name, columns=None)
    profiles = []
    for name in loaded.table.column_names:
        column = loaded.table.column(name)
        coded = _encode(column, display_name, name)
        codes = coded.codes()
        counts = np.bincount(codes[codes >= 0], minlength=len(coded.texts))
        values: tuple[tuple[str, int], ...] | None = None
        if len(coded.texts) <= max_values:
            texts = _pylist(coded.texts)
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
    return Profile(file_format=file_format, num_rows=loaded.table.num_rows, columns=tuple(profiles))


def inspect_file(path: Path, spec: DatasetSpec, *, display_name: str, max_bytes: int) -> Inspection:
    file_format = _file_format(path, display_name)
    _check_spec(spec, display_name)
    size = _check_size(path, display_name, max_bytes)
    stop = threading.Event()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sha256") as pool:
        try:
            # Feature kinds come from the schema, so a Parquet file's feature data is never read here;
            # a CSV file is parsed whole regardless, which is what checks every row and column.
            loaded = _load(path, file_format, display_name, columns=[spec.label, *spec.attributes])
            # Hashed beside the (mostly single-threaded) normalisation rather than the parse, which
            # already keeps every core busy: measured, a third thread there cost more than the hash.
            digest = pool.submit(_sha256, path, stop)
            prepared = _prepare(loaded, spec, display_name)
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


def load_normalized(path: Path, spec: DatasetSpec, *, display_name: str) -> pa.Table:
    file_format = _file_format(path, display_name)
    _check_spec(spec, display_name)
    loaded = _load(path, file_format, display_name, columns=_needed_columns(spec))
    prepared = _prepare(loaded, spec, display_name)
    arrays: list[pa.Array[Any] | pa.ChunkedArray[Any]] = []
    names: list[str] = []
    for feature in prepared.features:
        column = loaded.table.column(feature.name)
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        if feature.kind == "numeric":
            arrays.append(_as_float64(column))
        else:
            arrays.append(pa.chunked_array([_render(chunk) for chunk in column.chunks], pa.string()))
        names.append(feature.name)
    arrays.append(pa.array(prepared.target, pa.int8()))
    names.append(TARGET_COLUMN)
    for attribute in prepared.attributes:
        groups = pa.array(attribute.info.groups, pa.string())
        indices = pa.array(attribute.codes, type=pa.int32(), mask=attribute.codes < 0)
        arrays.append(groups.take(indices))
        names.append(ATTRIBUTE_PREFIX + attribute.info.name)
    return pa.table(arrays, names=names)


@dataclass(frozen=True)
class RawColumns:
    """The requested columns of a file as parsed, before any interpretation."""

    file_format: FileFormat
    table: pa.Table  # the label, the sensitive attributes and the other requested columns
    columns: tuple[str, ...]  # every column in the file
    sha256: str
    size_bytes: int
    path: Path | None = None  # to find the row of a CSV attribute's first byte that is not UTF-8


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


def read_columns(
    path: Path,
    spec: DatasetSpec,
    *,
    others: Sequence[tuple[str, str]],
    display_name: str,
    max_bytes: int,
    sha256: str | None = None,
    attributes_as_bytes: bool = False,
) -> RawColumns:
    """Parse only the label, the sensitive attributes and ``others`` ((column, role) pairs).

    Unlike registration, a CSV file's unused columns are not converted, so a large file costs only
    what is used. With ``attributes_as_bytes``, a CSV attribute that holds text comes as its bytes
    (``pa.binary()``) rather than dictionary-encoded, for a caller that codes it itself; it is not
    yet checked as UTF-8: :func:`decode_labelled`, or that caller, checks its distinct values.
    The file is hashed beside the parse: the hash is the only work that can overlap it, since
    everything after the parse needs the parsed columns. ``sha256``, when the caller already has the
    file's digest (an upload hashed as it streamed in), saves that work.
    """
    file_format = _file_format(path, display_name)
    _check_spec(spec, display_name)
    size = _check_size(path, display_name, max_bytes)
    wanted = list(dict.fromkeys([spec.label, *spec.attributes, *(name for name, _ in others)]))
    declared = [(spec.label, "label"), *((name, "sensitive attribute") for name in spec.attributes), *others]

    def parse() -> _Loaded:
        as_bytes = spec.attributes if attributes_as_bytes else ()
        loaded = _load(path, file_format, display_name, columns=wanted, csv_subset=True, as_bytes=as_bytes)
        _check_columns_present(loaded.columns, declared, display_name)
        return loaded

    if sha256 is not None:
        loaded = parse()
    else:
        stop = threading.Event()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sha256") as pool:
            digest = pool.submit(_sha256, path, stop)
            try:
                loaded = parse()
            except BaseException:
                stop.set()
                raise
            sha256 = digest.result()
    return RawColumns(file_format, loaded.table, loaded.columns, sha256, size, path)


def decode_labelled(
    raw: RawColumns, spec: DatasetSpec, *, others: Sequence[tuple[str, str]], display_name: str
) -> LabelledColumns:
    """Registration's checks and messages for the label and the attributes, and their per-row codes.

    ``spec.features`` is not used; the ``others`` columns are returned as read.
    """
    table = _as_text(raw, display_name)
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


def _as_text(raw: RawColumns, display_name: str) -> pa.Table:
    """The table with a CSV's text attributes, read as bytes, checked and typed as UTF-8 text."""
    table = raw.table
    if raw.file_format != "csv" or raw.path is None:
        return table
    for index, field in enumerate(table.schema):
        if pa.types.is_binary(field.type):
            try:
                table = table.set_column(index, field.name, table.column(index).cast(pa.string()))
            except pa.ArrowInvalid:
                raise _encoding_error(raw.path, display_name, list(raw.columns)) from None
    return table


def read_labelled_columns(
    path: Path, spec: DatasetSpec, *, others: Sequence[tuple[str, str]], display_name: str, max_bytes: int
) -> LabelledColumns:
    """:func:`read_columns`, then :func:`decode_labelled`."""
    raw = read_columns(path, spec, others=others, display_name=display_name, max_bytes=max_bytes)
    return decode_labelled(raw, spec, others=others, display_name=display_name)


# --------------------------------------------------------------------------- file checks


def _file_format(path: Path, display_name: str) -> FileFormat:
    # The user's name decides; the storage path is a fallback for callers that pass a bare label.
    for candidate in (display_name, path.name):
        suffix = candidate.lower().rsplit(".", 1)[-1] if "." in candidate else ""
        if suffix == "csv":
            return "csv"
        if suffix in ("parquet", "pq"):
            return "parquet"
    raise DatasetError(_unsupported_suffix_message(display_name), file=display_name)


def _unsupported_suffix_message(name: str) -> str:
    suffix = "." + name.rsplit(".", 1)[-1] if "." in name else ""
    what = f"unsupported file type {_q(suffix)}" if suffix else "the file name has no extension"
    return f"{what}; upload a .csv file (comma-separated, UTF-8) or a .parquet file"


def _check_size(path: Path, display_name: str, max_bytes: int) -> int:
    size = path.stat().st_size
    if size > max_bytes:
        raise DatasetError(
            f"the file is {human_size(size)}, over the limit of {human_size(max_bytes)}; "
            "upload a smaller file (Parquet is usually several times smaller than CSV)",
            file=display_name,
        )
    return size


def _check_spec(spec: DatasetSpec, display_name: str) -> None:
    def reject(message: str, column: str | None = None) -> DatasetError:
        return DatasetError(message, file=display_name, column=column)

    if not spec.attributes:
        raise reject("declare at least one sensitive attribute (e.g. gender, race, age group)")
    for kind, names in (("sensitive attribute", spec.attributes), ("feature", spec.features or ())):
        for name, count in Counter(names).items():
            if count > 1:
                raise reject(f"{_q(name)} is declared {count} times as a {kind}", name)
    if spec.label in spec.attributes:
        raise reject(
            f"{_q(spec.label)} is declared as both the label and a sensitive attribute; "
            "the label must be a separate column",
            spec.label,
        )
    if spec.features is not None and spec.label in spec.features:
        raise reject(
            f"{_q(spec.label)} is declared as both the label and a feature; a model must not be "
            "trained on its own label",
            spec.label,
        )
    if spec.max_groups < 1:
        raise reject(f"the group limit must be at least 1, not {spec.max_groups}")


def _needed_columns(spec: DatasetSpec) -> list[str] | None:
    if spec.features is None:
        return None
    return list(dict.fromkeys([*spec.features, spec.label, *spec.attributes]))


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class _Loaded:
    file_format: FileFormat
    table: pa.Table  # the requested columns (all columns for CSV)
    columns: tuple[str, ...]  # every column in the file
    schema: pa.Schema  # of every column in the file


def _load(
    path: Path,
    file_format: FileFormat,
    display_name: str,
    *,
    columns: list[str] | None,
    csv_subset: bool = False,
    as_bytes: Sequence[str] = (),
) -> _Loaded:
    if path.stat().st_size == 0:
        raise DatasetError(
            "the file is empty (0 bytes); upload a file with a header line and data rows",
            file=display_name,
        )
    if file_format == "csv":
        return _load_csv(path, display_name, columns if csv_subset else None, as_bytes if csv_subset else ())
    return _load_parquet(path, display_name, columns)


def _load_csv(path: Path, display_name: str, columns: list[str] | None = None, as_bytes: Sequence[str] = ()) -> _Loaded:
    header = _sniff_csv(path, display_name)
    # By default all columns are converted even when only some are used, so that every column is
    # checked (an unused Latin-1 column still means the file is not UTF-8); ``columns`` is for
    # readers that use a few columns of a large file and check only those.
    include = [name for name in columns if name in header] if columns else []
    # Of those, the ``as_bytes`` columns that hold text are read as bytes: the caller codes them
    # itself, faster than the reader's dictionary encoding, and checks their distinct values as UTF-8.
    raw_text = _text_columns(path, [name for name in as_bytes if name in include])
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(use_threads=True),
            # A subset read (a few columns of a large file) lets the parallel reader dictionary-encode
            # its other text columns, so they are never hashed row by row on one thread.
            convert_options=pacsv.ConvertOptions(
                include_columns=include,
                column_types=dict.fromkeys(raw_text, pa.binary()),
                auto_dict_encode=bool(include),
                auto_dict_max_cardinality=_AUTO_DICT_LIMIT,
            ),
        )
    except pa.ArrowInvalid as exc:
        raise _explain_csv_error(str(exc), path, display_name, header) from None
    # pyarrow infers a column as binary instead of failing when its bytes are not UTF-8.
    if any(_is_binary_text(field.type) for field in table.schema if field.name not in raw_text):
        raise _encoding_error(path, display_name, header)
    if table.num_rows == 0:
        raise DatasetError("the file has a header line but no data rows", file=display_name)
    return _Loaded("csv", table, tuple(header) if include else tuple(table.column_names), table.schema)


def _text_columns(path: Path, names: Sequence[str]) -> list[str]:
    """Which of ``names`` hold text, as pyarrow infers it from the file's first block.

    A column with text in its first block is text (or, with a byte that is not UTF-8, binary) in
    the whole file, whatever its other values; one inferred as numbers there is left to the reader.
    """
    if not names:
        return []
    try:
        with pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(use_threads=False),
            convert_options=pacsv.ConvertOptions(include_columns=list(names)),
        ) as reader:
            schema = reader.schema
    except pa.ArrowInvalid:
        return []  # the full read reports the problem
    return [field.name for field in schema if pa.types.is_string(field.type)]


def _is_binary_text(kind: pa.DataType) -> bool:
    return pa.types.is_binary(kind) or (pa.types.is_dictionary(kind) and pa.types.is_binary(kind.value_type))


# Text columns with more distinct values per block than this are read as plain strings.
_AUTO_DICT_LIMIT = 4096


def _sniff_csv(path: Path, display_name: str) -> list[str]:
    with path.open("rb") as handle:
        head = handle.read(_SNIFF_BYTES)
        handle.seek(0)
        line = handle.readline(_MAX_HEADER_BYTES)
        while line and not line.strip():
            line = handle.readline(_MAX_HEADER_BYTES)

    def reject(message: str) -> DatasetError:
        return DatasetError(message, file=display_name)

    if head.startswith(b"PAR1"):
        raise reject("this is a Parquet file, not CSV text; rename it to end in .parquet")
    if head.startswith(b"PK\x03\x04") or head.startswith(b"\xd0\xcf\x11\xe0"):
        raise reject(
            "this is an Excel workbook or a ZIP archive, not CSV text; export the sheet as CSV (comma-separated, UTF-8)"
        )
    if head.startswith(b"\x1f\x8b"):
        raise reject("this file is gzip-compressed; decompress it and upload the CSV inside")
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise reject("the file is UTF-16 encoded, not UTF-8; save it as UTF-8")
    if b"\x00" in head:
        raise reject(
            "this is not CSV text: it contains binary data (NUL bytes); export the data as a "
            "comma-separated UTF-8 CSV file"
        )
    if not line.strip():
        raise reject("the file contains only blank lines; it needs a header line and data rows")
    line = line.removeprefix(codecs.BOM_UTF8)
    try:
        text = line.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise _encoding_error(path, display_name, []) from None
    header = next(csv.reader([text]))
    if len(header) == 1:
        for delimiter, described in ((";", "semicolon"), ("\t", "tab"), ("|", "pipe")):
            if delimiter in text:
                raise reject(
                    f"the file looks {described}-separated ({delimiter!r}), but the portal "
                    "accepts comma-separated CSV only; export it again with ',' as the separator"
                )
    _check_unique_names(header, display_name)
    return header


def _check_unique_names(names: Sequence[str], display_name: str) -> None:
    repeated = [(name, n) for name, n in Counter(names).items() if n > 1]
    if repeated:
        listed = ", ".join(f"{_q(name)} ({n} times)" for name, n in repeated)
        raise DatasetError(
            f"duplicate column names: {listed}; every column needs a unique name",
            file=display_name,
            column=repeated[0][0],
        )


_FIELD_COUNT = re.compile(r"Expected (\d+) columns, got (\d+)")


def _explain_csv_error(message: str, path: Path, display_name: str, header: list[str]) -> DatasetError:
    if "UTF8" in message or "UTF-8" in message:
        return _encoding_error(path, display_name, header)
    if "Empty CSV file" in message:
        return DatasetError("the file contains only blank lines", file=display_name)
    if _FIELD_COUNT.search(message):
        return _field_count_error(path, display_name, header)
    return DatasetError(
        f"cannot be read as comma-separated CSV ({message}); check that the file is a comma-separated UTF-8 CSV export",
        file=display_name,
    )


def _field_count_error(path: Path, display_name: str, header: list[str]) -> DatasetError:
    # The multi-threaded parser cannot number rows; a serial re-read (error path only) can.
    bad: list[pacsv.InvalidRow] = []

    def first_bad_row(row: pacsv.InvalidRow) -> Literal["skip", "error"]:
        bad.append(row)
        return "error"

    with contextlib.suppress(pa.ArrowInvalid):
        pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(use_threads=False),
            parse_options=pacsv.ParseOptions(invalid_row_handler=first_bad_row),
            convert_options=pacsv.ConvertOptions(include_columns=header[:1], column_types={header[0]: pa.string()}),
        )
    if not bad:
        return DatasetError("a row has a different number of fields than the header", file=display_name)
    row = bad[0]
    fields = f"{row.actual_columns} field{'s' if row.actual_columns != 1 else ''}"
    message = (
        f"this row has {fields} but the header has {row.expected_columns} columns (the row starts {_q(row.text, 60)}); "
    )
    if row.text.count('"') % 2:
        message += "it has an unclosed quote ('\"'): close the quoted value or remove the quote"
    else:
        message += "quote values that contain commas"
    number = None if row.number is None else row.number - 1
    return DatasetError(message, file=display_name, row=number)


def _encoding_error(path: Path, display_name: str, header: list[str]) -> DatasetError:
    found = _first_invalid_utf8(path)
    advice = "the file is not UTF-8 (e.g. Latin-1): save it as UTF-8"
    if found is None:
        return DatasetError(advice, file=display_name)
    _, line_number, line_prefix, byte = found
    what = f"byte 0x{byte:02X} is not valid UTF-8; {advice}"
    if line_number == 1:
        return DatasetError(f"the header line: {what}", file=display_name)
    fields = next(csv.reader([line_prefix.decode("utf-8")]), [""])
    index = len(fields) - 1
    column = header[index] if index < len(header) else None
    return DatasetError(what, file=display_name, row=line_number - 1, column=column)


def _first_invalid_utf8(path: Path) -> tuple[int, int, bytes, int] | None:
    decoder = codecs.getincrementaldecoder("utf-8")()
    consumed = 0
    offset: int | None = None
    with path.open("rb") as handle:
        while offset is None:
            chunk = handle.read(_HASH_CHUNK_BYTES)
            pending = len(decoder.getstate()[0])
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as exc:
                offset = consumed - pending + exc.start
            if not chunk:
                break
            consumed += len(chunk)
        if offset is None:
            return None
        handle.seek(0)
        before = handle.read(offset + 1)
    line_start = before.rfind(b"\n", 0, offset) + 1
    line_number = before.count(b"\n", 0, offset) + 1
    prefix = before[line_start:offset].removeprefix(codecs.BOM_UTF8)
    return offset, line_number, prefix, before[offset]


def _load_parquet(path: Path, display_name: str, columns: list[str] | None) -> _Loaded:
    with path.open("rb") as handle:
        head = handle.read(4)
        handle.seek(max(path.stat().st_size - 4, 0))
        tail = handle.read(4)
    if head != b"PAR1" or tail != b"PAR1":
        looks_like_text = head and all(32 <= b < 127 or b in (9, 10, 13) for b in head)
        hint = "; if it is CSV text, rename it to end in .csv" if looks_like_text else ""
        raise DatasetError(f"this is not a Parquet file (it lacks the 'PAR1' markers){hint}", file=display_name)
    try:
        parquet = pq.ParquetFile(path)
        schema = parquet.schema_arrow
        _check_unique_names(schema.names, display_name)
        if parquet.metadata.num_rows == 0:
            raise DatasetError("the file has columns but no data rows", file=display_name)
        present = [name for name in columns if name in schema.names] if columns else None
        table = parquet.read(columns=present, use_threads=True)
        # A categorical's dictionary may list values no row holds; decoded, only real values count.
        table = pa.table(
            [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in table.columns],
            names=table.column_names,
        )
    except (pa.ArrowException, OSError) as exc:
        raise DatasetError(f"cannot read the Parquet file ({exc}); export it again", file=display_name) from None
    return _Loaded("parquet", table, tuple(schema.names), schema)


def _sha256(path: Path, stop: threading.Event) -> str:
    digest = hashlib.sha256()
    # One reused buffer rather than a new bytes object per read (large ones are fresh pages from the system).
    buffer = bytearray(_HASH_CHUNK_BYTES)
    with path.open("rb", buffering=0) as handle, memoryview(buffer) as view:
        while not stop.is_set() and (count := handle.readinto(view)):
            digest.update(view[:count])
    return digest.hexdigest()


# --------------------------------------------------------------------------- normalisation


@dataclass(frozen=True)
class _Coded:
    raw: Codes  # per row: index into the column's own dictionary, -1 = null
    to_text: Codes  # per dictionary entry: index into texts (-1 = null), plus a final -1 for raw -1
    texts: pa.Array[Any]  # distinct rendered non-null values, no nulls

    def per_row(self, per_text: npt.NDArray[Any], null: Any) -> npt.NDArray[Any]:
        """Look a value per text up for every row: small tables are composed, then one gather."""
        per_entry = np.append(per_text, np.array([null], per_text.dtype))[self.to_text]
        result: npt.NDArray[Any] = per_entry[self.raw]
        return result

    def per_entry(self, per_text: npt.NDArray[Any], null: Any) -> npt.NDArray[Any]:
        result: npt.NDArray[Any] = np.append(per_text, np.array([null], per_text.dtype))[self.to_text]
        return result

    def codes(self) -> Codes:
        return self.per_row(np.arange(len(self.texts), dtype=np.int32), -1)


def _encode(column: pa.ChunkedArray[Any], display_name: str, name: str) -> _Coded:
    """Dictionary-encode a column once, then render and merge only its distinct values."""
    already_encoded = pa.types.is_dictionary(column.type) and len(column) > 0
    if pa.types.is_dictionary(column.type) and not already_encoded:
        column = column.cast(column.type.value_type)
    if pa.types.is_null(column.type) or len(column) == 0:
        return _Coded(np.full(len(column), -1, np.int32), np.full(1, -1, np.int32), pa.array([], pa.string()))
    try:
        encoded = column.unify_dictionaries() if already_encoded else pc.dictionary_encode(column).unify_dictionaries()
    except pa.ArrowNotImplementedError:
        raise _unusable_type(column.type, display_name, name) from None
    chunks = [cast("pa.DictionaryArray[Any, Any]", chunk) for chunk in encoded.chunks]
    value_type = column.type.value_type if already_encoded else column.type
    dictionary = chunks[0].dictionary if chunks else pa.array([], value_type)
    # One concatenation instead of a conversion per CSV block (hundreds of them).
    raw = _indices(pa.chunked_array([chunk.indices for chunk in chunks], pa.int32()).combine_chunks())
    texts, to_text = entry_texts(dictionary, display_name=display_name, column=name)
    return _Coded(raw, np.append(to_text, np.int32(-1)), texts)


def entry_texts(dictionary: pa.Array[Any], *, display_name: str, column: str) -> tuple[pa.Array[Any], Codes]:
    """Render a dictionary's entries as text: the distinct texts, and each entry's index among them.

    Rendering may merge entries (" a" and "a", 0.0 and -0.0) and turns NaN into null, whose index
    is -1. Raises DatasetError for bytes that are not UTF-8 and for types that cannot be rendered.
    """
    try:
        rendered = _render(dictionary)
    except _NotUtf8:
        raise DatasetError(
            "the column holds bytes that are not valid UTF-8 text; save the data as UTF-8",
            file=display_name,
            column=column,
        ) from None
    except TypeError:
        raise _unusable_type(dictionary.type, display_name, column) from None
    merged = cast("pa.DictionaryArray[Any, Any]", pc.dictionary_encode(rendered))
    return merged.dictionary.cast(pa.string()), _indices(merged.indices)


def _indices(indices: pa.Array[Any]) -> Codes:
    """Dictionary indices as int32 codes, null as -1."""
    return _to_numpy(cast("pa.Array[Any]", pc.fill_null(indices.cast(pa.int32()), pa.scalar(-1, pa.int32()))))


def _to_numpy(array: pa.Array[Any]) -> Codes:
    values = array.cast(pa.int32())
    assert values.null_count == 0
    return cast(Codes, numpy_view(values))


def numpy_view(array: pa.Array[Any]) -> npt.NDArray[Any]:
    """The data buffer of an integer or floating-point array as a numpy array, without a copy.

    Array.to_numpy() would import pandas on first use (about a second). Values under nulls are
    undefined: callers check ``null_count``.
    """
    kind = array.type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        raise TypeError(f"no numpy view of {kind} values")
    dtype = np.dtype(kind.to_pandas_dtype())
    buffer = cast(memoryview, array.buffers()[1])
    return np.frombuffer(buffer, dtype, len(array), array.offset * dtype.itemsize)


class _NotUtf8(Exception):
    pass


def _render(values: pa.Array[Any]) -> pa.Array[Any]:
    """Render values as the text that labels, positive values and groups are compared as."""
    kind = values.type
    if pa.types.is_null(kind):
        return pa.nulls(len(values), pa.string())
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return pc.utf8_trim_whitespace(values.cast(pa.string()))
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        try:
            return pc.utf8_trim_whitespace(values.cast(pa.string()))
        except pa.ArrowInvalid:
            raise _NotUtf8 from None
    if pa.types.is_boolean(kind) or pa.types.is_integer(kind):
        return values.cast(pa.string())
    if pa.types.is_decimal(kind):
        return _render(values.cast(pa.float64(), safe=False))
    if pa.types.is_floating(kind):
        if pa.types.is_float16(kind):
            values = values.cast(pa.float32())
        integral = pc.and_(
            pc.equal(pc.floor(values), values), pc.less(pc.abs(values), pa.scalar(_INTEGRAL_FLOAT_LIMIT))
        )
        as_int = pc.if_else(integral, values, pa.scalar(0, values.type)).cast(pa.int64(), safe=False)
        text = pc.if_else(integral, as_int.cast(pa.string()), values.cast(pa.string()))
        return cast("pa.Array[Any]", pc.if_else(pc.is_nan(values), pa.scalar(None, pa.string()), text))
    if pa.types.is_temporal(kind):
        return values.cast(pa.string())
    raise TypeError(kind)


def _unusable_type(kind: pa.DataType, display_name: str, name: str) -> DatasetError:
    return DatasetError(
        f"values of type {kind} cannot be used; flatten the column into plain values",
        file=display_name,
        column=name,
    )


def _is_numeric(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return bool(
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_decimal(kind)
    )


def _as_float64(column: pa.ChunkedArray[Any]) -> pa.ChunkedArray[Any]:
    values = column.cast(pa.float64(), safe=False)
    # NaN is normalised to null, so the trainer's "fill nulls with the mean" covers both.
    return cast("pa.ChunkedArray[Any]", pc.if_else(pc.is_nan(values), pa.scalar(None, pa.float64()), values))


# --------------------------------------------------------------------------- validation + summary


@dataclass(frozen=True)
class _Attribute:
    info: AttributeInfo
    codes: Codes  # per row: index into info.groups, -1 = unknown


@dataclass(frozen=True)
class _Prepared:
    num_rows: int
    target: npt.NDArray[np.int8]
    positives: int
    features: tuple[FeatureInfo, ...]
    attributes: tuple[_Attribute, ...]


def _prepare(loaded: _Loaded, spec: DatasetSpec, display_name: str) -> _Prepared:
    _check_declared_columns(loaded.columns, spec, display_name)
    features = _feature_infos(loaded, spec, display_name)
    table = loaded.table
    # pyarrow's hashing kernels are single-threaded per column and release the GIL, so the label
    # and the attributes are encoded side by side.
    with ThreadPoolExecutor(max_workers=_ENCODE_THREADS, thread_name_prefix="encode") as pool:
        label_job = pool.submit(_target, table.column(spec.label), spec, display_name)
        attribute_jobs = [
            pool.submit(_attribute, table.column(name), name, spec, display_name) for name in spec.attributes
        ]
        target = label_job.result()
        attributes = tuple(job.result() for job in attribute_jobs)
    return _Prepared(
        num_rows=table.num_rows,
        target=target,
        positives=int(np.count_nonzero(target)),
        features=features,
        attributes=attributes,
    )


def _check_declared_columns(columns: Sequence[str], spec: DatasetSpec, display_name: str) -> None:
    declared = [(spec.label, "label")]
    declared += [(name, "sensitive attribute") for name in spec.attributes]
    declared += [(name, "feature") for name in spec.features or ()]
    _check_columns_present(columns, declared, display_name)


def _check_columns_present(columns: Sequence[str], declared: Sequence[tuple[str, str]], display_name: str) -> None:
    missing = [(name, role) for name, role in declared if name not in columns]
    if not missing:
        return
    listed = ", ".join(f"{_q(name)} ({role})" for name, role in missing)
    available = ", ".join(_q(name) for name in columns)
    message = f"declared columns not in the file: {listed}; the file's columns are {available}"
    hints = []
    for name, _ in missing:
        close = difflib.get_close_matches(name, columns, n=1) or [
            c for c in columns if c.strip().lower() == name.strip().lower()
        ]
        if close:
            hints.append(f"{_q(close[0])} for {_q(name)}")
    if hints:
        message += f" (did you mean {', '.join(hints)}?)"
    raise DatasetError(message, file=display_name, column=missing[0][0])


def _feature_infos(loaded: _Loaded, spec: DatasetSpec, display_name: str) -> tuple[FeatureInfo, ...]:
    if spec.features is None:
        taken = {spec.label, *spec.attributes}
        names: Iterable[str] = [name for name in loaded.columns if name not in taken]
    else:
        names = spec.features
    infos = []
    for name in names:
        if name == TARGET_COLUMN or name.startswith(ATTRIBUTE_PREFIX):
            raise DatasetError(
                f"the column name {_q(name)} is reserved for the portal's own columns; rename it "
                "or leave it out of the features",
                file=display_name,
                column=name,
            )
        kind = loaded.schema.field(name).type
        value_type = kind.value_type if pa.types.is_dictionary(kind) else kind
        if pa.types.is_nested(value_type):
            raise _unusable_type(kind, display_name, name)
        infos.append(FeatureInfo(name, "numeric" if _is_numeric(kind) else "categorical"))
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
    equal = cast("pa.ChunkedArray[Any]", pc.equal(column, pa.scalar(bounds[1], column.type)))
    flags = cast("pa.Array[Any]", equal.combine_chunks().cast(pa.int8()))
    return cast(npt.NDArray[np.int8], numpy_view(flags).copy())


def _target(column: pa.ChunkedArray[Any], spec: DatasetSpec, display_name: str) -> npt.NDArray[np.int8]:
    fast = _integer_target(column, spec.positive)
    if fast is not None:
        return fast
    name = spec.label
    coded = _encode(column, display_name, name)
    missing_text = np.zeros(len(coded.texts), bool)
    empty = _index_of(coded.texts, "")
    if empty is not None:
        missing_text[empty] = True
    # Cheap test on the dictionary first; the per-row search only runs when a row is missing.
    if column.null_count or coded.per_entry(missing_text, True)[:-1].any():
        raise DatasetError(
            "the label is missing; every row needs a label value",
            file=display_name,
            row=_first_row(coded.per_row(missing_text, True)),
            column=name,
        )
    positive = _match_positive(spec.positive, coded.texts, column.type)
    if len(coded.texts) > 2:
        codes = coded.codes()
        keep = _intended_pair(codes, coded.texts, positive)
        row = _first_row(~np.isin(codes, keep))
        value = coded.texts[int(codes[row - 1])].as_py()
        raise DatasetError(
            f"value {_q(value)} makes the label non-binary (values seen: "
            f"{_values_seen(coded.texts)}); the label must have exactly two values",
            file=display_name,
            row=row,
            column=name,
        )
    if positive is None:
        raise DatasetError(
            f"the positive value {_q(spec.positive.strip())} does not occur in the label (values "
            f"seen: {_values_seen(coded.texts)}); choose one of these",
            file=display_name,
            column=name,
        )
    is_positive = np.zeros(len(coded.texts), np.int8)
    is_positive[positive] = 1
    target: npt.NDArray[np.int8] = coded.per_row(is_positive, 0)
    return target


_PARTNERS = {"1": "0", "0": "1", "true": "false", "false": "true", "yes": "no", "no": "yes", "y": "n", "n": "y"}


def _intended_pair(codes: Codes, texts: pa.Array[Any], positive: int | None) -> list[int]:
    """The two label values the user most likely meant, so an error can name the stray one."""
    counts = np.bincount(codes, minlength=len(texts))
    keep: list[int] = [] if positive is None else [positive]
    if positive is not None:
        partner = _PARTNERS.get(str(texts[positive].as_py()).lower())
        matches = [i for i, text in enumerate(_pylist(texts)) if text.lower() == partner] if partner else []
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
        if number.is_integer() and abs(number) < _INTEGRAL_FLOAT_LIMIT:
            candidates.append(str(int(number)))
    if pa.types.is_boolean(kind):
        candidates.append(wanted.lower())
    for candidate in candidates:
        index = _index_of(texts, candidate)
        if index is not None:
            return index
    return None


def _attribute(column: pa.ChunkedArray[Any], name: str, spec: DatasetSpec, display_name: str) -> _Attribute:
    coded = _encode(column, display_name, name)
    groups, group_of_text = attribute_groups(coded.texts, name, spec, display_name)
    codes = coded.per_row(group_of_text, -1)
    unknown_count = int(np.count_nonzero(codes < 0))
    return _Attribute(AttributeInfo(name, groups, unknown_count), codes)


def attribute_groups(
    texts: pa.Array[Any], name: str, spec: DatasetSpec, display_name: str
) -> tuple[tuple[str, ...], Codes]:
    """An attribute's known groups (sorted), and each distinct text's group index (-1 = unknown)."""
    tokens = pa.array(sorted({token.strip().lower() for token in spec.unknown_tokens}), pa.string())
    unknown_values = pc.is_in(pc.utf8_lower(texts), value_set=tokens)
    unknown = _to_numpy(unknown_values).astype(bool)
    known = np.flatnonzero(~unknown)
    if len(known) > spec.max_groups:
        raise DatasetError(
            f"the sensitive attribute has {len(known)} known groups, more than the limit of "
            f"{spec.max_groups}; choose a coarser column or bucket its values (e.g. age into "
            "age groups)",
            file=display_name,
            column=name,
        )
    known_texts = texts.take(pa.array(known, pa.int64()))
    order = _to_numpy(pc.array_sort_indices(known_texts))
    groups = tuple(_pylist(known_texts.take(pa.array(order, pa.int64()))))
    group_of_text = np.full(len(texts), -1, np.int32)
    group_of_text[known[order]] = np.arange(len(known), dtype=np.int32)
    return groups, group_of_text


def _group_stats(prepared: _Prepared) -> tuple[GroupStat, ...]:
    total = prepared.num_rows
    stats: list[GroupStat] = []

    def add(attribute: str, group: str | None, counts: npt.NDArray[np.int64]) -> None:
        negatives, positives = int(counts[0]), int(counts[1])
        rows = negatives + positives
        stats.append(GroupStat(attribute, group, rows, positives, negatives, rows / total))

    def add_attribute(attribute: _Attribute, counts: npt.NDArray[np.int64]) -> None:
        for index, group in enumerate(attribute.info.groups, start=1):
            add(attribute.info.name, group, counts[index])
        add(attribute.info.name, None, counts[0])

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
        name = f"{first.info.name}{INTERSECTION_SEPARATOR}{second.info.name}"
        # Every combination is listed, empty ones with 0 rows: an empty intersection is itself a
        # finding for a bias audit.
        for i, group_a in enumerate(first.info.groups, start=1):
            for j, group_b in enumerate(second.info.groups, start=1):
                add(name, f"{group_a}{INTERSECTION_SEPARATOR}{group_b}", joint[i, j])
        add(name, None, joint.sum(axis=(0, 1)) - joint[1:, 1:].sum(axis=(0, 1)))
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


# --------------------------------------------------------------------------- small helpers


def _pylist(texts: pa.Array[Any]) -> list[str]:
    # Rendered distinct values never contain nulls.
    return cast(list[str], texts.to_pylist())


def _index_of(texts: pa.Array[Any], value: str) -> int | None:
    index = pc.index(texts, value).as_py()
    return None if index is None or index < 0 else int(index)


def _first_row(mask: npt.NDArray[np.bool_]) -> int:
    return int(np.argmax(mask)) + 1


def _values_seen(texts: pa.Array[Any]) -> str:
    shown = pc.array_sort_indices(texts)[:_VALUES_SHOWN] if len(texts) else pa.array([], pa.int64())
    listed = ", ".join(_q(value) for value in _pylist(texts.take(shown)))
    if len(texts) > _VALUES_SHOWN:
        listed += f", … ({len(texts)} distinct values)"
    return listed


def _escape(text: str) -> str:
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def _q(text: str, limit: int = 80) -> str:
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"'{_escape(text)}'"
