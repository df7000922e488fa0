"""One constructor turns the form's, the API's and the command's input into the same audit spec."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from auditportal.accounts.models import User
from auditportal.audits.forms import PredictionAuditForm
from auditportal.audits.models import PredictionAudit
from auditportal.fairness.statistics.audit import AuditSpec
from tests.audits.conftest import PREDICTIONS_CSV
from tests.factories import client_for


def test_unknown_tokens_are_split_stripped_lower_cased_deduplicated_and_sorted_with_empty_first() -> None:
    spec = AuditSpec.from_input(
        label="label", attributes="gender", unknown_tokens=[" Unknown ", "NaN", "nan,, N/A", "", "n/a "]
    )
    assert spec.unknown_tokens == ("", "n/a", "nan", "unknown")


def test_no_unknown_tokens_means_the_defaults_and_none_given_means_only_empty() -> None:
    assert AuditSpec.from_input(label="l", attributes="a").unknown_tokens == ("", "-1", "nan", "unknown")
    assert AuditSpec.from_input(label="l", attributes="a", unknown_tokens="").unknown_tokens == ("",)
    assert AuditSpec.from_input(label="l", attributes="a", unknown_tokens=[" ", ""]).unknown_tokens == ("",)


def test_names_are_stripped_and_lists_split_on_commas_keeping_a_repeated_attribute_for_check() -> None:
    spec = AuditSpec.from_input(
        label=" label ",
        positive=" yes ",
        prediction="  ",
        score=" score ",
        threshold=0.5,
        attributes=["gender, age_group", " gender "],
        references="m , age_group=old,",
    )
    assert (spec.label, spec.positive, spec.prediction, spec.score) == ("label", "yes", None, "score")
    assert spec.attributes == ("gender", "age_group", "gender")
    assert spec.references == ("m", "age_group=old")


def _upload() -> SimpleUploadedFile:
    return SimpleUploadedFile("scores.csv", PREDICTIONS_CSV.encode(), content_type="text/csv")


def _through_the_form(user: User, tokens: list[str] | None) -> None:
    # The form has no "absent": it starts with the defaults filled in.
    text = PredictionAuditForm().fields["unknown_tokens"].initial if tokens is None else ", ".join(tokens)
    data = {
        "file": _upload(),
        "label": " label ",
        "positive": " 1",
        "prediction": "pred ",
        "score": "",
        "attributes": " gender ,age_group",
        "reference": "m, age_group=old",
        "unknown_tokens": text,
    }
    response = client_for(user).post(reverse("audits:prediction-new"), data)
    assert response.status_code == 302, response.content.decode()


def _through_the_api(user: User, tokens: list[str] | None) -> None:
    data: dict[str, Any] = {
        "file": _upload(),
        "label": " label ",
        "positive": " 1",
        "prediction": "pred ",
        "attributes": [" gender ", "age_group"],
        "references": ["m", " age_group=old"],
    }
    if tokens is not None:
        data["unknown_tokens"] = tokens
    response = client_for(user).post("/api/v1/audits/predictions/", data)
    assert response.status_code == 201, response.content.decode()


def _through_the_command(user: User, tokens: list[str] | None, source: Path) -> None:
    args = [str(source), "--label", " label ", "--positive", " 1", "--prediction", "pred "]
    args += ["--attribute", " gender ", "--attribute", "age_group", "--reference", "m", "--reference", " age_group=old"]
    args += ["--user", user.username]
    for token in tokens or []:
        args += ["--unknown-token", token]
    call_command("audit_predictions", *args, stdout=StringIO())


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        pytest.param([" Unknown ", "NaN", "nan", "N/A, -1", " n/a "], ["", "-1", "n/a", "nan", "unknown"], id="messy"),
        pytest.param([""], [""], id="only-empty"),
        pytest.param(None, ["", "-1", "nan", "unknown"], id="defaults"),
    ],
)
def test_the_form_the_api_and_the_command_build_the_same_spec(
    tokens: list[str] | None, expected: list[str], bob: User, predictions_csv: Path, dataset_storage: Path
) -> None:
    _through_the_form(bob, tokens)
    _through_the_api(bob, tokens)
    _through_the_command(bob, tokens, predictions_csv)
    form, api, command = PredictionAudit.objects.order_by("pk")
    assert form.parameters == api.parameters == command.parameters
    assert form.parameters["unknown_tokens"] == expected
    assert form.parameters["attributes"] == ["gender", "age_group"]
    assert form.parameters["references"] == ["m", "age_group=old"]
    assert (form.parameters["label"], form.parameters["positive"], form.parameters["prediction"]) == (
        "label",
        "1",
        "pred",
    )
    assert form.result["unknown_tokens"] == api.result["unknown_tokens"] == command.result["unknown_tokens"]
    assert form.result["attributes"] == api.result["attributes"] == command.result["attributes"]
