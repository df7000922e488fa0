"""Dictionary-encode a column once and render its few distinct values as text, so per-row work is
integer codes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from auditportal.fairness.files.tabular.errors import DatasetError, quote
from auditportal.fairness.files.tabular.spec import Codes

_VALUES_SHOWN = 10
ENCODE_THREADS = 4
# Floats whose magnitude is below this are exactly representable as int64 and render as integers.
INTEGRAL_FLOAT_LIMIT = 1e15


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


def encode(column: pa.ChunkedArray[Any], display_name: str, name: str) -> _Coded:
    """Dictionary-encode a column once, then render and merge only its distinct values."""
    already_encoded = pa.types.is_dictionary(column.type) and len(column) > 0
    if pa.types.is_dictionary(column.type) and not already_encoded:
        column = column.cast(column.type.value_type)
    if pa.types.is_null(column.type) or len(column) == 0:
        return _Coded(np.full(len(column), -1, np.int32), np.full(1, -1, np.int32), pa.array([], pa.string()))
    try:
        encoded = column.unify_dictionaries() if already_encoded else pc.dictionary_encode(column).unify_dictionaries()
    except pa.ArrowNotImplementedError:
        raise unusable_type(column.type, display_name, name) from None
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
        rendered = render(dictionary)
    except _NotUtf8:
        raise DatasetError(
            "the column holds bytes that are not valid UTF-8 text; save the data as UTF-8",
            file=display_name,
            column=column,
        ) from None
    except TypeError:
        raise unusable_type(dictionary.type, display_name, column) from None
    merged = cast("pa.DictionaryArray[Any, Any]", pc.dictionary_encode(rendered))
    return merged.dictionary.cast(pa.string()), _indices(merged.indices)


def _indices(indices: pa.Array[Any]) -> Codes:
    """Dictionary indices as int32 codes, null as -1."""
    return to_numpy(cast("pa.Array[Any]", pc.fill_null(indices.cast(pa.int32()), arrow_scalar(-1, pa.int32()))))


def to_numpy(array: pa.Array[Any]) -> Codes:
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


# pyarrow's own constructors (pa.array, pa.scalar, and compute functions given Python values) import
# pandas on their first call, about 0.3 s, to ask whether the value is a pandas object. The reading
# and counting path builds its few arrays and scalars from buffers instead.


def arrow_numbers(values: npt.NDArray[Any]) -> pa.Array[Any]:
    """A (short) one-dimensional numpy array of numbers as a pyarrow array, without pandas."""
    if values.dtype.kind not in "iuf":
        raise TypeError(f"not an array of numbers: {values.dtype}")  # Arrow packs booleans into bits
    kind = pa.from_numpy_dtype(values.dtype)
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values.tobytes())])


def arrow_scalar(value: float, kind: pa.DataType) -> pa.Scalar[Any]:
    """An integer or floating-point pyarrow scalar, without pandas."""
    return cast("pa.Scalar[Any]", arrow_numbers(np.array([value], dtype=kind.to_pandas_dtype()))[0])


def arrow_texts(values: Sequence[str]) -> pa.Array[Any]:
    """Python strings as a pyarrow string array, without pandas."""
    encoded = [value.encode() for value in values]
    offsets = np.zeros(len(encoded) + 1, np.int32)
    np.cumsum([len(value) for value in encoded], out=offsets[1:])
    buffers = [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(pa.string(), len(encoded), buffers)


class _NotUtf8(Exception):
    pass


def render(values: pa.Array[Any]) -> pa.Array[Any]:
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
        return render(values.cast(pa.float64(), safe=False))
    if pa.types.is_floating(kind):
        if pa.types.is_float16(kind):
            values = values.cast(pa.float32())
        integral = pc.and_(pc.equal(pc.floor(values), values), pc.less(pc.abs(values), pa.scalar(INTEGRAL_FLOAT_LIMIT)))
        as_int = pc.if_else(integral, values, pa.scalar(0, values.type)).cast(pa.int64(), safe=False)
        text = pc.if_else(integral, as_int.cast(pa.string()), values.cast(pa.string()))
        return cast("pa.Array[Any]", pc.if_else(pc.is_nan(values), pa.scalar(None, pa.string()), text))
    if pa.types.is_temporal(kind):
        return values.cast(pa.string())
    raise TypeError(kind)


def unusable_type(kind: pa.DataType, display_name: str, name: str) -> DatasetError:
    return DatasetError(
        f"values of type {kind} cannot be used; flatten the column into plain values",
        file=display_name,
        column=name,
    )


def is_numeric(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return bool(
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_decimal(kind)
    )


def as_float64(column: pa.ChunkedArray[Any]) -> pa.ChunkedArray[Any]:
    values = column.cast(pa.float64(), safe=False)
    # NaN is normalised to null, so the trainer's "fill nulls with the mean" covers both.
    return cast("pa.ChunkedArray[Any]", pc.if_else(pc.is_nan(values), pa.scalar(None, pa.float64()), values))


def pylist(texts: pa.Array[Any]) -> list[str]:
    # Rendered distinct values never contain nulls.
    return cast(list[str], texts.to_pylist())


def index_of(texts: pa.Array[Any], value: str) -> int | None:
    index = pc.index(texts, value).as_py()
    return None if index is None or index < 0 else int(index)


def first_row(mask: npt.NDArray[np.bool_]) -> int:
    return int(np.argmax(mask)) + 1


def values_seen(texts: pa.Array[Any]) -> str:
    shown = pc.array_sort_indices(texts)[:_VALUES_SHOWN] if len(texts) else pa.array([], pa.int64())
    listed = ", ".join(quote(value) for value in pylist(texts.take(shown)))
    if len(texts) > _VALUES_SHOWN:
        listed += f", … ({len(texts)} distinct values)"
    return listed
