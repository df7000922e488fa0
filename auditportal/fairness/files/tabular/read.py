"""Parse a CSV or Parquet file with pyarrow, hash it beside the parse, and explain every parse
failure with the file, row and column at fault."""

from __future__ import annotations

import codecs
import contextlib
import csv
import difflib
import hashlib
import re
import threading
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Literal

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from auditportal.fairness.files.tabular.errors import DatasetError, DecodedSizeError, quote
from auditportal.fairness.files.tabular.spec import DatasetSpec, FileFormat, check_spec, unsupported_suffix_message
from auditportal.fairness.text.sizes import human_size

if TYPE_CHECKING:
    import pyarrow.parquet as pq

_SNIFF_BYTES = 64 * 1024
_MAX_HEADER_BYTES = 16 * 1024 * 1024
_HASH_CHUNK_BYTES = 1024 * 1024


@dataclass(frozen=True)
class RawColumns:
    """The requested columns of a file as parsed, before any interpretation."""

    file_format: FileFormat
    table: pa.Table  # the label, the sensitive attributes and the other requested columns
    columns: tuple[str, ...]  # every column in the file
    sha256: str
    size_bytes: int
    # Each requested name the file repeats: None when its columns hold the same values in every row
    # (the table then has it once), else the first data row (1 = first) where they differ.
    repeats: dict[str, int | None] = field(default_factory=dict)


@dataclass(frozen=True)
class ReadLimits:
    """What reading a file may cost besides its size on disk, checked before the data are read where
    the file says (a Parquet file's metadata): a small Parquet file can declare millions of rows,
    or compress gigabytes of values into megabytes. None: no bound."""

    rows: int | None = None
    decompressed_bytes: int | None = None  # of the columns read, once decompressed and decoded


NO_LIMITS = ReadLimits()


def read_columns(
    path: Path,
    spec: DatasetSpec,
    *,
    others: Sequence[tuple[str, str]],
    display_name: str,
    max_bytes: int,
    sha256: str | None = None,
    limits: ReadLimits = NO_LIMITS,
) -> RawColumns:
    """Parse only the label, the sensitive attributes and ``others`` ((column, role) pairs).

    Unlike registration, a CSV file's unused columns are not converted, so a large file costs only
    what is used. The file is hashed beside the parse: the hash is the only work that can overlap it, since
    everything after the parse needs the parsed columns. ``sha256``, when the caller already has the
    file's digest (an upload hashed as it streamed in), saves that work.
    """
    file_format = file_format_of(path, display_name)
    check_spec(spec, display_name)
    size = check_size(path, display_name, max_bytes)
    wanted = list(dict.fromkeys([spec.label, *spec.attributes, *(name for name, _ in others)]))
    declared = [(spec.label, "label"), *((name, "sensitive attribute") for name in spec.attributes), *others]

    def parse() -> Loaded:
        loaded = load(path, file_format, display_name, columns=wanted, csv_subset=True, limits=limits)
        check_columns_present(loaded.columns, declared, display_name, repeats=loaded.repeats)
        return loaded

    if sha256 is not None:
        loaded = parse()
    else:
        stop = threading.Event()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sha256") as pool:
            digest = pool.submit(sha256_of, path, stop)
            try:
                loaded = parse()
            except BaseException:
                stop.set()
                raise
            sha256 = digest.result()
    return RawColumns(file_format, loaded.table, loaded.columns, sha256, size, loaded.repeats)


def file_format_of(path: Path, display_name: str) -> FileFormat:
    # The user's name decides; the storage path is a fallback for callers that pass a bare label.
    for candidate in (display_name, path.name):
        suffix = candidate.lower().rsplit(".", 1)[-1] if "." in candidate else ""
        if suffix == "csv":
            return "csv"
        if suffix in ("parquet", "pq"):
            return "parquet"
    raise DatasetError(unsupported_suffix_message(display_name), file=display_name)


