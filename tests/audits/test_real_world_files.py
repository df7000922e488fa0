"""Prediction audits of real-world files (issue 13): repeated column names, single-value labels,
attributes that are all unknown, long values and fields longer than the CSV reader's block, through
the core, the CLI, the web form and the API."""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from auditportal.accounts.models import User
from auditportal.audits.models import PredictionAudit
from auditportal.evidence.models import VerdictDocument
from auditportal.fairness.files.tabular import DatasetError, read
from auditportal.fairness.statistics.audit import AuditSpec, audit_predictions
from tests.factories import client_for
from tests.realworld import (
    DIFFERING_ROW,
    IDENTICAL_DECILE,
    LONG_GROUP,
    REPEATED_WARNING,
    UNUSED_PRIORS,
    all_unknown_attribute_csv,
    long_field_csv,
    long_group_csv,
    recidivism_csv,
    recidivism_parquet,
    single_value_label_csv,
)

MAX = 10 * 2**20
API = "/api/v1/audits/predictions/"
AMBIGUOUS_SCORE = (
    "compas.csv, column 'decile_score': the score 'decile_score' is ambiguous: the file has 2 columns with this "
    f"name (columns 5 and 9 from the left) whose values differ (first in data row {DIFFERING_ROW}); give each "
    "column a unique name, or declare another column"
)


def differing_csv(path: Path) -> Path:
    return recidivism_csv(path, differ=True)


def differing_parquet(path: Path) -> Path:
    return recidivism_parquet(path, differ=True)


SINGLE_VALUE = (
    "loans.csv, column 'approved': the label has a single value, '0', in all 20 rows: there are no positives "
    "(the positive value is '1'), and a fairness comparison needs rows of both outcomes; check the label column "
    "and the positive value"
)


def _audit(path: Path, **kwargs: Any) -> dict[str, Any]:
    spec = AuditSpec.from_input(**{"label": "approved", "attributes": "gender", "prediction": "pred", **kwargs})
    return audit_predictions(path, spec, display_name=path.name, max_bytes=MAX).document


def _error(path: Path, **kwargs: Any) -> DatasetError:
    with pytest.raises(DatasetError) as caught:
        _audit(path, **kwargs)
    return caught.value


def _upload(path: Path) -> SimpleUploadedFile:
    return SimpleUploadedFile(path.name, path.read_bytes(), content_type="text/csv")


COMPAS = {"label": "two_year_recid", "attributes": "race, sex", "prediction": "high_risk"}


# --------------------------------------------------------------------------- core


@pytest.mark.parametrize("make", [recidivism_csv, recidivism_parquet], ids=["csv", "parquet"])
def test_repeated_names_that_are_not_used_are_audited_with_a_warning(
    tmp_path: Path, make: Callable[[Path], Path]
) -> None:
    path = make(tmp_path / ("compas.csv" if make is recidivism_csv else "compas.parquet"))
    document = _audit(path, **COMPAS)
    assert document["warnings"] == [REPEATED_WARNING]
    assert document["rows"] == 120
    assert list(document["attributes"]) == ["race", "sex"]


def test_a_file_without_repeated_names_has_no_warning(tmp_path: Path) -> None:
    assert _audit(long_group_csv(tmp_path / "loans.csv", value="f"))["warnings"] == []


@pytest.mark.parametrize("make", [recidivism_csv, recidivism_parquet], ids=["csv", "parquet"])
def test_a_used_repeated_name_whose_columns_are_identical_is_one_column_with_a_warning(
    tmp_path: Path, make: Callable[[Path], Path]
) -> None:
    path = make(tmp_path / ("compas.csv" if make is recidivism_csv else "compas.parquet"))
    document = _audit(path, **{**COMPAS, "prediction": None, "score": "decile_score", "threshold": 5})
    assert document["warnings"] == [IDENTICAL_DECILE, UNUSED_PRIORS]
    # The same counts as a file with the column once.
    expected = _audit(path, **COMPAS)  # high_risk is decile_score >= 5
    assert document["attributes"] == expected["attributes"]


