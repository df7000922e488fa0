from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from auditportal.accounts.models import User
from auditportal.audits.models import PredictionAudit
from tests.audits.conftest import write
from tests.policies.helpers import judge_every_metric


def _run(*args: str) -> str:
    out = StringIO()
    call_command("audit_predictions", *args, stdout=out)
    return out.getvalue()


def _json(*args: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(_run(*args, "--format", "json"))
    return document


@pytest.mark.django_db
def test_json_output_is_one_document_with_the_documented_keys(predictions_csv: Path) -> None:
    document = _json(
        str(predictions_csv), "--label", "label", "--prediction", "pred", "--attribute", "gender",
        "--attribute", "age_group", "--intersect",
    )  # fmt: skip
    audit = PredictionAudit.objects.get()
    assert document["id"] == audit.pk
    assert audit.created_by.username == "portal-cli"
    assert {"rows", "tolerance", "alpha", "policy", "attributes"} <= set(document)
    assert document["tolerance"] == 0.05  # fairness policy version 1's, seeded from FAIRNESS_TOLERANCE
    assert audit.policy is not None
    assert document["policy"] == audit.policy.as_document()
    assert list(document["attributes"]) == ["gender", "age_group", "gender&age_group"]
    gender = document["attributes"]["gender"]
    assert set(gender["groups"]["f"]) >= {"n", "positives", "negatives", "tp", "fn", "fp", "tn", "tpr", "fpr", "fnr"}
    comparison = gender["comparisons"][0]
    assert set(comparison) >= {
        "metric", "group", "difference", "ratio", "ci_low", "ci_high", "p_value", "p_adjusted",
        "noise_floor", "verdict", "positives_needed",
    }  # fmt: skip


@pytest.mark.django_db
def test_the_table_format_shows_groups_comparisons_and_the_verdict(predictions_csv: Path) -> None:
    text = _run(
        str(predictions_csv), "--label", "label", "--score", "score", "--threshold", "0.5",
        "--attribute", "gender", "--reference", "m",
    )  # fmt: skip
    assert "== gender: reference 'm', 2 unknown rows excluded, verdict INCONCLUSIVE" in text
    assert "score column 'score' >= 0.5" in text
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("metric"))
    assert header.split()[:4] == ["metric", "group", "diff", "interval"]
    assert any(line.startswith("equalized_odds  f") for line in lines)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prediction", "nope"], "declared columns not in the file: 'nope' (prediction)"),
        (["--score", "score"], "--threshold: a score column needs a threshold"),
        (["--prediction", "pred", "--label", "score"], "row 3, column 'score': value '0.1' makes the label non-binary"),
        (
            ["--prediction", "pred", "--alpha", "0.2"],
            "--alpha: set by the fairness policy (version 1); administrators change it on /policy/",
        ),
        (
            ["--prediction", "pred", "--tolerance", "0.1"],
            "--tolerance: set by the fairness policy (version 1); administrators change it on /policy/",
        ),
    ],
)
def test_bad_input_exits_non_zero_with_a_clear_message(predictions_csv: Path, args: list[str], message: str) -> None:
    base = [str(predictions_csv), "--label", "label", "--attribute", "age_group"]
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _run(*base, *args)
    assert not PredictionAudit.objects.exists()


@pytest.mark.django_db
def test_an_empty_file_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "empty.csv", "")
    with pytest.raises(CommandError, match=r"^empty.csv: the file is empty \(0 bytes\)"):
        _run(str(path), "--label", "label", "--prediction", "pred", "--attribute", "gender")


def test_a_reviewer_may_act_and_a_data_steward_may_not(predictions_csv: Path, carol: User, alice: User) -> None:
    _run(str(predictions_csv), "--label", "label", "--prediction", "pred", "--attribute", "gender", "--user", "carol")
    assert PredictionAudit.objects.get().created_by == carol
    with pytest.raises(CommandError, match="--user 'alice' holds neither the ML engineer nor the reviewer role"):
        _run(
            str(predictions_csv), "--label", "label", "--prediction", "pred", "--attribute", "gender", "--user", "alice"
        )


@pytest.mark.django_db
def test_fail_on_sets_a_distinct_exit_status_after_printing(tmp_path: Path) -> None:
    rows = ["label,pred,g"] + ["1,1,a"] * 400 + ["0,0,a"] * 400 + ["1,0,b"] * 300 + ["1,1,b"] * 100 + ["0,0,b"] * 400
    path = write(tmp_path / "biased.csv", "\n".join(rows) + "\n")
    out = StringIO()
    with pytest.raises(CommandError, match="the headline verdict is FAIL") as caught:
        call_command(
            "audit_predictions", str(path), "--label", "label", "--prediction", "pred", "--attribute", "g",
            "--format", "json", "--fail-on", "FAIL", stdout=out,
        )  # fmt: skip
    assert caught.value.returncode == 3
    assert json.loads(out.getvalue())["verdict"] == "FAIL"


