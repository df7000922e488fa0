"""The plain-language paragraph a committee member reads first (fairness/documents/plain.py), on a
PASS-only, a FAIL and an INCONCLUSIVE-heavy document, and on names from a hostile file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from auditportal.fairness.documents import verdict_documents
from auditportal.fairness.documents.plain import document_plain_summary, quoted, verdict_counts
from auditportal.fairness.files.intersections import group_key
from auditportal.fairness.files.metricsfile import AttributeCounts
from auditportal.fairness.statistics.audit import AuditSpec, audit_predictions
from auditportal.fairness.text import numbers

POLICY = {
    "version": 3,
    "tolerance": 0.05,
    "alpha": 0.05,
    "metrics": ["tpr"],
    "reference_rule": "largest",
    "min_group_size": None,
}


def _trial(groups: dict[str, tuple[int, int, int, int]], **policy: Any) -> dict[str, Any]:
    counts = AttributeCounts(
        columns=("gender",),
        values=tuple((name,) for name in groups),
        groups=tuple(groups),
        counts=list(groups.values()),
        unknown=5,
    )
    return verdict_documents.trial_validation_document(
        counts={"gender": counts},
        step=1200,
        dataset_version={"name": "loans", "number": 2, "sha256": "ab" * 32},
        experiment={"id": 7, "name": "loans-v1", "det_experiment_id": None, "config_yaml": "name: x\n"},
        trial={"number": 3, "det_trial_id": None, "hparams": {}},
        policy={**POLICY, **policy},
    )


def _comparison(document: dict[str, Any], metric: str, group: str) -> dict[str, Any]:
    section = document["attributes"]["gender"]
    return next(item for item in section["comparisons"] if item["metric"] == metric and item["group"] == group)


def test_a_pass_only_document_says_what_was_judged_and_that_everything_passed() -> None:
    document = _trial({"female": (4500, 500, 400, 4600), "male": (9000, 1000, 800, 9200)}, metrics=["tpr", "fpr"])
    assert document["verdict"] == "PASS"
    summary = document_plain_summary(document)
    assert summary.verdict == "PASS"
    assert summary.judged == (
        "This document judged trial 3 of “loans-v1” at validation step 1,200 (30,005 validation rows) for "
        "“gender”, on the true-positive-rate gap (equal opportunity) and the false-positive-rate gap under "
        "fairness policy version 3, where a gap larger than 0.05 (5 percentage points) counts as unfair; the "
        "other metrics are shown below, not judged."
    )
    assert summary.outcome == "The verdict is PASS. All 2 judged comparisons pass: each gap lies within the tolerance."
    assert summary.undecided == ""
    assert summary.text == f"{summary.judged} {summary.outcome}"


def test_a_fail_names_the_group_the_size_of_the_gap_in_words_and_its_interval() -> None:
    document = _trial({"female": (1200, 800, 300, 2700), "male": (2700, 300, 300, 2700)})
    assert document["verdict"] == "FAIL"
    tpr = _comparison(document, "tpr", "female")
    low, high = sorted((abs(tpr["ci_low"]), abs(tpr["ci_high"])))
    summary = document_plain_summary(document)
    assert summary.outcome == (
        "The verdict is FAIL. 1 of 1 judged comparison shows an unfair gap. The true-positive rate of “female” in "
        "“gender” is "
        f"0.300 lower than that of “male” ({tpr['ci_level'] * 100:.4g}% interval {numbers.rate(low)} to "
        f"{numbers.rate(high)})."
    )
    assert summary.undecided == ""


def test_failures_are_listed_worst_first_and_the_rest_counted() -> None:
    groups = {
        "a": (9000, 1000, 500, 9500),  # the reference: most rows
        "b": (500, 500, 50, 950),  # TPR 0.5: 0.4 lower
        "c": (700, 300, 50, 950),  # 0.2 lower
        "d": (1500, 0, 50, 950),  # 0.1 higher
        "e": (600, 400, 50, 950),  # 0.3 lower
    }
    summary = document_plain_summary(_trial(groups))
    assert summary.outcome.startswith(
        "The verdict is FAIL. 4 of 4 judged comparisons show an unfair gap, the largest first."
    )
    named = summary.outcome.split("largest first. ")[1]
    assert (
        named.index("of “b” in “gender” is 0.400 lower")
        < named.index("of “e” in “gender” is 0.300")
        < named.index("“c”")
    )
    assert "“d”" not in named
    assert named.endswith("; and 1 other failing comparison (the tables below list them).")


def test_an_inconclusive_heavy_document_says_what_would_decide_each_group() -> None:
    groups = {
        "ref": (900, 100, 100, 900),
        "a": (20, 5, 4, 20),
        "b": (9, 3, 3, 10),
        "c": (4, 2, 2, 6),
        "d": (2, 1, 1, 2),
        "none": (0, 0, 3, 9),  # no label positives: its TPR is undefined
    }
    document = _trial(groups, metrics=["tpr", "fpr"])
    assert document["verdict"] == "INCONCLUSIVE"
    counts = verdict_counts(document)
    assert counts["FAIL"] == 0
    assert counts["INCONCLUSIVE"] >= 9
    summary = document_plain_summary(document)
    assert summary.outcome.startswith("The verdict is INCONCLUSIVE. No comparison fails, and ")
    assert summary.undecided.startswith(
        f"{counts['INCONCLUSIVE']} comparisons cannot be decided yet. To decide them, with the reference group "
        "growing alongside at its present ratio, "
    )
    needs: dict[str, int] = {}
    for item in document["attributes"]["gender"]["comparisons"]:
        if item["judged"] and item["verdict"] == "INCONCLUSIVE" and item["positives_needed"] is not None:
            needs[item["group"]] = max(needs.get(item["group"], 0), item["positives_needed"])
    ordered = sorted(needs, key=lambda group: -needs[group])
    top = ordered[0]
    has = groups[top][0] + groups[top][1]
    assert (
        f"“{top}” in “gender” would need about {numbers.count(needs[top] - has)} more label positives "
        f"({numbers.count(needs[top])} in all)"
    ) in summary.undecided
    positions = [summary.undecided.index(f"“{group}” in") for group in ordered[:3]]
    assert positions == sorted(positions)  # the largest need first
    assert f"; {len(ordered) - 3} other group fewer (the tables say how many)." in summary.undecided
    assert "“none” in “gender” has no label positives." in summary.undecided


def test_a_family_fail_under_a_headline_that_is_not_fail_says_where_it_holds() -> None:
    document = _trial({"female": (1200, 800, 300, 2700), "male": (2700, 300, 300, 2700)})
    document["verdict"] = "INCONCLUSIVE"  # as when the stricter headline level does not reach FAIL
    outcome = document_plain_summary(document).outcome
    assert outcome.startswith(
        "The verdict is INCONCLUSIVE. 1 of 1 judged comparison shows an unfair gap within its metric's family, "
        "though not at the stricter level held over the whole document."
    )


def test_nothing_to_compare() -> None:
    summary = document_plain_summary(_trial({"male": (10, 2, 3, 20)}))
    assert summary.outcome.startswith("Nothing could be compared")


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_names_from_a_hostile_file_are_quoted_cleaned_and_cut(tmp_path: Path) -> None:
    hostile = "<script>alert(1)</script>\u202e"  # a right-to-left override: it would reorder the sentence
    rows = ["label,pred,gen<der>"]
    rows += ["1,1,m"] * 40 + ["1,0,m"] * 4 + ["0,0,m"] * 40
    rows += [f"1,1,{hostile}"] * 3 + [f"1,0,{hostile}"] * 2 + [f"0,0,{hostile}"] * 3
    path = _write(tmp_path / "a&b.csv", rows)
    outcome = audit_predictions(
        path,
        AuditSpec(label="label", prediction="pred", attributes=("gen<der>",)),
        display_name="a&b.csv",
        max_bytes=10**6,
    )
    summary = document_plain_summary(outcome.document)
    assert summary.judged.startswith("This audit judged 92 rows of “a&b.csv” for “gen<der>”, on ")
    # Every metric is judged when the audit names no policy.
    assert "the other metrics are shown below" not in summary.judged
    assert "“<script>alert(1)</script>\N{REPLACEMENT CHARACTER}” in “gen<der>”" in summary.text
    assert "\u202e" not in summary.text
    assert quoted("x" * 100) == "“" + "x" * 59 + "…”"


def test_an_intersection_names_each_column_and_value(tmp_path: Path) -> None:
    rows = ["label,pred,gender,race"]
    for gender in ("f", "m"):
        for race in ("a", "b"):
            tpr_hits = 30 if (gender, race) != ("f", "b") else 10
            rows += [f"1,1,{gender},{race}"] * tpr_hits + [f"1,0,{gender},{race}"] * (40 - tpr_hits)
            rows += [f"0,0,{gender},{race}"] * 40
    path = _write(tmp_path / "x.csv", rows)
    outcome = audit_predictions(
        path,
        AuditSpec(label="label", prediction="pred", attributes=("gender", "race"), intersect=True, metrics=("tpr",)),
        display_name="x.csv",
        max_bytes=10**6,
    )
    summary = document_plain_summary(outcome.document)
    assert "for “gender”, “race” and the intersection of “gender” and “race”, on" in summary.judged
    assert group_key(("f", "b")) in outcome.document["attributes"]["gender&race"]["groups"]
    assert (
        "The true-positive rate of “gender” = “f” and “race” = “b” is 0.500 lower than that of “gender” = “f” and "
        "“race” = “a” ("
    ) in summary.outcome
    assert "the true-positive rate of “m” in “gender” is 0.250 higher than that of “f” (95% interval" in summary.outcome
    # Only TPR is judged here (the spec's metrics), though no policy is named: the comparisons say so.
    assert "on the true-positive-rate gap (equal opportunity), where" in summary.judged
    assert "the other metrics are shown below, not judged." in summary.judged


@pytest.mark.parametrize("kind", ["audit", "document"])
def test_a_prediction_audit_reads_alike_as_its_result_and_as_its_verdict_document(tmp_path: Path, kind: str) -> None:
    rows = ["label,pred,gender"] + ["1,1,f", "1,0,f", "0,0,f", "1,1,m", "0,0,m", "0,1,m"] * 300
    path = _write(tmp_path / "s.csv", rows)
    policy = {**POLICY, "metrics": ["tpr", "fpr"]}
    spec = AuditSpec(label="label", prediction="pred", attributes=("gender",), metrics=("tpr", "fpr"))
    result = audit_predictions(path, spec, display_name="s.csv", max_bytes=10**6, policy=policy).document
    document = (
        result
        if kind == "audit"
        else verdict_documents.prediction_audit_document(
            result=result, file_name="s.csv", sha256="ab" * 32, rows=1800, parameters={}, policy=policy
        )
    )
    summary = document_plain_summary(document)
    subject = "This audit" if kind == "audit" else "This document"
    assert summary.judged.startswith(f"{subject} judged 1,800 rows of “s.csv” for “gender”, on the true-positive")
    assert "under fairness policy version 3" in summary.judged
    assert summary.outcome == document_plain_summary(result).outcome


def test_a_document_stored_before_the_policy_and_the_group_values_reads_too() -> None:
    # An audit of schema 1: no policy, no "judged", no "columns" or "values", no rows of groups.
    item = {
        "metric": "selection_rate", "group": "b", "reference": "a", "difference": -0.2, "ci_low": -0.3,
        "ci_high": -0.1, "ci_level": 0.95, "verdict": "FAIL", "positives_needed": None,
    }  # fmt: skip
    document = {
        "rows": 40,
        "file": {"name": "old.csv"},
        "tolerance": 0.05,
        "alpha": 0.05,
        "verdict": "FAIL",
        "attributes": {"g": {"reference": "a", "unknown": 0, "groups": {}, "comparisons": [item]}},
    }
    summary = document_plain_summary(document)
    assert summary.judged == (
        "This audit judged 40 rows of “old.csv” for “g”, on the selection-rate gap (demographic parity), where a "
        "gap larger than 0.05 (5 percentage points) counts as unfair."
    )
    assert summary.outcome.endswith(
        "The selection rate of “b” in “g” is 0.200 lower than that of “a” (95% interval 0.100 to 0.300)."
    )
