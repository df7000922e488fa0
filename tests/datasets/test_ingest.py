from __future__ import annotations

import dataclasses
import hashlib
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditportal.fairness.files.tabular import (
    DEFAULT_UNKNOWN_TOKENS,
    AttributeInfo,
    DatasetError,
    DatasetSpec,
    FeatureInfo,
    GroupStat,
    Inspection,
    check_file_name,
    inspect_file,
    load_normalized,
    profile_file,
    read_columns,
    read_labelled_columns,
)

MAX_BYTES = 10 * 2**20
SPEC = DatasetSpec(label="label", positive="1", attributes=("gender",))

CREDIT = """\
income,purpose,gender,age_group,label
100.5,car,female,18-29,1
200.0,car,male,30-44,0
150.25,house,Unknown,18-29,1
120.0,car,female,,0
90.0,house,-1,30-44,0
300.0,car,male,18-29,1
80.0,house,female,65+,1
110.0,car,,30-44,0
"""
CREDIT_SPEC = DatasetSpec(label="label", positive="1", attributes=("gender", "age_group"))


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def write_parquet(tmp_path: Path, name: str, table: pa.Table) -> Path:
    path = tmp_path / name
    pq.write_table(table, path)
    return path


def inspect(path: Path, spec: DatasetSpec = SPEC, *, max_bytes: int = MAX_BYTES) -> Inspection:
    return inspect_file(path, spec, display_name=path.name, max_bytes=max_bytes)


def failure(call: Callable[[], Any]) -> DatasetError:
    with pytest.raises(DatasetError) as caught:
        call()
    return caught.value


def stats_of(inspection: Inspection, attribute: str) -> dict[str | None, tuple[int, int, int]]:
    return {g.group: (g.rows, g.positives, g.negatives) for g in inspection.groups if g.attribute == attribute}


# --------------------------------------------------------------------------- file names


@pytest.mark.parametrize("name", ["credit-2026.csv", "Kredit Daten.CSV", "scores.parquet", "scores.pq"])
def test_it_accepts_plain_file_names(name: str) -> None:
    assert check_file_name(name) == name


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("", "(no file name): the file name is empty"),
        ("   ", "   : the file name is empty"),
        ("../credit.csv", "../credit.csv: the file name contains a path separator"),
        ("data/credit.csv", "data/credit.csv: the file name contains a path separator ('/' or '\\')"),
        ("C:\\data\\credit.csv", "C:\\data\\credit.csv: the file name contains a path separator"),
        ("credit..csv", "credit..csv: the file name contains '..'"),
        (".credit.csv", ".credit.csv: the file name starts with a dot"),
        ("cred\x00it.csv", "cred\\x00it.csv: the file name contains control characters ('\\x00')"),
        ("credit\n.csv", "credit\\n.csv: the file name contains control characters ('\\n')"),
        ("invoice\u202evsc.csv", "invoice\\u202evsc.csv: the file name contains control characters ('\\u202e')"),
        ("a" * 197 + ".csv", "the file name is 201 characters long, more than the limit of 200"),
        ("credit.xlsx", "credit.xlsx: unsupported file type '.xlsx'; upload a .csv file (comma-separated, UTF-8)"),
        ("credit", "credit: the file name has no extension"),
    ],
)
def test_it_rejects_path_like_and_hostile_file_names(name: str, expected: str) -> None:
    assert expected in str(failure(lambda: check_file_name(name)))


# --------------------------------------------------------------------------- unreadable files


def test_it_rejects_an_empty_file(tmp_path: Path) -> None:
    error = failure(lambda: inspect(write(tmp_path, "credit.csv", b"")))
    assert str(error).startswith("credit.csv: the file is empty (0 bytes)")
    assert (error.file, error.row, error.column) == ("credit.csv", None, None)


def test_it_rejects_a_csv_with_a_header_but_no_rows(tmp_path: Path) -> None:
    error = failure(lambda: inspect(write(tmp_path, "credit.csv", "gender,label\n")))
    assert str(error) == "credit.csv: the file has a header line but no data rows"


def test_it_rejects_a_parquet_file_without_rows(tmp_path: Path) -> None:
    path = write_parquet(tmp_path, "credit.parquet", pa.table({"gender": pa.array([], pa.string())}))
    assert str(failure(lambda: inspect(path))) == "credit.parquet: the file has columns but no data rows"