@pytest.mark.django_db
def test_the_same_audit_run_twice_prints_the_same_document_hash_and_its_policy(predictions_csv: Path) -> None:
    args = (str(predictions_csv), "--label", "label", "--prediction", "pred", "--attribute", "gender,age_group")
    first, second = _json(*args), _json(*args)
    assert first["id"] != second["id"]
    assert first["document_sha256"] == second["document_sha256"]
    documents = {audit.pk: audit.verdict_documents.get() for audit in PredictionAudit.objects.all()}
    assert first["document_sha256"] == documents[first["id"]].sha256
    assert first["policy"] == {
        "version": 1,
        "tolerance": 0.05,
        "alpha": 0.05,
        "metrics": ["tpr"],
        "reference_rule": "largest",
        "min_group_size": None,
    }
    text = _run(*args)
    assert text.rstrip().endswith(f"verdict document sha256 {first['document_sha256']} (policy v1)")


@pytest.mark.django_db
def test_the_table_says_not_decidable_with_the_reason_where_no_size_is_a_plan(tmp_path: Path) -> None:
    # TPR 0.749 on 4,000 positives against 0.80 on 20,000: the gap sits next to delta.
    def rows(gender: str, tp: int, fn: int, fp: int, tn: int) -> str:
        cells = [("1,1", tp), ("1,0", fn), ("0,1", fp), ("0,0", tn)]
        return "".join(f"{label_pred},{gender}\n" * n for label_pred, n in cells)

    path = tmp_path / "near.csv"
    path.write_text("label,pred,gender\n" + rows("a", 16_000, 4_000, 500, 4_500) + rows("b", 2_996, 1_004, 100, 900))
    text = _run(str(path), "--label", "label", "--prediction", "pred", "--attribute", "gender")
    (line,) = [line for line in text.splitlines() if line.startswith("tpr ")]
    cells = [cell.strip() for cell in line.split("  ") if cell.strip()]
    verdict = cells.index("INCONCLUSIVE")
    assert cells[verdict + 1] == "not decidable"  # the positives-needed column
    # The note is the table's last column (the ratio's columns come between).
    assert cells[-1].startswith("not decidable at this gap: the data at hand would already decide a gap")


def _family_fails_headline_does_not(tmp_path: Path) -> Path:
    """TPR 0.705 against 0.80 on 1,000 positives each: beyond δ at the family's level (95%), not at
    the headline's (under a policy judging all five metrics: 99% for this one-comparison family)."""
    cells = {"a": (800, 200, 100, 900), "b": (705, 295, 100, 900)}
    rows = ["label,pred,g"]
    for group, (tp, fn, fp, tn) in cells.items():
        rows += [f"1,1,{group}"] * tp + [f"1,0,{group}"] * fn + [f"0,1,{group}"] * fp + [f"0,0,{group}"] * tn
    return write(tmp_path / "edge.csv", "\n".join(rows) + "\n")


@pytest.mark.django_db
def test_fail_on_follows_the_headline_not_the_worst_family(tmp_path: Path) -> None:
    judge_every_metric()  # five judged families (the default judges tpr only)
    path = _family_fails_headline_does_not(tmp_path)
    args = (str(path), "--label", "label", "--prediction", "pred", "--attribute", "g", "--format", "json")
    document = json.loads(_run(*args, "--fail-on", "FAIL"))  # exits 0: the headline is not FAIL
    section = document["attributes"]["g"]
    assert section["verdict"] == "FAIL"
    assert next(c for c in section["comparisons"] if c["metric"] == "tpr")["verdict"] == "FAIL"
    headline = document["headline"]
    assert document["verdict"] == headline["verdict"] == "INCONCLUSIVE"
    assert (headline["families"], headline["alpha"], headline["fails"]) == (5, 0.05, [])
    assert headline["level"] == pytest.approx(0.99)
    assert set(document["levels"]) == {"comparison", "attribute", "headline", "p_adjusted"}
    assert PredictionAudit.objects.get(pk=document["id"]).verdict == "INCONCLUSIVE"
    with pytest.raises(CommandError, match="the headline verdict is INCONCLUSIVE") as caught:
        _run(*args, "--fail-on", "INCONCLUSIVE")
    assert caught.value.returncode == 3


@pytest.mark.django_db
def test_the_table_states_the_level_of_each_verdict(tmp_path: Path) -> None:
    judge_every_metric()  # five judged families (the default judges tpr only)
    text = _run(
        str(_family_fails_headline_does_not(tmp_path)), "--label", "label", "--prediction", "pred", "--attribute", "g"
    )
    assert (
        "headline verdict: INCONCLUSIVE (held at alpha 0.05 over all 5 judged families: a FAIL needs an interval at "
        "the family's level with alpha/5 entirely beyond ±δ, a PASS every judged comparison to PASS at its family's "
        "level)"
    ) in text
    assert (
        "verdict FAIL (the worst of its metrics' verdicts; each metric's comparisons are held at alpha within "
        "their family)"
    ) in text
    assert "verdict (family α)" in text
