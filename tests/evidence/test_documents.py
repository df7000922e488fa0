"""The Django-free builder: the same inputs give the same bytes, and the document holds what was judged."""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

import auditportal
from auditportal.fairness.documents import verdict_documents
from auditportal.fairness.files.metricsfile import confusion_counts
from auditportal.fairness.statistics import judge

POLICY = {
    "version": 3,
    "tolerance": 0.05,
    "alpha": 0.05,
    "metrics": ["tpr", "fpr", "equalized_odds", "selection_rate", "ppv"],
    "reference_rule": "largest",
    "min_group_size": None,
}
CONFIG = "name: loans-v1-single-7\nhyperparameters:\n  lr: 0.01\n"


def _metrics(groups: dict[str, tuple[int, int, int, int]], unknown: int = 0) -> dict[str, float | None]:
    metrics: dict[str, float | None] = {"count/gender/unknown": float(unknown)}
    for group, cells in groups.items():
        for cell, value in zip(("tp", "fn", "fp", "tn"), cells, strict=True):
            metrics[f"count/gender/{group}/{cell}"] = float(value)
    return metrics


def _trial_document(metrics: dict[str, float | None], policy: dict[str, Any] = POLICY) -> dict[str, Any]:
    return verdict_documents.trial_validation_document(
        counts=confusion_counts(metrics),
        step=40,
        dataset_version={"name": "loans", "number": 2, "sha256": "ab" * 32},
        experiment={"id": 7, "name": "loans-v1-single-7", "det_experiment_id": None, "config_yaml": CONFIG},
        trial={"number": 1, "det_trial_id": None, "hparams": {"lr": 0.01, "hidden": [64, 32]}},
        policy=policy,
    )


FAIR = {"female": (4500, 500, 400, 4600), "male": (9000, 1000, 800, 9200)}
UNFAIR = {"female": (1200, 800, 300, 2700), "male": (2700, 300, 300, 2700)}


def test_the_same_inputs_give_byte_identical_json_and_the_same_hash() -> None:
    first = verdict_documents.freeze(_trial_document(_metrics(FAIR, unknown=3)))
    second = verdict_documents.freeze(_trial_document(_metrics(FAIR, unknown=3)))
    assert first.canonical == second.canonical
    assert first.sha256 == second.sha256 == hashlib.sha256(first.canonical.encode()).hexdigest()
    other = verdict_documents.freeze(_trial_document(_metrics(FAIR, unknown=4)))
    assert other.sha256 != first.sha256


def test_the_canonical_text_has_sorted_keys_and_no_whitespace() -> None:
    frozen = verdict_documents.freeze(_trial_document(_metrics(FAIR)))
    assert frozen.canonical.startswith('{"attributes":{"gender":{')
    # Outside the strings (the headline's rule and the levels are sentences).
    structure = re.sub(r'"(?:[^"\\]|\\.)*"', '""', frozen.canonical)
    assert structure.startswith('{"":{"":{')
    assert ": " not in structure
    assert ", " not in structure


def test_a_trial_document_holds_the_data_the_experiment_the_trial_and_the_policy() -> None:
    document = _trial_document(_metrics(UNFAIR))
    assert set(document) == {
        "schema_version", "code_version", "kind", "policy", "verdict", "headline", "levels", "step",
        "dataset_version", "experiment", "trial", "attributes",
    }  # fmt: skip
    assert document["schema_version"] == verdict_documents.SCHEMA_VERSION == 2
    assert document["code_version"] == auditportal.__version__
    assert document["kind"] == "trial_validation"
    assert document["policy"] == POLICY
    assert document["step"] == 40
    assert document["dataset_version"] == {"name": "loans", "number": 2, "sha256": "ab" * 32}
    assert document["experiment"] == {
        "id": 7,
        "name": "loans-v1-single-7",
        "det_experiment_id": None,
        "config_sha256": hashlib.sha256(CONFIG.encode()).hexdigest(),
    }
    assert document["trial"] == {"number": 1, "det_trial_id": None, "hparams": {"lr": 0.01, "hidden": [64, 32]}}
    gender = document["attributes"]["gender"]
    assert (gender["groups"]["female"]["tp"], gender["groups"]["female"]["fn"]) == (1200, 800)
    assert gender["reference"] == "male"
    assert document["verdict"] == gender["verdict"] == "FAIL"
    # The headline: one attribute, every metric of the policy judged (five families).
    headline = document["headline"]
    assert (headline["verdict"], headline["families"], headline["alpha"]) == ("FAIL", 5, 0.05)
    assert headline["level"] == pytest.approx(1 - 0.05 / 5)
    assert {(item["attribute"], item["metric"], item["group"]) for item in headline["fails"]} >= {
        ("gender", "tpr", "female")
    }
    assert document["levels"] == judge.LEVELS


def test_the_attributes_are_judged_under_the_policys_tolerance() -> None:
    # recall 0.90 against 0.92 over thousands of positives: within 0.05, beyond 0.001
    metrics = _metrics({"female": (9000, 1000, 800, 9200), "male": (9200, 800, 800, 9200)})
    assert _trial_document(metrics)["attributes"]["gender"]["verdicts"]["FAIL"] == 0
    strict = _trial_document(metrics, {**POLICY, "version": 4, "tolerance": 0.001})
    tpr = [c for c in strict["attributes"]["gender"]["comparisons"] if c["metric"] == "tpr"]
    assert [c["verdict"] for c in tpr] == ["FAIL"]


def test_a_prediction_audit_document_wraps_the_result_with_its_file_parameters_and_policy() -> None:
    result = {"schema_version": 1, "rows": 10, "verdict": "PASS", "attributes": {"gender": {"verdict": "PASS"}}}
    document = verdict_documents.prediction_audit_document(
        result=result,
        file_name="scores.csv",
        sha256="cd" * 32,
        rows=10,
        parameters={"label": "label", "attributes": ("gender",)},
        policy=POLICY,
    )
    assert document == {
        "schema_version": 2,
        "code_version": auditportal.__version__,
        "kind": "prediction_audit",
        "policy": POLICY,
        "verdict": "PASS",
        "headline": None,  # an audit result of schema 1 has none
        "file": {"name": "scores.csv", "sha256": "cd" * 32, "rows": 10},
        "parameters": {"label": "label", "attributes": ["gender"]},
        "audit": result,
    }


def test_a_policy_without_its_values_is_refused() -> None:
    with pytest.raises(ValueError, match="the policy lacks alpha, min_group_size"):
        _trial_document(
            _metrics(FAIR), {key: POLICY[key] for key in ("version", "tolerance", "metrics", "reference_rule")}
        )


def test_the_code_version_is_the_projects_version() -> None:
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert auditportal.__version__ == pyproject["project"]["version"]
