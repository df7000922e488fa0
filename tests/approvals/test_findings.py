"""fairness.documents.findings: the judged FAIL and INCONCLUSIVE comparisons of a document."""

from __future__ import annotations

from typing import Any

from auditportal.fairness.documents.findings import document_findings, finding_key


def _comparison(metric: str, group: str, verdict: str, judged: bool = True, **extra: Any) -> dict[str, Any]:
    return {"metric": metric, "group": group, "reference": "male", "verdict": verdict, "judged": judged, **extra}


def test_only_judged_comparisons_that_did_not_pass_are_findings_in_document_order() -> None:
    comparisons = [
        _comparison("tpr", "female", "FAIL", difference=-0.2),
        _comparison("fpr", "female", "PASS"),
        _comparison("ppv", "female", "FAIL", judged=False),
        _comparison("selection_rate", "female", "INCONCLUSIVE", positives_needed=812),
    ]
    trial = {"kind": "trial_validation", "attributes": {"gender": {"comparisons": comparisons}}}
    audit = {"kind": "prediction_audit", "audit": {"attributes": {"gender": {"comparisons": comparisons}}}}
    for document in (trial, audit):
        found = document_findings(document, sha256="ab" * 32)
        assert [(f.metric, f.verdict) for f in found] == [("tpr", "FAIL"), ("selection_rate", "INCONCLUSIVE")]
        assert found[0].difference == -0.2
        assert found[1].positives_needed == 812
        assert found[0].label == "gender: tpr of female against male"


def test_keys_tell_every_comparison_apart_and_do_not_change() -> None:
    key = finding_key(document_sha256="a" * 64, attribute="gender", metric="tpr", group="female")
    assert key == finding_key(document_sha256="a" * 64, attribute="gender", metric="tpr", group="female")
    others = {
        finding_key(document_sha256="b" * 64, attribute="gender", metric="tpr", group="female"),
        finding_key(document_sha256="a" * 64, attribute="gender&race", metric="tpr", group="female"),
        finding_key(document_sha256="a" * 64, attribute="gender", metric="fpr", group="female"),
        finding_key(document_sha256="a" * 64, attribute="gender", metric="tpr", group="f"),
    }
    assert key not in others
    assert len(others) == 4


def test_documents_from_before_judged_existed_count_every_comparison() -> None:
    comparison = _comparison("tpr", "female", "INCONCLUSIVE")
    del comparison["judged"]
    document = {"kind": "trial_validation", "attributes": {"gender": {"comparisons": [comparison]}}}
    assert len(document_findings(document, sha256="c" * 64)) == 1