def test_it_rejects_a_csv_that_is_really_parquet(tmp_path: Path) -> None:
    parquet = write_parquet(tmp_path, "x.parquet", pa.table({"label": [1, 0], "gender": ["f", "m"]}))
    path = write(tmp_path, "credit.csv", parquet.read_bytes())
    message = str(failure(lambda: inspect(path)))
    assert message == "credit.csv: this is a Parquet file, not CSV text; rename it to end in .parquet"


def test_it_rejects_a_binary_file_named_csv(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", b"label,gender\n1,\x00\x01\x02\n")
    assert "credit.csv: this is not CSV text: it contains binary data" in str(failure(lambda: inspect(path)))


def test_it_rejects_an_excel_workbook_named_csv(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", b"PK\x03\x04\x14\x00\x06\x00rest-of-a-zip")
    message = str(failure(lambda: inspect(path)))
    assert message.startswith("credit.csv: this is an Excel workbook or a ZIP archive, not CSV text")


def test_it_rejects_a_utf16_file(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", "label,gender\n1,f\n".encode("utf-16"))
    assert str(failure(lambda: inspect(path))) == "credit.csv: the file is UTF-16 encoded, not UTF-8; save it as UTF-8"


def test_it_rejects_a_parquet_file_that_is_csv_text(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.parquet", "label,gender\n1,f\n")
    message = str(failure(lambda: inspect(path)))
    assert message == (
        "credit.parquet: this is not a Parquet file (it lacks the 'PAR1' markers); "
        "if it is CSV text, rename it to end in .csv"
    )


def test_it_rejects_a_corrupted_parquet_file(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.parquet", b"PAR1" + b"\x07" * 64 + b"PAR1")
    assert str(failure(lambda: inspect(path))).startswith("credit.parquet: cannot read the Parquet file (")


def test_it_rejects_an_unsupported_file_type(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.xlsx", "label,gender\n1,f\n")
    assert str(failure(lambda: inspect(path))).startswith("credit.xlsx: unsupported file type '.xlsx'")


def test_it_rejects_a_semicolon_separated_file(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", "income;gender;label\n1,5;female;1\n2,5;male;0\n")
    assert str(failure(lambda: inspect(path))) == (
        "credit.csv: the file looks semicolon-separated (';'), but the portal accepts comma-separated CSV "
        "only; export it again with ',' as the separator"
    )


def test_it_rejects_a_tab_separated_file(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", "income\tgender\tlabel\n1.5\tfemale\t1\n")
    message = str(failure(lambda: inspect(path)))
    assert "the file looks tab-separated ('\\t')" in message
    assert "accepts comma-separated CSV only" in message


def test_it_names_the_row_and_column_of_a_latin1_byte(tmp_path: Path) -> None:
    content = "label,gender,city\n1,female,Berlin\n0,male,Köln\n".encode("latin-1")
    error = failure(lambda: inspect(write(tmp_path, "credit.csv", content)))
    assert (error.row, error.column) == (2, "city")
    assert str(error) == (
        "credit.csv, row 2, column 'city': byte 0xF6 is not valid UTF-8; "
        "the file is not UTF-8 (e.g. Latin-1): save it as UTF-8"
    )


def test_it_finds_a_latin1_byte_far_into_a_large_file(tmp_path: Path) -> None:
    # Past pyarrow's first block, where the column's type has already been inferred as text.
    rows = 200_000
    content = b"label,gender,city\n" + b"1,female,Berlin\n" * rows + "0,male,Düsseldorf\n".encode("latin-1")
    error = failure(lambda: inspect(write(tmp_path, "credit.csv", content)))
    assert (error.row, error.column) == (rows + 1, "city")
    assert "byte 0xFC is not valid UTF-8" in error.message


def test_it_reports_a_latin1_byte_in_the_header(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", "label,geschlecht,größe\n1,f,2\n".encode("latin-1"))
    error = failure(lambda: inspect(path))
    assert error.row is None
    assert str(error).startswith("credit.csv: the header line: byte 0xF6 is not valid UTF-8")


def test_it_names_the_row_with_too_many_fields(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", "income,gender,label\n1.5,female,1\n2,5,male,0\n3,male,1\n")
    error = failure(lambda: inspect(path))
    assert error.row == 2
    assert str(error) == (
        "credit.csv, row 2: this row has 4 fields but the header has 3 columns (the row starts '2,5,male,0'); "
        "quote values that contain commas"
    )


def test_it_names_the_row_with_too_few_fields(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", "income,gender,label\n1.5,female,1\n2,male,0\n3,male\n")
    error = failure(lambda: inspect(path))
    assert error.row == 3
    assert "this row has 2 fields but the header has 3 columns" in error.message


def test_it_points_at_an_unclosed_quote(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", 'gender,label\nf,1\n"m,0\n')
    error = failure(lambda: inspect(path))
    assert str(error) == (
        "credit.csv, row 2: this row has 1 field but the header has 2 columns (the row starts '\"m,0'); "
        "it has an unclosed quote ('\"'): close the quoted value or remove the quote"
    )


def test_it_reads_crlf_line_endings_blank_lines_and_quoted_line_breaks(tmp_path: Path) -> None:
    content = 'gender,note,label\r\nf,"two\r\nlines",1\r\n\r\nm,"a, b",0\r\n'
    inspection = inspect(write(tmp_path, "credit.csv", content))
    assert (inspection.num_rows, inspection.attributes) == (2, (AttributeInfo("gender", ("f", "m"), 0),))


def test_it_refuses_a_declared_column_whose_name_is_repeated(tmp_path: Path) -> None:
    # Repeated names the declaration does not use are accepted (tests/datasets/test_real_world_files.py).
    # Identical columns of one name are one column (tests/fairness/test_repeated_columns.py); these differ.
    path = write(tmp_path, "credit.csv", "gender,label,gender,age,age,age\nf,1,f,1,2,3\nm,0,f,1,2,3\n")
    error = failure(lambda: inspect(path))
    assert (error.column, error.row) == ("gender", None)
    assert str(error) == (
        "credit.csv, column 'gender': the sensitive attribute 'gender' is ambiguous: the file has 2 columns "
        "with this name (columns 1 and 3 from the left) whose values differ (first in data row 2); give each column "
        "a unique name, or declare another column"
    )


# --------------------------------------------------------------------------- declared columns


def test_it_lists_the_file_columns_when_a_declared_column_is_missing(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", CREDIT)
    spec = DatasetSpec(label="lable", positive="1", attributes=("Gender",))
    error = failure(lambda: inspect(path, spec))
    assert error.column == "lable"
    assert str(error) == (
        "credit.csv, column 'lable': declared columns not in the file: 'lable' (label), 'Gender' (sensitive "
        "attribute); the file's columns are 'income', 'purpose', 'gender', 'age_group', 'label' "
        "(did you mean 'label' for 'lable', 'gender' for 'Gender'?)"
    )


def test_it_reports_a_missing_feature_column(tmp_path: Path) -> None:
    spec = dataclasses.replace(SPEC, features=("income", "salary"))
    error = failure(lambda: inspect(write(tmp_path, "credit.csv", CREDIT), spec))
    assert error.column == "salary"
    assert "declared columns not in the file: 'salary' (feature)" in error.message


def test_it_rejects_a_label_that_is_also_an_attribute(tmp_path: Path) -> None:
    spec = DatasetSpec(label="gender", positive="female", attributes=("gender", "age_group"))
    error = failure(lambda: inspect(write(tmp_path, "credit.csv", CREDIT), spec))
    assert str(error) == (
        "credit.csv, column 'gender': 'gender' is declared as both the label and a sensitive attribute; "
        "the label must be a separate column"
    )


def test_it_rejects_a_label_that_is_also_a_feature(tmp_path: Path) -> None:
    spec = dataclasses.replace(SPEC, features=("income", "label"))
    error = failure(lambda: inspect(write(tmp_path, "credit.csv", CREDIT), spec))
    assert "'label' is declared as both the label and a feature" in str(error)


def test_it_requires_at_least_one_attribute(tmp_path: Path) -> None:
    spec = DatasetSpec(label="label", positive="1", attributes=())
    error = failure(lambda: inspect(write(tmp_path, "credit.csv", CREDIT), spec))
    assert str(error).startswith("credit.csv: declare at least one sensitive attribute")


def test_it_rejects_a_feature_with_a_reserved_name(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", "_target,gender,label\n1,f,1\n")
    error = failure(lambda: inspect(path))
    assert error.column == "_target"
    assert "the column name '_target' is reserved" in error.message


# --------------------------------------------------------------------------- label


def test_it_names_the_value_that_makes_the_label_non_binary(tmp_path: Path) -> None:
    content = "gender,label\nf,1\nm,0\nf,1\nm,maybe\nf,0\nm,maybe\n"
    error = failure(lambda: inspect(write(tmp_path, "credit.csv", content)))
    assert (error.row, error.column) == (4, "label")
    assert str(error) == (
        "credit.csv, row 4, column 'label': value 'maybe' makes the label non-binary "
        "(values seen: '0', '1', 'maybe'); the label must have exactly two values"
    )


def test_it_blames_the_value_that_is_not_the_usual_partner_of_the_positive_one(tmp_path: Path) -> None:
    content = "gender,label\nf,yes\nm,maybe\nf,no\n"
    spec = dataclasses.replace(SPEC, positive="yes")
    error = failure(lambda: inspect(write(tmp_path, "credit.csv", content), spec))
    assert error.row == 2
    assert error.message.startswith("value 'maybe' makes the label non-binary (values seen: 'maybe', 'no', 'yes')")


def test_it_blames_the_rare_value_even_when_it_comes_first(tmp_path: Path) -> None:
    content = "gender,label\nf,2\nm,0\nf,1\nm,0\nf,1\n"
    error = failure(lambda: inspect(write(tmp_path, "credit.csv", content)))
    assert error.row == 1
    assert error.message.startswith("value '2' makes the label non-binary")


def test_it_lists_the_label_values_when_the_positive_value_is_absent(tmp_path: Path) -> None:
    spec = dataclasses.replace(SPEC, positive=" yes ")
    error = failure(lambda: inspect(write(tmp_path, "credit.csv", CREDIT), spec))
    assert str(error) == (
        "credit.csv, column 'label': the positive value 'yes' does not occur in the label "
        "(values seen: '0', '1'); choose one of these"
    )


@pytest.mark.parametrize("missing", ["", "  ", "NA"])
def test_it_names_the_first_row_with_a_missing_label(tmp_path: Path, missing: str) -> None:
    content = f"gender,label\nf,1\nm,0\nf,{missing}\nm,\n"
    error = failure(lambda: inspect(write(tmp_path, "credit.csv", content)))
    assert str(error) == "credit.csv, row 3, column 'label': the label is missing; every row needs a label value"


def test_it_rejects_a_missing_label_in_a_parquet_file(tmp_path: Path) -> None:
    table = pa.table({"gender": ["f", "m", "f"], "label": pa.array([1.0, None, float("nan")])})
    error = failure(lambda: inspect(write_parquet(tmp_path, "credit.parquet", table)))
    assert (error.row, error.column) == (2, "label")


# --------------------------------------------------------------------------- attributes


def test_it_rejects_an_attribute_with_too_many_groups(tmp_path: Path) -> None:
    content = "zip,label\n10115,1\n10117,0\n20095,1\n80331,0\n-1,1\nunknown,0\n"
    spec = DatasetSpec(label="label", positive="1", attributes=("zip",), max_groups=3)
    error = failure(lambda: inspect(write(tmp_path, "credit.csv", content), spec))
    assert error.column == "zip"
    assert error.message.startswith("the sensitive attribute has 4 known groups, more than the limit of 3;")


def test_it_accepts_an_attribute_with_exactly_max_groups(tmp_path: Path) -> None:
    content = "zip,label\n10115,1\n10117,0\n20095,1\n-1,1\n"
    spec = DatasetSpec(label="label", positive="1", attributes=("zip",), max_groups=3)
    assert inspect(write(tmp_path, "credit.csv", content), spec).attributes[0].groups == ("10115", "10117", "20095")


def test_it_refuses_an_attribute_that_is_entirely_unknown(tmp_path: Path) -> None:
    # It has no group to compare: registered, every experiment on it would judge nothing (issue 13).
    content = "race,label\nunknown,1\n,0\n-1,1\nUNKNOWN,0\n"
    spec = DatasetSpec(label="label", positive="1", attributes=("race",))
    error = failure(lambda: inspect(write(tmp_path, "credit.csv", content), spec))
    assert (error.column, error.row) == ("race", None)
    assert str(error) == (
        "credit.csv, column 'race': every value of the sensitive attribute is unknown (values seen: '', '-1', "
        "'UNKNOWN', 'unknown'), so it has no group to compare; declare another column, or change the values "
        "that mean unknown"
    )


def test_it_rejects_a_file_over_the_size_limit(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", "gender,label\n" + "female,1\n" * 300)
    error = failure(lambda: inspect(path, max_bytes=1024))
    assert str(error).startswith("credit.csv: the file is 2.6 KiB, over the limit of 1.0 KiB;")


def test_it_rejects_an_oversized_file_in_the_profile_step_too(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", "gender,label\n" + "female,1\n" * 300)
    error = failure(lambda: profile_file(path, display_name="credit.csv", max_bytes=1000))
    assert error.message.startswith("the file is 2.6 KiB, over the limit of 1000 bytes;")


# --------------------------------------------------------------------------- normalisation


@pytest.mark.parametrize(
    ("column", "positive"),
    [
        (pa.array([1, 0, 1, 0], pa.int64()), "1"),
        (pa.array([1, 0, 1, 0], pa.int8()), " 1 "),
        (pa.array([1.0, 0.0, 1.0, 0.0]), "1"),
        (pa.array([1.0, 0.0, 1.0, 0.0]), "1.0"),
        (pa.array([1.0, 0.0, 1.0, 0.0], pa.float32()), "1"),
        (pa.array([" 1", "0 ", "1", "0"]), "1"),
        (pa.array(["yes", "no", "yes", "no"]), "yes"),
        (pa.array([True, False, True, False]), "true"),
        (pa.array([True, False, True, False]), "True"),
        (pa.array([1, 0, 1, 0]).dictionary_encode(), "1"),
    ],
)
def test_it_matches_the_positive_value_as_text_whatever_the_label_type(
    tmp_path: Path, column: pa.Array[Any], positive: str
) -> None:
    table = pa.table({"gender": ["f", "m", "m", "f"], "label": column})
    spec = dataclasses.replace(SPEC, positive=positive)
    inspection = inspect(write_parquet(tmp_path, "credit.parquet", table), spec)
    assert (inspection.positives, inspection.negatives) == (2, 2)
    assert load_normalized(tmp_path / "credit.parquet", spec, display_name="x").column("_target").to_pylist() == [
        1,
        0,
        1,
        0,
    ]


def test_it_treats_minus_one_unknown_and_nan_as_unknown(tmp_path: Path) -> None:
    table = pa.table(
        {
            "age": pa.array([30.0, -1.0, float("nan"), None, 30.0, 45.0]),
            "gender": pa.array(["f", " Unknown ", "UNKNOWN", "nan", "", "m"]),
            "label": [1, 0, 1, 0, 1, 0],
        }
    )
    spec = DatasetSpec(label="label", positive="1", attributes=("age", "gender"))
    inspection = inspect(write_parquet(tmp_path, "credit.parquet", table), spec)
    assert inspection.attributes == (AttributeInfo("age", ("30", "45"), 3), AttributeInfo("gender", ("f", "m"), 4))


def test_it_renders_integral_floats_like_integers(tmp_path: Path) -> None:
    table = pa.table({"age": [30.0, 30.5, 1e20], "label": [1, 0, 1]})
    spec = DatasetSpec(label="label", positive="1", attributes=("age",))
    inspection = inspect(write_parquet(tmp_path, "credit.parquet", table), spec)
    assert inspection.attributes[0].groups == ("1e+20", "30", "30.5")


def test_it_uses_the_declared_unknown_tokens_instead_of_the_defaults(tmp_path: Path) -> None:
    content = "gender,label\nf,1\nnot stated,0\n-1,1\nm,0\n"
    spec = dataclasses.replace(SPEC, unknown_tokens=("Not Stated",))
    inspection = inspect(write(tmp_path, "credit.csv", content), spec)
    # "-1" is a group now: only the declared tokens (and nulls) mean unknown.
    assert inspection.attributes == (AttributeInfo("gender", ("-1", "f", "m"), 1),)


def test_it_keeps_case_variants_as_separate_groups(tmp_path: Path) -> None:
    content = "gender,label\nfemale,1\nFemale,0\nmale,1\n"
    inspection = inspect(write(tmp_path, "credit.csv", content))
    assert inspection.attributes[0].groups == ("Female", "female", "male")


def test_it_counts_an_unknown_token_that_appears_after_the_first_block(tmp_path: Path) -> None:
    # pyarrow infers the column as integers from the first block; the late token must still count.
    rows = 300_000
    content = b"age,label\n" + b"30,1\n45,0\n" * rows + b"unknown,1\n"
    spec = DatasetSpec(label="label", positive="1", attributes=("age",))
    inspection = inspect(write(tmp_path, "credit.csv", content), spec)
    assert inspection.attributes == (AttributeInfo("age", ("30", "45"), 1),)
    assert inspection.num_rows == 2 * rows + 1


# --------------------------------------------------------------------------- summary


def test_it_summarises_each_group_and_the_intersection(tmp_path: Path) -> None:
    inspection = inspect(write(tmp_path, "credit.csv", CREDIT), CREDIT_SPEC)
    assert (inspection.file_format, inspection.num_rows, inspection.positives, inspection.negatives) == ("csv", 8, 4, 4)
    assert inspection.columns == ("income", "purpose", "gender", "age_group", "label")
    assert inspection.features == (FeatureInfo("income", "numeric"), FeatureInfo("purpose", "categorical"))
    assert inspection.attributes == (
        AttributeInfo("gender", ("female", "male"), 3),
        AttributeInfo("age_group", ("18-29", "30-44", "65+"), 1),
    )
    assert inspection.groups[:4] == (
        GroupStat(("gender",), ("female",), 3, 2, 1, 3 / 8),
        GroupStat(("gender",), ("male",), 2, 1, 1, 2 / 8),
        GroupStat(("gender",), None, 3, 1, 2, 3 / 8),
        GroupStat(("age_group",), ("18-29",), 3, 3, 0, 3 / 8),
    )
    assert stats_of(inspection, "gender&age_group") == {
        "female&18-29": (1, 1, 0),
        "female&30-44": (0, 0, 0),
        "female&65+": (1, 1, 0),
        "male&18-29": (1, 1, 0),
        "male&30-44": (1, 0, 1),
        "male&65+": (0, 0, 0),
        None: (4, 1, 3),
    }


def test_the_summary_agrees_with_a_pandas_groupby(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", CREDIT)
    inspection = inspect(path, CREDIT_SPEC)
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    unknown = {t.lower() for t in DEFAULT_UNKNOWN_TOKENS}
    for column in ("gender", "age_group"):
        frame[column] = frame[column].str.strip().map(lambda v: None if v.lower() in unknown else v)
    frame["positive"] = (frame["label"] == "1").astype(int)
    frame["both"] = (frame["gender"] + "&" + frame["age_group"]).where(
        frame["gender"].notna() & frame["age_group"].notna()
    )
    for attribute, column in (("gender", "gender"), ("age_group", "age_group"), ("gender&age_group", "both")):
        grouped = frame.groupby(frame[column].fillna("<unknown>"))["positive"].agg(["size", "sum"])
        expected = {
            (None if key == "<unknown>" else key): (int(row["size"]), int(row["sum"]), int(row["size"] - row["sum"]))
            for key, row in grouped.iterrows()
        }
        observed = {k: v for k, v in stats_of(inspection, attribute).items() if v[0] > 0}
        assert observed == expected, attribute
        for stat in inspection.groups:
            if stat.attribute == attribute:
                assert stat.share == pytest.approx(stat.rows / len(frame))


def test_csv_and_parquet_give_the_same_inspection(tmp_path: Path) -> None:
    csv_path = write(tmp_path, "credit.csv", CREDIT)
    frame = pd.read_csv(csv_path, keep_default_na=False, dtype={"age_group": str, "gender": str})
    parquet_path = tmp_path / "credit.parquet"
    frame.to_parquet(parquet_path, index=False)
    from_csv, from_parquet = inspect(csv_path, CREDIT_SPEC), inspect(parquet_path, CREDIT_SPEC)
    assert from_parquet.file_format == "parquet"
    assert from_parquet.sha256 != from_csv.sha256
    assert dataclasses.replace(from_parquet, file_format="csv", sha256="", size_bytes=0) == dataclasses.replace(
        from_csv, sha256="", size_bytes=0
    )


def test_it_hashes_and_measures_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", CREDIT)
    inspection = inspect(path, CREDIT_SPEC)
    assert inspection.sha256 == hashlib.sha256(CREDIT.encode()).hexdigest()
    assert inspection.size_bytes == len(CREDIT.encode())


def test_it_uses_only_the_declared_features_in_their_order(tmp_path: Path) -> None:
    spec = dataclasses.replace(CREDIT_SPEC, features=("purpose", "gender"))
    inspection = inspect(write(tmp_path, "credit.csv", CREDIT), spec)
    assert inspection.features == (FeatureInfo("purpose", "categorical"), FeatureInfo("gender", "categorical"))


# --------------------------------------------------------------------------- load_normalized


def test_load_normalized_returns_the_shard_writer_columns(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", CREDIT.replace("100.5,car", "nan,car"))
    table = load_normalized(path, CREDIT_SPEC, display_name="credit.csv")
    expected: list[pa.Field[Any]] = [
        pa.field("income", pa.float64()),
        pa.field("purpose", pa.string()),
        pa.field("_target", pa.int8()),
        pa.field("_attr.gender", pa.string()),
        pa.field("_attr.age_group", pa.string()),
    ]
    assert table.schema == pa.schema(expected)
    assert table.column("income").null_count == 1
    assert table.column("_target").to_pylist() == [1, 0, 1, 0, 0, 1, 1, 0]
    assert table.column("_attr.gender").to_pylist() == ["female", "male", None, "female", None, "male", "female", None]
    assert table.column("_attr.age_group").to_pylist() == [
        "18-29",
        "30-44",
        "18-29",
        None,
        "30-44",
        "18-29",
        "65+",
        "30-44",
    ]


def test_load_normalized_turns_integer_and_boolean_features_into_floats(tmp_path: Path) -> None:
    table = pa.table({"n": pa.array([1, 2], pa.int16()), "b": [True, False], "g": ["f", "m"], "label": [1, 0]})
    spec = DatasetSpec(label="label", positive="1", attributes=("g",))
    loaded = load_normalized(write_parquet(tmp_path, "credit.parquet", table), spec, display_name="credit.parquet")
    assert loaded.column("n").to_pylist() == [1.0, 2.0]
    assert loaded.column("b").to_pylist() == [1.0, 0.0]
    assert loaded.schema.field("b").type == pa.float64()


def test_load_normalized_applies_the_same_validation(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", "gender,label\nf,1\nm,maybe\nf,0\n")
    error = failure(lambda: load_normalized(path, SPEC, display_name="credit.csv"))
    assert (error.row, error.column) == (2, "label")


# --------------------------------------------------------------------------- read_labelled_columns


def test_read_labelled_columns_returns_codes_target_and_the_named_columns(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", CREDIT)
    read = read_labelled_columns(
        path, CREDIT_SPEC, others=[("income", "prediction")], display_name="credit.csv", max_bytes=MAX_BYTES
    )
    assert read.columns == ("income", "purpose", "gender", "age_group", "label")
    assert read.target.tolist() == [1, 0, 1, 0, 0, 1, 1, 0]
    assert read.attributes == inspect(path, CREDIT_SPEC).attributes
    assert read.codes[0].tolist() == [0, 1, -1, 0, -1, 1, 0, -1]
    assert list(read.others) == ["income"]
    assert read.others["income"].to_pylist()[:2] == [100.5, 200.0]
    assert read.sha256 == hashlib.sha256(CREDIT.encode()).hexdigest()


def test_read_labelled_columns_names_a_missing_column_by_its_role(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", CREDIT)
    error = failure(
        lambda: read_labelled_columns(
            path, CREDIT_SPEC, others=[("score", "prediction")], display_name="credit.csv", max_bytes=MAX_BYTES
        )
    )
    assert error.column == "score"
    assert error.message.startswith("declared columns not in the file: 'score' (prediction); the file's columns are")


# --------------------------------------------------------------------------- profile


def test_the_profile_lists_low_cardinality_values_with_counts(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", CREDIT)
    profile = profile_file(path, display_name="credit.csv", max_bytes=MAX_BYTES, max_values=4)
    columns = {column.name: column for column in profile.columns}
    assert (profile.file_format, profile.num_rows) == ("csv", 8)
    # Five distinct values (unknown tokens included, as written) is over the limit of four.
    assert (columns["gender"].distinct, columns["gender"].values) == (5, None)
    assert columns["label"].values == (("0", 4), ("1", 4))
    assert columns["label"].dtype == "int64"
    assert columns["age_group"].values == (("", 1), ("18-29", 3), ("30-44", 3), ("65+", 1))
    assert (columns["income"].distinct, columns["income"].values) == (8, None)


def test_the_profile_counts_nulls_and_distinct_values(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", "score,gender\n1.0,f\n,m\n2.5,f\n1,m\n")
    profile = profile_file(path, display_name="credit.csv", max_bytes=MAX_BYTES)
    score = profile.columns[0]
    assert (score.dtype, score.distinct, score.nulls, score.values) == ("double", 2, 1, (("1", 2), ("2.5", 1)))


# --------------------------------------------------------------------------- errors and properties


def test_a_dataset_error_survives_pickling_for_celery() -> None:
    error = DatasetError("value 'x' is odd", file="credit.csv", row=3, column="label")
    copy = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own bytes, round-tripped
    assert (str(copy), copy.message, copy.file, copy.row, copy.column) == (
        "credit.csv, row 3, column 'label': value 'x' is odd",
        "value 'x' is odd",
        "credit.csv",
        3,
        "label",
    )


groups = st.sampled_from(["f", "m", "x", "", "-1", "unknown", " Unknown", None])
ages = st.sampled_from([18, 30, 45, -1, None])
# Both outcomes and a known value of each attribute: anything else is an error, tested above.
rows = st.lists(st.tuples(groups, ages, st.booleans()), min_size=2, max_size=60).filter(
    lambda data: (
        len({y for _, _, y in data}) == 2
        and any(g is not None and g.strip().lower() not in {"", "-1", "unknown"} for g, _, _ in data)
        and any(a not in (None, -1) for _, a, _ in data)
    )
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=rows)
def test_the_group_counts_always_add_up(tmp_path: Path, data: list[tuple[str | None, int | None, bool]]) -> None:
    table = pa.table(
        {
            "gender": pa.array([g for g, _, _ in data], pa.string()),
            "age": pa.array([a for _, a, _ in data], pa.int64()),
            "label": pa.array([int(y) for _, _, y in data], pa.int64()),
        }
    )
    spec = DatasetSpec(label="label", positive="1", attributes=("gender", "age"))
    inspection = inspect(write_parquet(tmp_path, "prop.parquet", table), spec)
    positives = sum(y for _, _, y in data)
    assert (inspection.num_rows, inspection.positives, inspection.negatives) == (
        len(data),
        positives,
        len(data) - positives,
    )
    for attribute in ("gender", "age", "gender&age"):
        stats = [g for g in inspection.groups if g.attribute == attribute]
        assert sum(g.rows for g in stats) == len(data)
        assert sum(g.positives for g in stats) == positives
        assert all(g.positives + g.negatives == g.rows for g in stats)
        assert sum(g.share for g in stats) == pytest.approx(1.0)
        assert [g.group for g in stats].count(None) == 1
    unknown_gender = sum(1 for g, _, _ in data if g is None or g.strip().lower() in {"", "-1", "unknown"})
    assert inspection.attributes[0].unknown_count == unknown_gender
    assert np.isclose(
        sum(g.share for g in inspection.groups if g.attribute == "gender" and g.group), 1 - unknown_gender / len(data)
    )


def test_a_categorical_attribute_lists_only_the_groups_its_rows_use(tmp_path: Path) -> None:
    # A Parquet categorical may carry dictionary entries that no row holds (pandas keeps unused categories).
    gender = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0, 1], pa.int32()), pa.array(["f", "m", "x", "unknown"]))
    path = write_parquet(tmp_path, "cat.parquet", pa.table({"gender": gender, "label": [1, 0, 0, 1]}))
    result = inspect_file(
        path,
        DatasetSpec(label="label", positive="1", attributes=("gender",)),
        display_name="cat.parquet",
        max_bytes=10**6,
    )
    (attribute,) = result.attributes
    assert attribute.groups == ("f", "m")
    assert attribute.unknown_count == 0


def test_an_integer_label_spanning_two_values_that_are_not_0_and_1_still_works(tmp_path: Path) -> None:
    path = write(tmp_path, "two.csv", "gender,label\nf,2\nm,1\nf,2\nm,2\n")
    result = inspect_file(
        path, DatasetSpec(label="label", positive="2", attributes=("gender",)), display_name="two.csv", max_bytes=10**6
    )
    assert (result.positives, result.negatives) == (3, 1)


def test_read_columns_dictionary_encodes_text_attributes_and_keeps_numbers_as_numbers(tmp_path: Path) -> None:
    path = write(tmp_path, "credit.csv", CREDIT)
    spec = DatasetSpec(label="label", positive="1", attributes=("gender", "age_group", "income"), features=())
    raw = read_columns(path, spec, others=[("purpose", "prediction")], display_name="credit.csv", max_bytes=MAX_BYTES)
    kinds = {name: raw.table.column(name).type for name in raw.table.column_names}
    assert pa.types.is_dictionary(kinds["gender"])
    assert pa.types.is_dictionary(kinds["age_group"])
    assert kinds["income"] == pa.float64()
    assert pa.types.is_dictionary(kinds["purpose"])


def test_arrays_and_scalars_built_from_buffers_equal_pyarrows_own() -> None:
    from auditportal.fairness.files.tabular.encode import arrow_numbers, arrow_scalar, arrow_texts

    for values in (np.array([3, 1, 2]), np.array([0.5, -1.0], np.float32), np.array([], np.int32)):
        built = arrow_numbers(values)
        built.validate(full=True)
        assert built.equals(pa.array(values))
    sliced = arrow_numbers(np.arange(10, dtype=np.int64)[::3])
    assert sliced.to_pylist() == [0, 3, 6, 9]
    assert arrow_scalar(-1, pa.int32()).equals(pa.scalar(-1, pa.int32()))
    assert arrow_scalar(2.5, pa.float64()).equals(pa.scalar(2.5, pa.float64()))
    texts = arrow_texts(["", "nan", "unknown", "ñ", "日本"])
    texts.validate(full=True)
    assert texts.equals(pa.array(["", "nan", "unknown", "ñ", "日本"], pa.string()))
    assert arrow_texts([]).equals(pa.array([], pa.string()))
    with pytest.raises(TypeError, match="not an array of numbers"):
        arrow_numbers(np.array([True, False]))