def check_size(path: Path, display_name: str, max_bytes: int) -> int:
    size = path.stat().st_size
    if size > max_bytes:
        raise DatasetError(
            f"the file is {human_size(size)}, over the limit of {human_size(max_bytes)}; "
            "upload a smaller file (Parquet is usually several times smaller than CSV)",
            file=display_name,
        )
    return size


@dataclass(frozen=True)
class Loaded:
    file_format: FileFormat
    table: pa.Table  # the requested columns (all columns for CSV)
    columns: tuple[str, ...]  # every column in the file
    schema: pa.Schema  # of every column in the file
    repeats: dict[str, int | None] = field(default_factory=dict)  # as RawColumns.repeats


def load(
    path: Path,
    file_format: FileFormat,
    display_name: str,
    *,
    columns: list[str] | None,
    csv_subset: bool = False,
    limits: ReadLimits = NO_LIMITS,
    used: Sequence[str] | None = None,
) -> Loaded:
    """Read ``columns`` (None: all). Each name of ``used`` (default: ``columns``) that the file
    repeats has its columns compared; identical ones are kept once (see :func:`merge_repeats`)."""
    _check_not_empty(path, display_name)
    used = columns if used is None else used
    if file_format == "csv":
        loaded = _load_csv(path, display_name, columns if csv_subset else None, used)
        # A CSV file says nothing of its rows before it is parsed; its size bounded the parse.
        _check_rows(loaded.table.num_rows, display_name, limits)
    else:
        loaded = _load_parquet(path, display_name, columns, limits, used)
    return merge_repeats(loaded, used)


def merge_repeats(loaded: Loaded, used: Sequence[str] | None) -> Loaded:
    """Compare the columns of each name of ``used`` that the file repeats: when they hold the same
    values in every row, the table and schema keep only the first (the name is then one column);
    when they differ, all are kept and the first differing row is recorded, for
    :func:`check_columns_present` to refuse the name where it is declared.

    Only the repeated names that are used are compared, each with one vectorised pass."""
    counts = Counter(loaded.table.column_names)
    names = [name for name in dict.fromkeys(used or ()) if counts[name] > 1]
    if not names:
        return loaded
    table, schema = loaded.table, loaded.schema
    repeats: dict[str, int | None] = {}
    drop: list[str] = []
    for name in names:
        indices = [i for i, column in enumerate(table.column_names) if column == name]
        first = table.column(indices[0])
        rows = [_first_difference(first, table.column(i)) for i in indices[1:]]
        differing = [row for row in rows if row is not None]
        repeats[name] = min(differing) if differing else None
        if not differing:
            drop.append(name)
    if drop:
        keep = [i for i, column in enumerate(table.column_names) if column not in drop or _first_index(table, i)]
        table = table.select(keep)
        fields = [f for i, f in enumerate(schema) if f.name not in drop or schema.names.index(f.name) == i]
        metadata: Any = schema.metadata
        schema = pa.schema(fields, metadata=metadata)
    return Loaded(loaded.file_format, table, loaded.columns, schema, {**loaded.repeats, **repeats})


def _first_index(table: pa.Table, index: int) -> bool:
    return table.column_names.index(table.column_names[index]) == index