@pytest.mark.parametrize("make", [differing_csv, differing_parquet], ids=["csv", "parquet"])
def test_a_used_repeated_name_whose_columns_differ_is_refused_naming_the_column(
    tmp_path: Path, make: Callable[[Path], Path]
) -> None:
    path = make(tmp_path / ("compas.csv" if make is differing_csv else "compas.parquet"))
    error = _error(path, **{**COMPAS, "prediction": None, "score": "decile_score", "threshold": 5})
    assert (error.row, error.column) == (None, "decile_score")
    assert str(error) == AMBIGUOUS_SCORE.replace("compas.csv", path.name)


@pytest.mark.parametrize(
    ("label", "positive"),
    [("approved", "1"), ("approved", "0")],
    ids=["no positives", "no negatives"],
)
def test_a_single_value_label_is_refused_on_the_fast_and_the_general_path(
    tmp_path: Path, label: str, positive: str
) -> None:
    path = single_value_label_csv(tmp_path / "loans.csv")
    error = _error(path, label=label, positive=positive)
    assert (error.row, error.column) == (None, "approved")
    assert str(error).startswith("loans.csv, column 'approved': the label has a single value, '0', in all 20 rows")
    text = path.with_name("text.csv")
    text.write_text(path.read_text().replace(",0,", ",no,"))  # a text label takes the general path
    error = _error(text, positive="yes")
    assert str(error).startswith("text.csv, column 'approved': the label has a single value, 'no', in all 20 rows")


def test_an_all_unknown_attribute_is_refused(tmp_path: Path) -> None:
    error = _error(all_unknown_attribute_csv(tmp_path / "loans.csv"), attributes="gender, race", intersect=True)
    assert (error.row, error.column) == (None, "race")


def test_a_long_group_value_is_audited_since_an_audit_keeps_its_groups_in_its_document(tmp_path: Path) -> None:
    document = _audit(long_group_csv(tmp_path / "loans.csv"))
    assert LONG_GROUP in document["attributes"]["gender"]["groups"]


def test_a_long_field_in_an_unused_column_is_read_with_a_larger_block(tmp_path: Path) -> None:
    document = _audit(long_field_csv(tmp_path / "loans.csv", field_bytes=3 * 2**20))
    assert document["rows"] == 10


def test_a_row_over_the_bound_is_refused_with_its_row_and_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(read, "MAX_ROW_BYTES", 2 * 2**20)
    error = _error(long_field_csv(tmp_path / "loans.csv", field_bytes=3 * 2**20, row=6))
    assert (error.row, error.column) == (6, "notes")
    assert "this row is 3.0 MiB long, over the limit of 2.0 MiB for one row" in str(error)


# --------------------------------------------------------------------------- CLI


