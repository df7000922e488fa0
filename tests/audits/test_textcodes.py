"""The compiled coding pass gives each distinct byte string one code and counts its rows' cells,
whatever the values' lengths, where they lie in the buffer, and whether the array is a slice."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auditportal.audits import textcodes
from auditportal.audits.textcodes import NULL, TextCodes, dictionary_encode

# Lengths around the 8- and 16-byte words the pass compares by, and values that differ only in the
# middle of a long value (same first and last eight bytes), or only in their length.
TRICKY = [
    "",
    "a",
    "é",
    "1234567",
    "12345678",
    "123456789",
    "123456789abcdef",
    "123456789abcdefg",
    "123456789abcdefgh",
    "head....X....tail",
    "head....Y....tail",
    "head.........tail",
    "a\x00",
    "a\x00\x00",
    "Hispanic or Latino",
    "Native Hawaiian or Other Pacific Islander",
]
values_strategy = st.lists(
    st.one_of(st.sampled_from(TRICKY), st.text(max_size=30), st.none()), min_size=1, max_size=300
)


def _decoded(chunks: pa.ChunkedArray[Any]) -> list[Any]:
    dictionaries: list[Any] = chunks.chunks
    return [value for chunk in dictionaries for value in chunk.dictionary.take(chunk.indices).to_pylist()]


@settings(max_examples=150, deadline=None)
@given(values=values_strategy, cuts=st.lists(st.integers(0, 300), max_size=4), binary=st.booleans())
def test_codes_decode_to_the_values_and_each_value_has_one_code(
    values: list[str | None], cuts: list[int], binary: bool
) -> None:
    array: pa.Array[Any] = pa.array(values, pa.string())
    if binary:
        array = array.cast(pa.binary())
    # Chunks that are slices of one buffer (offset > 0), as a table's batches are.
    edges = sorted({0, len(values), *(min(cut, len(values)) for cut in cuts)})
    column = pa.chunked_array([array.slice(start, end - start) for start, end in itertools.pairwise(edges)], array.type)

    encoded = dictionary_encode(column, threads=2)

    assert encoded is not None
    expected = [value.encode() if isinstance(value, str) else value for value in values]
    assert _decoded(encoded) == expected
    chunks: list[Any] = encoded.chunks
    for chunk in chunks:
        dictionary = chunk.dictionary.to_pylist()
        known = [value for value in dictionary if value is not None]
        assert len(known) == len(set(known)), "a value with two codes"


@settings(max_examples=100, deadline=None)
@given(values=values_strategy, seed=st.integers(0, 2**32 - 1))
def test_counts_are_the_rows_of_each_value_in_each_cell(values: list[str | None], seed: int) -> None:
    array = pa.array(values, pa.string())
    bits = np.random.default_rng(seed).integers(0, 4, len(values))
    table = TextCodes()

    assert table.add(array, bits=bits)

    expected = Counter(zip(values, bits.tolist(), strict=True))
    got: Counter[tuple[str | None, int]] = Counter()
    distinct: list[bytes] = table.values().to_pylist()  # type: ignore[assignment]
    for code, value in enumerate(distinct):
        for cell in range(4):
            if table.counts[code, cell]:
                got[(value.decode(), cell)] = int(table.counts[code, cell])
    for cell in range(4):
        if table.counts[NULL, cell]:
            got[(None, cell)] = int(table.counts[NULL, cell])
    assert got == expected
    assert len(table) == len({value for value in values if value is not None})


def test_values_at_the_very_end_of_the_buffer_are_read_byte_by_byte() -> None:
    # The last values' words would reach past the buffer: they are assembled one byte at a time.
    values = ["x" * 20, "abcdefghijklmnopq", "abc", "abcdefghijklmnopr", "ab"]
    for start in range(len(values)):
        tail = pa.array(values[start:])
        encoded = dictionary_encode(pa.chunked_array([tail]), threads=1)
        assert encoded is not None
        assert _decoded(encoded) == [value.encode() for value in values[start:]]


def test_a_column_is_the_same_as_pyarrows_dictionary_encoding_on_many_blocks() -> None:
    rng = np.random.default_rng(5)
    values = np.array(TRICKY + [f"group {i}" for i in range(200)], dtype=object)
    array = pa.array(values[rng.integers(0, len(values), 50_000)].tolist())
    column = pa.chunked_array([array.slice(i, 1_000) for i in range(0, len(array), 1_000)])

    encoded = dictionary_encode(column, threads=2)

    assert encoded is not None
    assert encoded.cast(pa.string()).equals(pc.dictionary_encode(column).cast(pa.string()))


def test_too_many_distinct_values_are_refused() -> None:
    many = pa.array([str(i) for i in range(textcodes.MAX_VALUES + 1)])
    assert dictionary_encode(pa.chunked_array([many]), threads=1) is None
    assert TextCodes().add(many.slice(0, textcodes.MAX_VALUES), codes=np.empty(textcodes.MAX_VALUES, np.int32))
    table = TextCodes()
    assert not table.add(many, bits=np.zeros(len(many), np.int64))


def test_values_longer_than_the_arena_holds_are_refused() -> None:
    long_values = pa.array(["x" * 1_000 + str(i) for i in range(2_000)])  # about 2 MB of distinct text
    assert not TextCodes().add(long_values, bits=np.zeros(len(long_values), np.int64))


def test_other_types_and_mismatched_lengths_are_programming_errors() -> None:
    table = TextCodes()
    with pytest.raises(TypeError, match="no codes for int64"):
        table.add(pa.array([1, 2]))
    with pytest.raises(TypeError, match="bits are int64"):
        table.add(pa.array(["a"]), bits=np.zeros(1, np.int8))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"cells are 0\.\.3"):
        table.add(pa.array(["a", "b"]), bits=np.array([0, 4]))
    with pytest.raises(ValueError, match="one entry per row"):
        table.add(pa.array(["a", "b"]), codes=np.zeros(1, np.int32))