def _first_difference(a: pa.ChunkedArray[Any], b: pa.ChunkedArray[Any]) -> int | None:
    """The first row (1 = first) where ``a`` and ``b`` differ in value or in being null; None when
    they hold the same values in every row. Columns of different types (a Parquet file may store
    one as int32, the other as int64) are compared once ``b`` is cast to ``a``'s type."""
    import pyarrow.compute as pc

    a, b = _decoded(a), _decoded(b)
    if a.type != b.type:
        try:
            b = b.cast(a.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return 1  # of kinds no cast reconciles (text and numbers): they differ from the first row on
    if a.equals(b):
        return None
    same = pc.equal(a, b)
    if pa.types.is_floating(a.type):  # NaN in both is the same value
        same = pc.or_kleene(same, pc.and_(pc.is_nan(a), pc.is_nan(b)))
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    same = pc.if_else(both_null, pa.scalar(True), pc.fill_null(same, pa.scalar(False)))
    differs = np.flatnonzero(~same.to_numpy(zero_copy_only=False))
    return int(differs[0]) + 1 if len(differs) else None


def _decoded(column: pa.ChunkedArray[Any]) -> pa.ChunkedArray[Any]:
    return column.cast(column.type.value_type) if pa.types.is_dictionary(column.type) else column


def check_file(path: Path, *, display_name: str, max_bytes: int, limits: ReadLimits) -> FileFormat:
    """The cheap checks of a whole file, without reading its data: its name, size and kind, a CSV
    file's header line, a Parquet file's metadata against ``limits`` (for every column)."""
    file_format = file_format_of(path, display_name)
    check_size(path, display_name, max_bytes)
    _check_not_empty(path, display_name)
    if file_format == "csv":
        _sniff_csv(path, display_name)
    else:
        _check_parquet_markers(path, display_name)
        import pyarrow.parquet as pq  # here: reading a CSV file never needs it (0.02 s to import)

        try:
            metadata = pq.ParquetFile(path).metadata
        except (pa.ArrowException, OSError) as exc:
            raise DatasetError(f"cannot read the Parquet file ({exc}); export it again", file=display_name) from None
        if metadata.num_rows == 0:
            raise DatasetError("the file has columns but no data rows", file=display_name)
        check_parquet_bounds(metadata, None, display_name, limits)
    return file_format


def declared_rows(path: Path) -> int | None:
    """The rows a Parquet file's metadata declare; None for any other file, or metadata that cannot
    be read (reading the file then says what is wrong with it)."""
    with path.open("rb") as handle:
        if handle.read(4) != b"PAR1":
            return None
    import pyarrow.parquet as pq

    try:
        return int(pq.read_metadata(path).num_rows)
    except (pa.ArrowException, OSError):
        return None


def _check_not_empty(path: Path, display_name: str) -> None:
    if path.stat().st_size == 0:
        raise DatasetError(
            "the file is empty (0 bytes); upload a file with a header line and data rows",
            file=display_name,
        )


def _check_rows(rows: int, display_name: str, limits: ReadLimits) -> None:
    if limits.rows is not None and rows > limits.rows:
        raise DatasetError(
            f"the file has {rows:,} rows, over the limit of {limits.rows:,} rows; upload a sample or a part of it",
            file=display_name,
        )


# Bytes per value of each Parquet physical type once decoded into memory (a text or binary value
# takes at least its 4-byte offset; its characters are counted by the column's uncompressed size).
_DECODED_WIDTH = {
    "BOOLEAN": 1,
    "INT32": 4,
    "INT64": 8,
    "INT96": 12,
    "FLOAT": 4,
    "DOUBLE": 8,
    "BYTE_ARRAY": 4,
}


def check_parquet_bounds(
    metadata: pq.FileMetaData, columns: Sequence[str] | None, display_name: str, limits: ReadLimits
) -> None:
    """Refuse a Parquet file whose metadata declare more rows, or more decompressed data in
    ``columns`` (None: all), than ``limits`` allow; nothing of its data is read."""
    _check_rows(metadata.num_rows, display_name, limits)
    if limits.decompressed_bytes is None:
        return
    wanted = None if columns is None else set(columns)
    schema = metadata.schema
    total = 0
    for group_index in range(metadata.num_row_groups):
        group = metadata.row_group(group_index)
        for index in range(group.num_columns):
            chunk = group.column(index)
            if wanted is not None and chunk.path_in_schema.split(".", 1)[0] not in wanted:
                continue
            width = _DECODED_WIDTH.get(chunk.physical_type) or max(schema.column(index).length or 0, 1)
            # Encodings (dictionary, run lengths) make the uncompressed size alone far smaller than
            # the values it decodes to: a million equal values take a few bytes.
            total += max(chunk.total_uncompressed_size, chunk.num_values * width)
    if total > limits.decompressed_bytes:
        read = "its columns" if wanted is None else "the columns read"
        raise DecodedSizeError(
            f"{read} take at least {human_size(total)} once decompressed, over the limit of "
            f"{human_size(limits.decompressed_bytes)}; upload a sample or a part of it, or fewer columns",
            file=display_name,
        )


def _load_csv(
    path: Path, display_name: str, columns: list[str] | None = None, used: Sequence[str] | None = None
) -> Loaded:
    header = _sniff_csv(path, display_name)
    if columns:  # a used name the header repeats is read too, to compare its columns
        columns = [*columns, *(name for name in used or () if header.count(name) > 1 and name not in columns)]
    # By default all columns are converted even when only some are used, so that every column is
    # checked (an unused Latin-1 column still means the file is not UTF-8); ``columns`` is for
    # readers that use a few columns of a large file and check only those.
    include = [name for name in columns if name in header] if columns else []
    by_position = bool(include) and any(header.count(name) > 1 for name in include)
    if by_position:
        # pyarrow's include_columns reads only the first column of a repeated name, so the columns
        # are named by position instead: every column of a requested name is read (and compared).
        wanted = set(include)
        include = [_positional(i) for i, name in enumerate(header) if name in wanted]
    names = [_positional(i) for i in range(len(header))] if by_position else None
    skip = 1 if by_position else 0  # the header line, when the names are given
    # A subset read (a few columns of a large file) lets the parallel reader dictionary-encode
    # its other text columns, so they are never hashed row by row on one thread.
    convert = pacsv.ConvertOptions(
        include_columns=include,
        auto_dict_encode=bool(include),
        auto_dict_max_cardinality=_AUTO_DICT_LIMIT,
    )
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(use_threads=True, column_names=names, skip_rows=skip),
            convert_options=convert,
        )
    except pa.ArrowInvalid as exc:
        if _STRADDLING not in str(exc):
            raise _explain_csv_error(str(exc), path, display_name, header) from None
        # A row longer than the reader's block: a long free-text field, often in a column nobody
        # uses. A larger block costs memory only (one block per parsing thread), so the file is read
        # again with one that holds its longest row, up to MAX_ROW_BYTES; beyond that it is refused.
        longest = _longest_line(path)
        if longest.length > MAX_ROW_BYTES:
            raise _long_row_error(path, display_name, header, longest) from None
        block = 1 << (longest.length + 2).bit_length()
        try:
            table = pacsv.read_csv(
                path,
                read_options=pacsv.ReadOptions(use_threads=True, block_size=block, column_names=names, skip_rows=skip),
                convert_options=convert,
            )
        except pa.ArrowInvalid as again:
            if _STRADDLING in str(again):
                raise _long_row_error(path, display_name, header, longest) from None
            raise _explain_csv_error(str(again), path, display_name, header, block) from None
    if by_position:
        table = table.rename_columns([header[int(name.removeprefix(_POSITION))] for name in table.column_names])
    # pyarrow infers a column as binary instead of failing when its bytes are not UTF-8.
    if any(_is_binary_text(field.type) for field in table.schema):
        raise _encoding_error(path, display_name, header)
    if table.num_rows == 0:
        raise DatasetError("the file has a header line but no data rows", file=display_name)
    return Loaded("csv", table, tuple(header) if include else tuple(table.column_names), table.schema)