def _cli(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("audit_predictions", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_the_cli_prints_the_warning_on_stderr_and_keeps_it_in_the_document(tmp_path: Path) -> None:
    path = recidivism_csv(tmp_path / "compas.csv")
    args = [str(path), "--label", "two_year_recid", "--prediction", "high_risk", "--attribute", "race"]
    out, err = _cli(*args, "--format", "json")
    assert err == f"warning: compas.csv: {REPEATED_WARNING}\n"
    assert "warning: " not in out
    audit = PredictionAudit.objects.get()
    assert audit.result["warnings"] == [REPEATED_WARNING]
    frozen = VerdictDocument.objects.get(prediction_audit=audit)
    assert frozen.document["audit"]["warnings"] == [REPEATED_WARNING]
    out, err = _cli(*args)
    assert err == f"warning: compas.csv: {REPEATED_WARNING}\n"


@pytest.mark.django_db
def test_the_cli_refuses_an_ambiguous_score_and_a_single_value_label(tmp_path: Path) -> None:
    path = differing_csv(tmp_path / "compas.csv")
    with pytest.raises(CommandError) as caught:
        _cli(
            str(path), "--label", "two_year_recid", "--score", "decile_score", "--threshold", "5", "--attribute", "race"
        )
    assert str(caught.value) == AMBIGUOUS_SCORE
    path = single_value_label_csv(tmp_path / "loans.csv")
    with pytest.raises(CommandError) as caught:
        _cli(str(path), "--label", "approved", "--prediction", "pred", "--attribute", "gender")
    assert str(caught.value) == SINGLE_VALUE
    assert not PredictionAudit.objects.exists()


# --------------------------------------------------------------------------- web


def _form(path: Path, **changes: Any) -> dict[str, Any]:
    return {
        "file": _upload(path),
        "label": "approved",
        "positive": "1",
        "prediction": "pred",
        "score": "",
        "attributes": "gender",
        "unknown_tokens": "nan, -1, unknown",
        **changes,
    }


def test_the_audit_page_shows_the_warning(bob: User, dataset_storage: Path, tmp_path: Path) -> None:
    client = client_for(bob)
    form = _form(recidivism_csv(tmp_path / "compas.csv"), label="two_year_recid", prediction="high_risk")
    response = client.post(reverse("audits:prediction-new"), {**form, "attributes": "race"})
    assert response.status_code == 302, response.content.decode()
    page = client.get(response["Location"]).content.decode()
    assert "compas.csv: the file has more than one column named &#x27;decile_score&#x27; (columns 5 and 9)" in page


@pytest.mark.parametrize(
    ("make", "changes", "message"),
    [
        (differing_csv, {**COMPAS, "prediction": "", "score": "decile_score", "threshold": "5"}, AMBIGUOUS_SCORE),
        (single_value_label_csv, {}, SINGLE_VALUE),
    ],
    ids=["ambiguous score", "single-value label"],
)  # fmt: skip
def test_the_form_shows_the_refusal(
    bob: User,
    dataset_storage: Path,
    tmp_path: Path,
    make: Callable[[Path], Path],
    changes: dict[str, str],
    message: str,
) -> None:
    path = make(tmp_path / ("compas.csv" if make is differing_csv else "loans.csv"))
    response = client_for(bob).post(reverse("audits:prediction-new"), _form(path, **changes))
    assert response.status_code == 400
    assert message.replace("'", "&#x27;") in response.content.decode()
    assert not PredictionAudit.objects.exists()


# --------------------------------------------------------------------------- API


def test_the_api_returns_the_warning_in_the_document(carol: User, dataset_storage: Path, tmp_path: Path) -> None:
    data = {"file": _upload(recidivism_csv(tmp_path / "compas.csv")), "label": "two_year_recid"}
    response = client_for(carol).post(API, {**data, "prediction": "high_risk", "attributes": ["race", "sex"]})
    assert response.status_code == 201, response.content.decode()
    assert response.json()["warnings"] == [REPEATED_WARNING]


def test_the_api_refuses_with_file_row_and_column(
    bob: User, dataset_storage: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = client_for(bob)
    compas = _upload(differing_csv(tmp_path / "compas.csv"))
    data = {
        "file": compas,
        "label": "two_year_recid",
        "score": "decile_score",
        "threshold": "5",
        "attributes": ["race"],
    }
    response = client.post(API, data)
    assert response.status_code == 400
    assert response.json() == {
        "detail": AMBIGUOUS_SCORE,
        "field": "decile_score",
        "file": "compas.csv",
        "row": None,
        "column": "decile_score",
    }
    loans = _upload(single_value_label_csv(tmp_path / "loans.csv"))
    response = client.post(API, {"file": loans, "label": "approved", "prediction": "pred", "attributes": ["gender"]})
    assert response.status_code == 400
    assert response.json() == {
        "detail": SINGLE_VALUE,
        "field": "approved",
        "file": "loans.csv",
        "row": None,
        "column": "approved",
    }
    monkeypatch.setattr(read, "MAX_ROW_BYTES", 2 * 2**20)
    long = _upload(long_field_csv(tmp_path / "notes.csv", field_bytes=3 * 2**20, row=6))
    response = client.post(API, {"file": long, "label": "approved", "prediction": "pred", "attributes": ["gender"]})
    assert response.status_code == 400
    body = response.json()
    assert (body["file"], body["row"], body["column"]) == ("notes.csv", 6, "notes")
    assert body["detail"].startswith("notes.csv, row 6, column 'notes': this row is 3.0 MiB long")
    assert not PredictionAudit.objects.exists()
