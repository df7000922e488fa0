"""manage.py compare_predictions and the service under it: stored, with its event; bad input names the flag."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from auditportal.activity.models import Event, Verb
from auditportal.comparisons.models import PairedComparison


def _run(*args: str) -> str:
    out = StringIO()
    call_command("compare_predictions", *args, stdout=out)
    return out.getvalue()


BASE = ("--label", "label", "--attribute", "gender")


@pytest.mark.django_db
def test_json_output_judges_each_group_and_stores_the_comparison(paired_csv: Path) -> None:
    document: dict[str, Any] = json.loads(
        _run(str(paired_csv), *BASE, "--champion", "model_a", "--challenger", "model_b", "--format", "json")
    )
    comparison = PairedComparison.objects.get()
    assert document["id"] == comparison.pk
    assert comparison.champion == "model_a"
    assert comparison.challenger == "model_b"
    assert len(comparison.sha256) == 64
    assert document["file"]["sha256"] == comparison.sha256
    assert comparison.policy is not None
    assert document["tolerance"] == comparison.policy.tolerance
    accuracy = document["attributes"]["gender"]["metrics"]["accuracy"]["groups"]
    assert accuracy["f"]["verdict"] == "BETTER"
    assert accuracy["f"]["difference"] > 0.1
    event = Event.objects.get(verb=Verb.PAIRED_COMPARISON_CREATED)
    assert event.data["sha256"] == comparison.sha256


@pytest.mark.django_db
def test_the_table_names_both_models_and_the_verdicts(paired_csv: Path) -> None:
    text = _run(
        str(paired_csv), *BASE, "--champion", "score_a", "--challenger", "score_b", "--score",
        "--champion-threshold", "0.5", "--challenger-threshold", "0.5",
    )  # fmt: skip
    assert "champion 'score_a' (A) against challenger 'score_b' (B)" in text
    assert "accuracy" in text
    assert "B-A" in text


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("--champion", "nope", "--challenger", "model_b"), "--champion"),
        (("--champion", "model_a", "--challenger", "model_a"), "--challenger"),
        (("--champion", "model_a", "--challenger", " "), "--challenger"),
        (("--champion", "score_a", "--challenger", "model_b"), "--champion"),
        (("--champion", "score_a", "--challenger", "score_b", "--score"), "--champion-threshold"),
        (("--champion", "label", "--challenger", "model_b"), "--champion"),
    ],
)
@pytest.mark.django_db
def test_bad_input_names_the_flag_and_stores_nothing(paired_csv: Path, args: tuple[str, ...], flag: str) -> None:
    with pytest.raises(CommandError) as caught:
        _run(str(paired_csv), *BASE, *args)
    assert str(caught.value).startswith(f"{flag}: ")
    assert not PairedComparison.objects.exists()