# The reader's name for a column by position (every column is renamed, so none can clash).
_POSITION = "\x00column "


def _positional(index: int) -> str:
    return f"{_POSITION}{index}"


def _is_binary_text(kind: pa.DataType) -> bool:
    return pa.types.is_binary(kind) or (pa.types.is_dictionary(kind) and pa.types.is_binary(kind.value_type))


# Text columns with more distinct values per block than this are read as plain strings.
_AUTO_DICT_LIMIT = 4096
# pyarrow's message when a row does not fit in one block (ReadOptions.block_size, 1 MiB by default).
_STRADDLING = "straddling object straddles two block boundaries"
# pyarrow's default ReadOptions.block_size.
_DEFAULT_BLOCK_BYTES = 1 << 20
# The longest row (in bytes, with its line end) a CSV file may have; see _load_csv.
MAX_ROW_BYTES = 16 * 1024 * 1024
# At most this much of a too-long row is read to find its longest field.
_LONG_ROW_READ_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class _Line:
    length: int  # bytes, with the line end
    number: int  # 1 = the header line
    offset: int  # of its first byte


def _longest_line(path: Path) -> _Line:
    """The file's longest line (the first of equals), found with numpy a chunk at a time."""
    best = _Line(0, 0, 0)
    start = 0  # offset of the current line's first byte
    number = 1
    consumed = 0
    with path.open("rb") as handle:
        while chunk := handle.read(_HASH_CHUNK_BYTES * 8):
            ends = np.flatnonzero(np.frombuffer(chunk, np.uint8) == 0x0A) + consumed
            if len(ends):
                starts = np.concatenate(([start], ends[:-1] + 1))
                lengths = ends + 1 - starts
                i = int(np.argmax(lengths))
                if lengths[i] > best.length:
                    best = _Line(int(lengths[i]), number + i, int(starts[i]))
                number += len(ends)
                start = int(ends[-1]) + 1
            consumed += len(chunk)
    if consumed - start > best.length:  # a last line without a line end
        best = _Line(consumed - start, number, start)
    return best


