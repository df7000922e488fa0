"""Codes for the distinct values of a text column, and confusion cells counted per code, in one
compiled pass over the column's bytes (numba; no Django).

pyarrow's CSV reader can dictionary-encode a text column while it parses, but on a 10-million-row
file that costs about a fifth of the whole read: it hashes every value in a general-purpose table.
The audit instead reads a sensitive attribute as plain bytes and, in :func:`_run`, looks each value
up in a small open-addressing table keyed on the value's first and last eight bytes and its length
(values of up to 16 bytes are compared by those alone; longer ones byte by byte), adding the row to
its code's confusion cell as it goes: a few nanoseconds a row, on two threads.

Codes are given in order of first appearance, per :class:`TextCodes` (one per column and thread),
and a column with more than :data:`MAX_VALUES` distinct values, or more than :data:`_ARENA_BYTES`
of them, is refused (``add`` answers False): the caller then takes its general path.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import numba
import numpy as np
import numpy.typing as npt
import pyarrow as pa

MAX_VALUES = 4096
NULL = MAX_VALUES  # the code of a null row: the last row of ``TextCodes.counts``
_SLOTS = 4 * MAX_VALUES  # a power of two; the table stays at most a quarter full
_SLOT_SHIFT = np.uint64(64 - 14)  # the top 14 bits of the hash pick the slot
_ARENA_BYTES = 1 << 20
_NO_BITS = np.zeros(0, np.int64)
_NO_CODES = np.zeros(0, np.int32)
_NO_BYTES = np.zeros(0, np.uint8)

Ints = npt.NDArray[np.int64]


def _jit(function: Any) -> Any:
    """Compiled without the GIL, so two threads count at once; cached on disk where numba can
    write (beside this file, or under ``NUMBA_CACHE_DIR``), compiled in each process otherwise."""
    try:
        return numba.njit(nogil=True, cache=True)(function)
    except RuntimeError:  # no writable cache location
        return numba.njit(nogil=True)(function)


@_jit
def _run(
    offsets: Any,
    data: Any,
    words: Any,
    validity: Any,
    validity_offset: int,
    bits: Any,
    codes: Any,
    counts: Any,
    slots: Any,
    heads: Any,
    tails: Any,
    starts: Any,
    lengths: Any,
    arena: Any,
    state: Any,
) -> int:
    """Code every row of one text array; 0, or -1 when the table or the arena is full, -2 for a
    cell outside 0..3.

    ``offsets``/``data``: the array's value offsets (already shifted by its offset) and bytes;
    ``words``: the same bytes as whole little-endian uint64 words. ``validity``: its null bitmap
    (empty without nulls), whose bit ``validity_offset + i`` is row i's. ``bits`` (or empty): row
    i's confusion cell 0..3, added to ``counts[code]``; ``codes`` (or empty): receives row i's code.
    The table: ``slots`` hold codes (-1 = free); per code its first and last eight bytes, its place
    and length in ``arena``; ``state`` = [codes given, arena bytes used].
    """
    n_words = len(words)
    count_cells = len(bits) > 0
    keep_codes = len(codes) > 0
    has_nulls = len(validity) > 0
    for i in range(len(offsets) - 1):
        if count_cells and not 0 <= bits[i] <= 3:  # numba does not check bounds: a bad cell would write astray
            return -2
        if has_nulls:
            position = validity_offset + i
            if not (validity[position >> 3] >> (position & 7)) & 1:
                if count_cells:
                    counts[NULL, bits[i]] += 1
                if keep_codes:
                    codes[i] = NULL
                continue
        start = offsets[i]
        size = offsets[i + 1] - start
        # The first and last (up to) eight bytes as integers, zero-padded; an unaligned load is
        # two aligned words shifted together, and the file's last bytes are taken one by one.
        # Written out for both rather than in a helper: a numba function taking the arrays, even
        # with inline="always", made this pass about 7x slower (230 ms against 33 ms on 10M rows).
        head = np.uint64(0)
        tail = np.uint64(0)
        if size > 0:
            word = start >> 3
            if word + 1 < n_words:
                shift = np.uint64((start & 7) * 8)
                head = words[word] >> shift
                if shift:
                    head |= words[word + 1] << (np.uint64(64) - shift)
            else:
                for k in range(min(8, size)):
                    head |= np.uint64(data[start + k]) << np.uint64(8 * k)
            if size < 8:
                head &= (np.uint64(1) << np.uint64(8 * size)) - np.uint64(1)
            elif size > 8:
                last = start + size - 8
                word = last >> 3
                if word + 1 < n_words:
                    shift = np.uint64((last & 7) * 8)
                    tail = words[word] >> shift
                    if shift:
                        tail |= words[word + 1] << (np.uint64(64) - shift)
                else:
                    for k in range(8):
                        tail |= np.uint64(data[last + k]) << np.uint64(8 * k)
        mixed = (head ^ (tail * np.uint64(0xC2B2AE3D27D4EB4F)) ^ np.uint64(size)) * np.uint64(0x9E3779B97F4A7C15)
        slot = np.int64(mixed >> _SLOT_SHIFT)
        while True:
            code = np.int64(slots[slot])
            if code < 0:  # a new value
                code = state[0]
                used = state[1]
                if code >= MAX_VALUES or used + size > len(arena):
                    return -1
                slots[slot] = code
                heads[code] = head
                tails[code] = tail
                starts[code] = used
                lengths[code] = size
                for k in range(size):
                    arena[used + k] = data[start + k]
                state[0] = code + 1
                state[1] = used + size
                break
            if heads[code] == head and tails[code] == tail and lengths[code] == size:
                if size <= 16:  # head and tail cover every byte
                    break
                stored = starts[code]
                same = True
                for k in range(8, size - 8):
                    if arena[stored + k] != data[start + k]:
                        same = False
                        break
                if same:
                    break
            slot = (slot + 1) & (_SLOTS - 1)
        if count_cells:
            counts[code, bits[i]] += 1
        if keep_codes:
            codes[i] = code
    return 0


class TextCodes:
    """The distinct values of one text column seen so far, each with its code (order of first
    appearance) and, when counting, its confusion cells."""

    def __init__(self) -> None:
        self._slots = np.full(_SLOTS, -1, np.int32)
        self._heads = np.zeros(MAX_VALUES, np.uint64)
        self._tails = np.zeros(MAX_VALUES, np.uint64)
        self._starts = np.zeros(MAX_VALUES, np.int64)
        self._lengths = np.zeros(MAX_VALUES, np.int64)
        self._arena = np.zeros(_ARENA_BYTES, np.uint8)
        self._state = np.zeros(2, np.int64)
        self.counts: Ints = np.zeros((MAX_VALUES + 1, 4), np.int64)  # per code, then NULL: the 4 cells

    def add(
        self,
        array: pa.Array[Any],
        *,
        bits: Ints | None = None,
        codes: npt.NDArray[np.int32] | None = None,
    ) -> bool:
        """Code the rows of ``array`` (a string or binary array); add row i to ``counts[code,
        bits[i]]`` and/or store its code in ``codes[i]``. False when there are too many values:
        then nothing more can be added."""
        if not (pa.types.is_string(array.type) or pa.types.is_binary(array.type)):
            raise TypeError(f"no codes for {array.type} values")
        length = len(array)
        if (bits is not None and len(bits) != length) or (codes is not None and len(codes) != length):
            raise ValueError("bits and codes need one entry per row")
        if bits is not None and bits.dtype != np.int64:
            raise TypeError("bits are int64")  # one compiled specialisation
        validity, offsets, data = (cast(memoryview | None, buffer) for buffer in array.buffers())
        positions = np.frombuffer(offsets, np.int32, length + 1, array.offset * 4) if offsets else np.zeros(1, np.int32)
        raw = np.frombuffer(data, np.uint8) if data is not None else _NO_BYTES
        words = raw[: len(raw) // 8 * 8].view(np.uint64)
        nulls = np.frombuffer(validity, np.uint8) if validity is not None and array.null_count else _NO_BYTES
        status = _run(
            positions,
            raw,
            words,
            nulls,
            array.offset,
            _NO_BITS if bits is None else bits,
            _NO_CODES if codes is None else codes,
            self.counts,
            self._slots,
            self._heads,
            self._tails,
            self._starts,
            self._lengths,
            self._arena,
            self._state,
        )
        if status == -2:
            raise ValueError("confusion cells are 0..3")
        return bool(status == 0)

    def __len__(self) -> int:
        return int(self._state[0])

    def values(self) -> pa.Array[Any]:
        """The distinct values, in code order, as binary."""
        count = len(self)
        offsets = np.zeros(count + 1, np.int32)
        np.cumsum(self._lengths[:count], out=offsets[1:])
        data = self._arena[: int(self._state[1])].copy()
        return pa.Array.from_buffers(pa.binary(), count, [None, _buffer(offsets), _buffer(data)])


def dictionary_encode(column: pa.ChunkedArray[Any], *, threads: int = 2) -> pa.ChunkedArray[Any] | None:
    """``pc.dictionary_encode`` of a string or binary column, on ``threads`` threads: one chunk of
    int32 indices per input chunk, over a binary dictionary (one per thread's share of the chunks,
    with a last entry of null when the column has nulls). None when there are too many values."""
    chunks = column.chunks
    threads = max(1, min(threads, len(chunks)))
    edges = [len(chunks) * i // threads for i in range(threads + 1)]
    parts = [chunks[edges[i] : edges[i + 1]] for i in range(threads)]
    if threads == 1:
        encoded = [_encode_part(parts[0])]
    else:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="textcodes") as pool:
            encoded = list(pool.map(_encode_part, parts))
    if any(part is None for part in encoded):
        return None
    arrays: list[Any] = [array for part in encoded for array in part or ()]
    kind: Any = pa.dictionary(pa.int32(), pa.binary())
    return pa.chunked_array(arrays, kind)


def _encode_part(chunks: Sequence[pa.Array[Any]]) -> list[pa.DictionaryArray[Any, Any]] | None:
    table = TextCodes()
    per_chunk = []
    for chunk in chunks:
        codes = np.empty(len(chunk), np.int32)
        if not table.add(chunk, codes=codes):
            return None
        per_chunk.append(codes)
    values = table.values()
    if any(chunk.null_count for chunk in chunks):
        values = pa.concat_arrays([values, pa.nulls(1, pa.binary())])
        for codes in per_chunk:
            codes[codes == NULL] = len(table)
    return [
        pa.DictionaryArray.from_arrays(
            pa.Array.from_buffers(pa.int32(), len(codes), [None, _buffer(codes)]), values, safe=False
        )
        for codes in per_chunk
    ]


def _buffer(array: npt.NDArray[Any]) -> pa.Buffer:
    """A pyarrow buffer over a numpy array's memory, without a copy."""
    return pa.py_buffer(cast(Any, array))
