"""Reading a predictions file into the audit document (pure: no database)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from auditportal.fairness.files.tabular import DatasetError
from auditportal.fairness.statistics.audit import AuditSpec, AuditSpecError, audit_predictions
from tests.audits.conftest import PREDICTIONS_CSV, write

MAX = 1 << 30


def _audit(path: Path, **kwargs: Any) -> dict[str, Any]:
    spec = AuditSpec(**{"label": "label", "attributes": ("gender",), "prediction": "pred", **kwargs})
    document = audit_predictions(path, spec, display_name=path.name, max_bytes=MAX).document
    json.dumps(document, allow_nan=False)
    return document


def _error(path: Path, **kwargs: Any) -> DatasetError:
    with pytest.raises(DatasetError) as caught:
        _audit(path, **kwargs)
    return caught.value


def test_a_prediction_column_is_counted_per_group_with_unknowns_left_out(predictions_csv: Path) -> None:
    document = _audit(predictions_csv)
    assert document["rows"] == 12
    assert document["label"] == {"column": "label", "positive": "1", "positives": 6, "negatives": 6}
    assert document["prediction"]["predicted_positives"] == 6
    gender = document["attributes"]["gender"]
    assert gender["unknown"] == 2
    assert gender["reference"] == "f"  # 5 rows against m's 5: the first of equals
    f, m = gender["groups"]["f"], gender["groups"]["m"]
    assert (f["tp"], f["fn"], f["fp"], f["tn"]) == (1, 2, 1, 1)
    assert (m["tp"], m["fn"], m["fp"], m["tn"]) == (2, 0, 1, 2)
    assert m["tpr"] == 1.0
    tpr = next(c for c in gender["comparisons"] if c["metric"] == "tpr")
    assert tpr["group"] == "m"
    assert tpr["difference"] == pytest.approx(1 - 1 / 3)
    assert tpr["verdict"] == "INCONCLUSIVE"
    assert tpr["positives_needed"] > 3
    assert {c["metric"] for c in gender["comparisons"]} == {"tpr", "fpr", "equalized_odds", "selection_rate", "ppv"}


def test_a_score_column_is_predicted_positive_at_or_above_the_threshold(predictions_csv: Path) -> None:
    document = _audit(predictions_csv, prediction=None, score="score", threshold=0.55)
    assert document["prediction"] == {"column": None, "score": "score", "threshold": 0.55, "predicted_positives": 6}
    by_threshold = _audit(predictions_csv, prediction=None, score="score", threshold=0.56)
    assert by_threshold["prediction"]["predicted_positives"] == 5  # 0.55 itself is no longer positive


def test_a_parquet_file_gives_the_same_document_as_csv(predictions_csv: Path, tmp_path: Path) -> None:
    import pyarrow.csv as pacsv

    parquet = tmp_path / "scores.parquet"
    pq.write_table(pacsv.read_csv(predictions_csv), parquet)
    from_csv = _audit(predictions_csv, intersect=True, attributes=("gender", "age_group"))
    from_parquet = _audit(parquet, intersect=True, attributes=("gender", "age_group"))
    assert from_parquet["attributes"] == from_csv["attributes"]
    assert from_parquet["file"]["format"] == "parquet"


def test_the_intersection_is_named_after_its_attributes_and_skips_empty_combinations(tmp_path: Path) -> None:
    path = write(tmp_path / "p.csv", "label,pred,a,b\n1,1,x,u\n0,1,x,v\n1,0,y,u\n0,0,,v\n")
    document = _audit(path, attributes=("a", "b"), intersect=True)
    both = document["attributes"]["a&b"]
    assert list(both["groups"]) == ["x&u", "x&v", "y&u"]  # y&v has no rows
    assert both["unknown"] == 1


def test_a_reference_can_be_chosen_for_one_attribute_or_by_group_name(predictions_csv: Path) -> None:
    document = _audit(predictions_csv, references=("m",), attributes=("gender", "age_group"))
    assert document["attributes"]["gender"]["reference"] == "m"
    assert document["attributes"]["age_group"]["reference"] == "young"
    named = _audit(predictions_csv, references=("age_group=old",), attributes=("gender", "age_group"))
    assert named["attributes"]["age_group"]["reference"] == "old"


def test_an_unknown_reference_group_names_the_groups_there_are(predictions_csv: Path) -> None:
    error = _error(predictions_csv, references=("gender=x",))
    assert (
        str(error)
        == "scores.csv, column 'gender': the reference group 'x' is not a group of 'gender' (groups: 'f', 'm')"
    )
    error = _error(predictions_csv, references=("nobody",))
    assert "the reference group 'nobody' is not a group of any attribute" in str(error)


def test_custom_unknown_tokens_replace_the_defaults(predictions_csv: Path) -> None:
    document = _audit(predictions_csv, unknown_tokens=("",))
    assert document["attributes"]["gender"]["unknown"] == 1
    assert "unknown" in document["attributes"]["gender"]["groups"]


def test_an_attribute_whose_every_value_is_unknown_is_refused(tmp_path: Path) -> None:
    # It has no group to compare (issue 13): before, the audit judged nothing and said little.
    path = write(tmp_path / "p.csv", "label,pred,g\n1,1,unknown\n0,1,\n1,0,-1\n")
    error = _error(path, attributes=("g",))
    assert (error.column, error.row) == ("g", None)
    assert str(error) == (
        "p.csv, column 'g': every value of the sensitive attribute is unknown (values seen: '', '-1', 'unknown'), "
        "so it has no group to compare; declare another column, or change the values that mean unknown"
    )


def test_a_missing_column_is_named_with_a_suggestion(predictions_csv: Path) -> None:
    error = _error(predictions_csv, prediction="prd")
    assert str(error) == (
        "scores.csv, column 'prd': declared columns not in the file: 'prd' (prediction); the file's columns are "
        "'label', 'pred', 'score', 'gender', 'age_group' (did you mean 'pred' for 'prd'?)"
    )


def test_a_non_binary_label_names_the_stray_value_and_its_row(tmp_path: Path) -> None:
    path = write(tmp_path / "p.csv", "label,pred,gender\n1,1,f\n0,0,m\n2,1,f\n")
    error = _error(path)
    assert (error.row, error.column) == (3, "label")
    assert "value '2' makes the label non-binary" in str(error)


def test_an_empty_file_is_refused(tmp_path: Path) -> None:
    error = _error(write(tmp_path / "p.csv", ""))
    assert str(error) == "p.csv: the file is empty (0 bytes); upload a file with a header line and data rows"


def test_a_prediction_other_than_zero_or_one_is_refused_with_its_row(tmp_path: Path) -> None:
    path = write(tmp_path / "p.csv", "label,pred,gender\n1,1,f\n0,0,m\n1,2,f\n")
    error = _error(path)
    assert str(error) == (
        "p.csv, row 3, column 'pred': value 2 is not a 0/1 prediction (values seen: 0, 1, 2); "
        "a prediction column holds 0 or 1 (or false/true)"
    )


def test_text_predictions_use_the_labels_positive_value(tmp_path: Path) -> None:
    path = write(tmp_path / "p.csv", "label,pred,gender\nyes,yes,f\nno,yes,m\nyes,no,m\n")
    document = _audit(path, positive="yes")
    assert document["prediction"]["predicted_positives"] == 2
    error = _error(write(tmp_path / "q.csv", "label,pred,gender\nyes,y,f\nno,n,m\n"), positive="yes")
    assert "the positive value 'yes' does not occur in the predictions (values seen: 'n', 'y')" in str(error)


def test_a_missing_or_non_numeric_score_is_refused_with_its_row(tmp_path: Path) -> None:
    path = write(tmp_path / "p.csv", "label,score,gender\n1,0.5,f\n0,high,m\n")
    error = _error(path, prediction=None, score="score", threshold=0.5)
    assert (
        str(error) == "p.csv, row 2, column 'score': value 'high' is not a number; the score column must hold numbers"
    )
    path = write(tmp_path / "q.csv", "label,score,gender\n1,0.5,f\n0,,m\n")
    error = _error(path, prediction=None, score="score", threshold=0.5)
    assert str(error) == "q.csv, row 2, column 'score': the score is missing; every row needs a score"


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"prediction": None, "score": "score"}, "threshold", "a score column needs a threshold"),
        ({"score": "score", "threshold": 0.5}, "prediction", "give either a prediction column or a score column"),
        ({"prediction": None}, "prediction", "give a prediction column (0/1), or a score column and a threshold"),
        ({"threshold": 0.5}, "threshold", "a threshold applies to a score column"),
        ({"attributes": ()}, "attributes", "declare at least one sensitive attribute column"),
        ({"prediction": "label"}, "prediction", "'label' is the label column"),
        ({"intersect": True}, "intersect", "an intersection needs at least two attribute columns"),
        ({"alpha": 1.5}, "alpha", "alpha must be between 0 and 1, not 1.5"),
        ({"tolerance": -0.1}, "tolerance", "the tolerance must be at least 0 and below 1, not -0.1"),
    ],
)
def test_impossible_parameters_are_refused_before_reading(
    predictions_csv: Path, changes: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(AuditSpecError) as caught:
        _audit(predictions_csv, **changes)
    assert caught.value.field == field
    assert message in caught.value.message


def test_a_boolean_prediction_column_in_parquet_is_read_as_zero_one(tmp_path: Path) -> None:
    path = tmp_path / "p.parquet"
    pq.write_table(
        pa.table({"label": [1, 0, 1, 0], "pred": [True, True, False, False], "gender": ["f", "m", "f", "m"]}), path
    )
    document = _audit(path)
    assert document["attributes"]["gender"]["groups"]["f"]["tp"] == 1
    assert document["prediction"]["predicted_positives"] == 2


def test_the_csv_fixture_is_what_the_tests_assume() -> None:
    assert PREDICTIONS_CSV.count("\n") == 13


def test_a_byte_that_is_not_utf8_in_an_attribute_is_reported_with_its_row(tmp_path: Path) -> None:
    # The file's first bad byte is found and named, as registration names it.
    rows = 100_000  # 1.2 MB: past the first block (1 MiB), from which the reader infers types
    content = b"label,pred,gender\n" + b"1,1,f\n0,0,m\n" * rows + "1,0,Jürgen\n".encode("latin-1")
    path = tmp_path / "scores.csv"
    path.write_bytes(content)
    error = _error(path)
    assert (error.row, error.column) == (2 * rows + 1, "gender")
    assert "byte 0xFC is not valid UTF-8" in error.message


def test_an_attribute_of_numbers_is_grouped_by_the_numbers(tmp_path: Path) -> None:
    # Inferred as numbers: "01" and "1" are one group, as in registration.
    path = write(tmp_path / "scores.csv", "label,pred,band\n1,1,01\n0,0,1\n1,0,2\n0,1,2.0\n")
    document = _audit(path, attributes=("band",))
    assert document["attributes"]["band"]["groups"]["1"]["n"] == 2
    assert document["attributes"]["band"]["groups"]["2"]["n"] == 2


def test_an_audit_imports_neither_pandas_nor_scipy_nor_statsmodels(tmp_path: Path) -> None:
    # Each takes from 0.3 to 1 s to import, more than reading a large file. The file has a group with
    # large counts (score tests) and one with a cell below 5 (Fisher's exact test).
    rows = ["label,score,group"] + ["1,0.9,a"] * 60 + ["0,0.2,a"] * 50 + ["0,0.7,a"] * 9
    rows += ["1,0.9,b"] * 3 + ["0,0.1,b"] * 30 + ["1,0.3,b"] * 8 + ["0,0.8,b"] * 6 + ["1,0.5,"] * 2
    path = write(tmp_path / "p.csv", "\n".join(rows) + "\n")
    script = f"""
import sys
from pathlib import Path
from auditportal.fairness.statistics.audit import AuditSpec, audit_predictions
spec = AuditSpec(label="label", score="score", threshold=0.5, attributes=("group",))
document = audit_predictions(Path({str(path)!r}), spec, display_name="p.csv", max_bytes=1 << 30).document
print(sorted({{c["test"] for c in document["attributes"]["group"]["comparisons"]}}))
print(sorted(name for name in ("pandas", "scipy", "statsmodels") if name in sys.modules))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines() == ["['fisher', 'min of tpr/fpr x2', 'score']", "[]"]