def _long_row_error(path: Path, display_name: str, header: list[str], line: _Line) -> DatasetError:
    size = human_size(line.length)
    limit = human_size(MAX_ROW_BYTES)
    if line.number == 1:
        return DatasetError(
            f"the header line is {size} long, over the limit of {limit} for one line", file=display_name
        )
    with path.open("rb") as handle:
        handle.seek(line.offset)
        data = np.frombuffer(handle.read(min(line.length, _LONG_ROW_READ_BYTES)).rstrip(b"\r\n"), np.uint8)
    # Field separators are the commas outside quotes: those after an even number of quotes (a
    # doubled quote inside a quoted value counts twice), found without a loop over the bytes.
    outside = np.cumsum(data == ord('"')) % 2 == 0
    edges = np.concatenate(([-1], np.flatnonzero((data == ord(",")) & outside), [len(data)]))
    lengths = np.diff(edges) - 1
    index = int(np.argmax(lengths))
    column = header[index] if index < len(header) else None
    field = human_size(int(lengths[index]))
    return DatasetError(
        f"this row is {size} long, over the limit of {limit} for one row (its longest field is {field}); "
        "shorten the field, or leave the column out of the file",
        file=display_name,
        row=line.number - 1,
        column=column,
    )


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
    return header


def repeated_names(columns: Sequence[str]) -> tuple[str, ...]:
    """The names that more than one of ``columns`` has, in the file's order."""
    counts = Counter(columns)
    return tuple(name for name in dict.fromkeys(columns) if counts[name] > 1)


def positions_of(columns: Sequence[str], name: str) -> str:
    """Where ``name`` is among ``columns``, counted from 1: "3 and 24", "3, 9 and 24"."""
    positions = [str(i) for i, column in enumerate(columns, start=1) if column == name]
    return f"{', '.join(positions[:-1])} and {positions[-1]}"


def identical_columns_warning(columns: Sequence[str], name: str) -> str:
    """What a reader is told when a repeated name is used because its columns are identical."""
    both = "both" if columns.count(name) == 2 else "all"
    where = positions_of(columns, name)
    return f"columns {where} are {both} named {quote(name)} with identical values; the first is used"


def repeated_columns_warnings(columns: Sequence[str], used: Collection[str] = ()) -> list[str]:
    """What a reader of a file with repeated column names is told; empty when every name is unique.

    ``used``: the names the reading used. A used repeated name had identical columns (reading
    refuses one whose columns differ), so it is one column, named in a warning of its own; the other
    repeated names are listed together as not used (a dataset's default features leave them out)."""
    repeated = repeated_names(columns)
    warnings = [identical_columns_warning(columns, name) for name in repeated if name in used]
    unused = [name for name in repeated if name not in used]
    if unused:
        listed = ", ".join(f"{quote(name)} (columns {positions_of(columns, name)})" for name in unused)
        warnings.append(
            f"the file has more than one column named {listed}; these were not used (as label, sensitive "
            "attribute, prediction, score or feature): a repeated name is used only where it is declared and "
            "its columns hold the same values in every row, and a dataset's default features leave it out"
        )
    return warnings


