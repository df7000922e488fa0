"""What reading a file may cost: rows and decompressed size bounded from a Parquet file's metadata
before its data are read, and the search for a file's first non-UTF-8 byte in one streaming pass."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from auditportal.fairness.files.tabular import (
    DatasetError,
    DatasetSpec,
    ReadLimits,
    check_file,
    inspect_file,
    profile_file,
    read_columns,
)
from tests.datasets.conftest import many_rows_parquet

MAX_BYTES = 1 << 30
SPEC = DatasetSpec(label="label", positive="1", attributes=("gender",))


def test_a_parquet_file_declaring_50_million_rows_is_refused_from_its_metadata(
    tmp_path: Path, no_data_read: None
) -> None:
    path = many_rows_parquet(tmp_path / "huge.parquet", 50_000_000)
    assert path.stat().st_size < 1_000_000  # the file itself is small
    limits = ReadLimits(rows=20_000_000)
    expected = (
        "huge.parquet: the file has 50,000,000 rows, over the limit of 20,000,000 rows; upload a sample or a part of it"
    )
    for call in (
        lambda: check_file(path, display_name="huge.parquet", max_bytes=MAX_BYTES, limits=limits),
        lambda: profile_file(path, display_name="huge.parquet", max_bytes=MAX_BYTES, limits=limits),
        lambda: inspect_file(path, SPEC, display_name="huge.parquet", max_bytes=MAX_BYTES, limits=limits),
        lambda: read_columns(path, SPEC, others=[], display_name="huge.parquet", max_bytes=MAX_BYTES, limits=limits),
    ):
        with pytest.raises(DatasetError) as caught:
            call()
        assert str(caught.value) == expected


def test_a_parquet_file_whose_values_decompress_past_the_limit_is_refused_before_reading(
    tmp_path: Path, no_data_read: None
) -> None:
    # 2 million rows of 8 int64 columns: 128 MiB once decoded, in a file of a few kilobytes.
    path = many_rows_parquet(tmp_path / "wide.parquet", 2_000_000, extra_columns=8)
    limits = ReadLimits(rows=10_000_000, decompressed_bytes=64 * 1024**2)
    with pytest.raises(DatasetError) as caught:
        profile_file(path, display_name="wide.parquet", max_bytes=MAX_BYTES, limits=limits)
    assert str(caught.value).startswith("wide.parquet: its columns take at least 1")
    assert "once decompressed, over the limit of 64.0 MiB; upload a sample or a part of it, or fewer columns" in str(
        caught.value
    )


def test_only_the_columns_read_count_towards_the_decompressed_size(tmp_path: Path) -> None:
    path = many_rows_parquet(tmp_path / "wide.parquet", 2_000_000, extra_columns=8)
    limits = ReadLimits(rows=10_000_000, decompressed_bytes=64 * 1024**2)
    # The label and the attribute (Parquet stores both as 4-byte integers) of 2 million rows: 15.3 MiB.
    inspection = inspect_file(path, SPEC, display_name="wide.parquet", max_bytes=MAX_BYTES, limits=limits)
    assert inspection.num_rows == 2_000_000
    tight = ReadLimits(rows=10_000_000, decompressed_bytes=8 * 1024**2)
    with pytest.raises(DatasetError, match=r"the columns read take at least 15\.3 MiB once decompressed"):
        inspect_file(path, SPEC, display_name="wide.parquet", max_bytes=MAX_BYTES, limits=tight)


def test_a_parquet_file_within_the_limits_reads_as_before(tmp_path: Path) -> None:
    path = many_rows_parquet(tmp_path / "ok.parquet", 3000)
    limits = ReadLimits(rows=3000, decompressed_bytes=1024**2)
    assert check_file(path, display_name="ok.parquet", max_bytes=MAX_BYTES, limits=limits) == "parquet"
    assert profile_file(path, display_name="ok.parquet", max_bytes=MAX_BYTES, limits=limits).num_rows == 3000


def test_a_csv_file_over_the_row_limit_is_refused_with_its_row_count(tmp_path: Path) -> None:
    path = tmp_path / "loans.csv"
    path.write_text("gender,label\n" + "female,1\n" * 1001, encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        profile_file(path, display_name="loans.csv", max_bytes=MAX_BYTES, limits=ReadLimits(rows=1000))
    assert str(caught.value) == (
        "loans.csv: the file has 1,001 rows, over the limit of 1,000 rows; upload a sample or a part of it"
    )
    # check_file reads no data of a CSV file: its rows are counted when it is parsed.
    assert check_file(path, display_name="loans.csv", max_bytes=MAX_BYTES, limits=ReadLimits(rows=1000)) == "csv"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("a.parquet", b"label,gender\n1,f\n", "a.parquet: this is not a Parquet file (it lacks the 'PAR1' markers)"),
        ("a.csv", b"PAR1....PAR1", "a.csv: this is a Parquet file, not CSV text"),
        ("a.csv", b"", "a.csv: the file is empty (0 bytes)"),
        ("a.xlsx", b"PK\x03\x04", "a.xlsx: unsupported file type '.xlsx'"),
    ],
)
def test_the_cheap_checks_name_the_file(tmp_path: Path, name: str, content: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DatasetError) as caught:
        check_file(path, display_name=name, max_bytes=MAX_BYTES, limits=ReadLimits())
    assert str(caught.value).startswith(message)


# --------------------------------------------------------------------------- first invalid UTF-8 byte


def _latin1_error(path: Path) -> DatasetError:
    with pytest.raises(DatasetError) as caught:
        inspect_file(path, DatasetSpec(label="label", positive="1", attributes=("gender",)), display_name=path.name,
                     max_bytes=MAX_BYTES)  # fmt: skip
    return caught.value


def test_the_first_invalid_byte_is_found_without_holding_the_file_in_memory(tmp_path: Path) -> None:
    # 48 MiB of good rows, then one Latin-1 byte: the search must not read what precedes it at once.
    line = b"1,female,Berlin and some more text to make the row longer\n"
    rows = (48 * 1024**2) // len(line)
    path = tmp_path / "credit.csv"
    with path.open("wb") as handle:
        handle.write(b"label,gender,city\n")
        for _ in range(rows // 10_000):
            handle.write(line * 10_000)
        handle.write("0,male,Köln\n".encode("latin-1"))
    written = rows // 10_000 * 10_000
    tracemalloc.start()
    try:
        error = _latin1_error(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (error.row, error.column) == (written + 1, "city")
    assert "byte 0xF6 is not valid UTF-8" in error.message
    # pyarrow's buffers are not Python objects; what Python held at once stayed a few chunks.
    assert peak < 8 * 1024**2, f"peak {peak / 1024**2:.1f} MiB"


def test_an_invalid_byte_right_after_a_character_split_across_chunks_is_placed_exactly(tmp_path: Path) -> None:
    # The chunk boundary (1 MiB) falls after the lead byte 0xC3 of a two-byte character whose second
    # byte is missing: the bad byte is the held-back lead byte, in the previous chunk.
    header = b"label,gender,city\n"
    filler = b"1,female,Berlin\n"
    body = filler * ((1024**2 - len(header)) // len(filler))
    row = b"0,male,M"
    pad = 1024**2 - len(header) - len(body) - len(row) - 1
    row += b"x" * pad + b"\xc3"  # the chunk ends with the lead byte
    path = tmp_path / "credit.csv"
    path.write_bytes(header + body + row + b"ln\n" + filler)
    assert len(header + body + row) == 1024**2
    error = _latin1_error(path)
    assert (error.row, error.column) == (body.count(b"\n") + 1, "city")
    assert "byte 0xC3 is not valid UTF-8" in error.message


def test_a_good_character_across_the_chunk_boundary_is_not_taken_for_an_error(tmp_path: Path) -> None:
    header = b"label,gender,city\n"
    filler = b"1,female,Berlin\n"
    body = filler * ((1024**2 - len(header)) // len(filler))
    row = b"0,male,K"
    row += b"x" * (1024**2 - len(header) - len(body) - len(row) - 1) + "ö".encode()  # split: C3 | B6
    bad = "1,female,Düsseldorf\n".encode("latin-1")
    path = tmp_path / "credit.csv"
    path.write_bytes(header + body + row + b"ln\n" + bad)
    error = _latin1_error(path)
    assert (error.row, error.column) == (body.count(b"\n") + 2, "city")
    assert "byte 0xFC is not valid UTF-8" in error.message
