"""The fairness policy's judged metrics and minimum group size, in the Django-free core."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from auditportal.fairness.statistics import judge
from auditportal.fairness.statistics.audit import AuditSpec, AuditSpecError, audit_predictions
from auditportal.fairness.text import presentation

# Rows per group: tp, fn, fp, tn. Same recall (0.8) in both; b's false positive rate is 0.5 against a's 0.1.
SAME_RECALL_FPR_GAP = np.array([[8000, 2000, 1000, 9000], [8000, 2000, 5000, 5000]], dtype=np.int64)
IDENTICAL = np.array([[8000, 2000, 1000, 9000], [8000, 2000, 1000, 9000]], dtype=np.int64)


def _comparison(document: dict[str, object], metric: str) -> dict[str, object]:
    comparisons = document["comparisons"]
    assert isinstance(comparisons, list)
    return next(item for item in comparisons if item["metric"] == metric)


def test_only_the_judged_metrics_count_towards_the_attributes_verdict() -> None:
    everything = judge.judge_attribute(SAME_RECALL_FPR_GAP, ["a", "b"], unknown=0)
    assert everything["verdict"] == "FAIL"
    recall_only = judge.judge_attribute(SAME_RECALL_FPR_GAP, ["a", "b"], unknown=0, metrics=("tpr",))
    assert recall_only["verdict"] == "PASS"
    assert recall_only["verdicts"] == {"PASS": 1, "INCONCLUSIVE": 0, "FAIL": 0}
    fpr = _comparison(recall_only, "fpr")
    # Still computed and shown, marked as not judged.
    assert (fpr["verdict"], fpr["judged"]) == ("FAIL", False)
    assert _comparison(recall_only, "tpr")["judged"] is True
    assert len(recall_only["comparisons"]) == len(everything["comparisons"]) == 5


def test_a_comparison_below_the_minimum_group_size_cannot_pass() -> None:
    without = judge.judge_attribute(IDENTICAL, ["a", "b"], unknown=0)
    assert without["verdict"] == "PASS"
    assert _comparison(without, "tpr")["note"] is None
    small = judge.judge_attribute(IDENTICAL, ["a", "b"], unknown=0, min_group_size=20_001)
    tpr = _comparison(small, "tpr")
    assert tpr["verdict"] == "INCONCLUSIVE"
    assert tpr["note"] == "the group has 20,000 rows, fewer than the policy's minimum of 20,001: it cannot PASS"
    assert small["verdict"] == "INCONCLUSIVE"
    at_the_minimum = judge.judge_attribute(IDENTICAL, ["a", "b"], unknown=0, min_group_size=20_000)
    assert at_the_minimum["verdict"] == "PASS"


def test_a_small_group_can_still_fail() -> None:
    document = judge.judge_attribute(SAME_RECALL_FPR_GAP, ["a", "b"], unknown=0, min_group_size=50_000)
    fpr = _comparison(document, "fpr")
    assert fpr["verdict"] == "FAIL"
    assert fpr["note"] == "the group has 20,000 rows, fewer than the policy's minimum of 50,000"
    assert document["verdict"] == "FAIL"


def test_a_small_reference_is_named_in_the_note() -> None:
    counts = np.array([[8000, 2000, 1000, 9000], [8, 2, 1, 9]], dtype=np.int64)
    document = judge.judge_attribute(counts, ["a", "b"], unknown=0, reference=1, tolerance=0.9, min_group_size=30)
    tpr = _comparison(document, "tpr")
    assert tpr["group"] == "a"
    assert tpr["verdict"] == "INCONCLUSIVE"
    assert tpr["note"] == "the reference has 20 rows, fewer than the policy's minimum of 30: it cannot PASS"


def test_an_audit_under_a_policy_judges_its_metrics_and_minimum(predictions_csv: Path) -> None:
    # f and m have 5 rows each; with a tolerance of 0.999 every defined comparison passes (the exact
    # bounds of 1 in 3 against 2 in 2 reach a TPR gap of 0.992).
    base = AuditSpec(label="label", attributes=("gender",), prediction="pred", tolerance=0.999)
    lenient = audit_predictions(predictions_csv, base, display_name="p.csv", max_bytes=1 << 30).document
    assert lenient["verdict"] == "PASS"
    assert "policy" not in lenient
    policy = {"version": 3, "tolerance": 0.999, "alpha": 0.05, "metrics": ["tpr"], "min_group_size": 6}
    spec = AuditSpec(**{**base.__dict__, "metrics": ("tpr",), "min_group_size": 6})
    document = audit_predictions(predictions_csv, spec, display_name="p.csv", max_bytes=1 << 30, policy=policy).document
    json.dumps(document, allow_nan=False)
    assert document["policy"] == policy
    gender = document["attributes"]["gender"]
    assert gender["verdict"] == document["verdict"] == "INCONCLUSIVE"
    assert [c["metric"] for c in gender["comparisons"] if c["judged"]] == ["tpr"]
    rows = presentation.attribute_tables(document)[0].comparisons
    fpr = next(row for row in rows if row.metric == "fpr")
    assert not fpr.judged
    assert fpr.note.startswith(
        "not judged under the policy; the group has 5 rows, fewer than the policy's minimum of 6"
    )


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"metrics": ()}, "metrics", "judge one or more of tpr, fpr, equalized_odds, selection_rate, ppv, not none"),
        (
            {"metrics": ("tpr", "auc")},
            "metrics",
            "judge one or more of tpr, fpr, equalized_odds, selection_rate, ppv, not auc",
        ),
        ({"min_group_size": 0}, "min_group_size", "the minimum group size must be a positive integer, not 0"),
    ],
)
def test_impossible_policy_rules_are_refused(change: dict[str, object], field: str, message: str) -> None:
    spec = AuditSpec(**{"label": "label", "attributes": ("gender",), "prediction": "pred", **change})  # type: ignore[arg-type]
    with pytest.raises(AuditSpecError) as caught:
        spec.check()
    assert (caught.value.field, str(caught.value)) == (field, message)