_FIELD_COUNT = re.compile(r"Expected (\d+) columns, got (\d+)")


def _explain_csv_error(
    message: str, path: Path, display_name: str, header: list[str], block_size: int | None = None
) -> DatasetError:
    if "UTF8" in message or "UTF-8" in message:
        return _encoding_error(path, display_name, header)
    if "Empty CSV file" in message:
        return DatasetError("the file contains only blank lines", file=display_name)
    if _FIELD_COUNT.search(message):
        return _field_count_error(path, display_name, header, block_size)
    return DatasetError(
        f"cannot be read as comma-separated CSV ({message}); check that the file is a comma-separated UTF-8 CSV export",
        file=display_name,
    )


def _field_count_error(path: Path, display_name: str, header: list[str], block_size: int | None) -> DatasetError:
    # The multi-threaded parser cannot number rows; a serial re-read (error path only) can.
    bad: list[pacsv.InvalidRow] = []

    def first_bad_row(row: pacsv.InvalidRow) -> Literal["skip", "error"]:
        bad.append(row)
        return "error"

    with contextlib.suppress(pa.ArrowInvalid):
        pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(use_threads=False, block_size=block_size or _DEFAULT_BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(invalid_row_handler=first_bad_row),
            convert_options=pacsv.ConvertOptions(include_columns=header[:1], column_types={header[0]: pa.string()}),
        )
    if not bad:
        return DatasetError("a row has a different number of fields than the header", file=display_name)
    row = bad[0]
    fields = f"{row.actual_columns} field{'s' if row.actual_columns != 1 else ''}"
    message = (
        f"this row has {fields} but the header has {row.expected_columns} columns "
        f"(the row starts {quote(row.text, 60)}); "
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
    what = f"byte 0x{found.byte:02X} is not valid UTF-8; {advice}"
    if found.line_number == 1:
        return DatasetError(f"the header line: {what}", file=display_name)
    column = None
    if found.line_prefix is not None:
        fields = next(csv.reader([found.line_prefix.decode("utf-8")]), [""])
        index = len(fields) - 1
        column = header[index] if index < len(header) else None
    return DatasetError(what, file=display_name, row=found.line_number - 1, column=column)


@dataclass(frozen=True)
class _InvalidByte:
    offset: int
    line_number: int  # 1 = the header line
    line_prefix: bytes | None  # its line up to it; None when that is longer than MAX_ROW_BYTES
    byte: int


def _first_invalid_utf8(path: Path) -> _InvalidByte | None:
    """The first byte that is not UTF-8, found in one streaming pass.

    Only the current line is kept (up to MAX_ROW_BYTES, the longest row a file may have), so the
    memory used does not grow with the file: the byte may lie gigabytes in.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    consumed = 0  # bytes before this chunk
    newlines = 0  # line ends before this chunk
    line: bytearray | None = bytearray()  # the current line so far; None once too long to keep

    def advance(data: bytes) -> None:
        nonlocal newlines, line
        last = data.rfind(b"\n")
        if last >= 0:
            newlines += data.count(b"\n")
            line = bytearray(data[last + 1 :])
        elif line is not None:
            line += data
        if line is not None and len(line) > MAX_ROW_BYTES:
            line = None

    with path.open("rb") as handle:
        while True:
            chunk = handle.read(_HASH_CHUNK_BYTES)
            # Bytes of an unfinished character held back from the last chunk (they hold no line end).
            pending = len(decoder.getstate()[0])
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as exc:
                offset = consumed - pending + exc.start
                if offset >= consumed:
                    advance(chunk[: offset - consumed])
                    byte = chunk[offset - consumed]
                    prefix = None if line is None else bytes(line)
                else:  # among the held-back bytes at the end of the current line
                    back = consumed - offset
                    prefix = None if line is None else bytes(line[:-back])
                    byte = line[-back] if line is not None else _byte_at(handle, offset)
                if prefix is not None:
                    prefix = prefix.removeprefix(codecs.BOM_UTF8)
                return _InvalidByte(offset, newlines + 1, prefix, byte)
            if not chunk:
                return None
            advance(chunk)
            consumed += len(chunk)


def _byte_at(handle: BinaryIO, offset: int) -> int:
    handle.seek(offset)
    return handle.read(1)[0]


def _load_parquet(
    path: Path, display_name: str, columns: list[str] | None, limits: ReadLimits, used: Sequence[str] | None = None
) -> Loaded:
    import pyarrow.parquet as pq  # here: reading a CSV file never needs it (0.02 s to import)

    _check_parquet_markers(path, display_name)
    try:
        parquet = pq.ParquetFile(path)
        schema = parquet.schema_arrow
        if parquet.metadata.num_rows == 0:
            raise DatasetError("the file has columns but no data rows", file=display_name)
        if columns:  # a used name the schema repeats is read too, to compare its columns
            columns = [*columns, *(n for n in used or () if schema.names.count(n) > 1 and n not in columns)]
        present = [name for name in columns if name in schema.names] if columns else None
        check_parquet_bounds(parquet.metadata, present, display_name, limits)
        table = _read_parquet_bounded(path, parquet, present, display_name, limits)
        # A categorical's dictionary may list values no row holds; decoded, only real values count.
        table = pa.table(
            [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in table.columns],
            names=table.column_names,
        )
    except (pa.ArrowException, OSError) as exc:
        raise DatasetError(f"cannot read the Parquet file ({exc}); export it again", file=display_name) from None
    return Loaded("parquet", table, tuple(schema.names), schema)


def _read_parquet_bounded(
    path: Path, parquet: pq.ParquetFile, columns: list[str] | None, display_name: str, limits: ReadLimits
) -> pa.Table:
    """Read ``columns`` (None: all) without ever expanding more than ``limits.decompressed_bytes``.

    The metadata bound (check_parquet_bounds) cannot see dictionary expansion: a text column of a
    million rows holding two distinct 1,000-character values is a dictionary page of two values and
    one bit a row, 124 KB on disk and 1 GB decoded. So text columns are read row group by row group
    as dictionaries (what is held is the dictionary and 4 bytes a row, both within the metadata
    bound), each row group's decoded size is summed from its dictionary values' lengths before any
    value is expanded, and the read stops, naming the column, as soon as the total passes the limit.
    """
    import pyarrow.parquet as pq

    if limits.decompressed_bytes is None:
        return parquet.read(columns=columns, use_threads=True)
    wanted = None if columns is None else set(columns)
    fields = [field for field in parquet.schema_arrow if wanted is None or field.name in wanted]
    text = sorted({field.name for field in fields if _is_text(field.type)})
    reader = pq.ParquetFile(path, read_dictionary=text) if text else parquet
    decoded: Counter[str] = Counter()
    groups = []
    for index in range(reader.num_row_groups):
        group = reader.read_row_group(index, columns=columns, use_threads=True)
        for name, column in zip(group.column_names, group.columns, strict=True):
            decoded[name] += sum(_decoded_bytes(chunk) for chunk in column.chunks)
        if decoded.total() > limits.decompressed_bytes:
            name, size = decoded.most_common(1)[0]
            raise DecodedSizeError(
                f"its values take at least {human_size(size)} once decoded, which puts the columns read over "
                f"the limit of {human_size(limits.decompressed_bytes)} (a Parquet dictionary stores each distinct "
                "value once, however many rows repeat it); upload a sample or a part of it, or shorten the values",
                file=display_name,
                column=name,
            )
        groups.append(group)
    return pa.concat_tables(groups) if groups else parquet.read(columns=columns)


def _is_text(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
    )


def _decoded_bytes(chunk: pa.Array[Any]) -> int:
    """What ``chunk`` takes once its dictionary (if any) is expanded, computed without expanding it."""
    if not pa.types.is_dictionary(chunk.type):
        return int(chunk.nbytes)
    import pyarrow.compute as pc

    values = chunk.type.value_type
    rows = len(chunk)
    validity = (rows + 7) // 8
    if _is_text(values):
        # Each value's characters, and its offset (4 bytes, 8 for the large types).
        encoded: Any = chunk  # a DictionaryArray
        lengths: Any = pc.binary_length(encoded.dictionary)
        characters = pc.sum(pc.take(lengths, encoded.indices)).as_py() or 0
        offsets = 8 if pa.types.is_large_string(values) or pa.types.is_large_binary(values) else 4
        return int(characters) + offsets * (rows + 1) + validity
    try:
        width = max(int(values.bit_width) // 8, 1)
    except ValueError:  # not fixed-width (nested): its dictionary and indices, a lower bound
        return int(chunk.nbytes)
    return width * rows + validity


def _check_parquet_markers(path: Path, display_name: str) -> None:
    with path.open("rb") as handle:
        head = handle.read(4)
        handle.seek(max(path.stat().st_size - 4, 0))
        tail = handle.read(4)
    if head != b"PAR1" or tail != b"PAR1":
        looks_like_text = head and all(32 <= b < 127 or b in (9, 10, 13) for b in head)
        hint = "; if it is CSV text, rename it to end in .csv" if looks_like_text else ""
        raise DatasetError(f"this is not a Parquet file (it lacks the 'PAR1' markers){hint}", file=display_name)


def file_sha256(path: Path) -> str:
    """The SHA-256 of a whole file, read in chunks (provenance re-checks)."""
    return sha256_of(path, threading.Event())


def sha256_of(path: Path, stop: threading.Event) -> str:
    digest = hashlib.sha256()
    # One reused buffer rather than a new bytes object per read (large ones are fresh pages from the system).
    buffer = bytearray(_HASH_CHUNK_BYTES)
    with path.open("rb", buffering=0) as handle, memoryview(buffer) as view:
        while not stop.is_set() and (count := handle.readinto(view)):
            digest.update(view[:count])
    return digest.hexdigest()


def check_columns_present(
    columns: Sequence[str],
    declared: Sequence[tuple[str, str]],
    display_name: str,
    *,
    repeats: Mapping[str, int | None] | None = None,
) -> None:
    """Every declared (name, role) is one column of the file: present, and not a repeated name
    unless its columns hold the same values in every row (``repeats``, from :func:`merge_repeats`)."""
    missing = [(name, role) for name, role in declared if name not in columns]
    if not missing:
        _check_unambiguous(columns, declared, display_name, repeats or {})
        return
    listed = ", ".join(f"{quote(name)} ({role})" for name, role in missing)
    available = ", ".join(quote(name) for name in dict.fromkeys(columns))
    message = f"declared columns not in the file: {listed}; the file's columns are {available}"
    hints = []
    for name, _ in missing:
        close = difflib.get_close_matches(name, columns, n=1) or [
            c for c in columns if c.strip().lower() == name.strip().lower()
        ]
        if close:
            hints.append(f"{quote(close[0])} for {quote(name)}")
    if hints:
        message += f" (did you mean {', '.join(hints)}?)"
    raise DatasetError(message, file=display_name, column=missing[0][0])


def _check_unambiguous(
    columns: Sequence[str], declared: Sequence[tuple[str, str]], display_name: str, repeats: Mapping[str, int | None]
) -> None:
    counts = Counter(columns)
    for name, role in declared:
        if counts[name] <= 1 or (name in repeats and repeats[name] is None):
            continue
        row = repeats.get(name)
        differ = "" if row is None else f" whose values differ (first in data row {row:,})"
        raise DatasetError(
            f"the {role} {quote(name)} is ambiguous: the file has {counts[name]} columns with this name "
            f"(columns {positions_of(columns, name)} from the left){differ}; give each column a unique name, "
            "or declare another column",
            file=display_name,
            column=name,
        )
