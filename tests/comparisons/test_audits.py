"""Two prediction audits of the same file, compared row by row with the file given again: each model taken
as its audit took it, held to its audit's counts, both audits recorded on the comparison; bad input names
the field (docs/comparisons.md, "Two audits")."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.audits import services as audit_services
from auditportal.audits.models import PredictionAudit
from auditportal.comparisons import audit_services as comparison_audits
from auditportal.comparisons import services
from auditportal.comparisons.models import ComparisonSource, PairedComparison
from auditportal.evidence.models import VerdictDocument
from auditportal.evidence.selectors import verdict_document_of_audit
from auditportal.fairness.errors import UserError
from auditportal.fairness.statistics.audit import AuditSpec
from auditportal.fairness.statistics.paired_file import PairedSpec, model_counts
from tests.comparisons.conftest import paired_csv_text
from tests.factories import PredictionAuditFactory, client_for

pytestmark = pytest.mark.django_db

TEXT = paired_csv_text(rows=1500, seed=4)


def _audit(user: User, *, text: str = TEXT, name: str = "paired.csv", **spec: Any) -> PredictionAudit:
    values: dict[str, Any] = {"label": "label", "attributes": ("gender",), **spec}
    return PredictionAuditFactory.create(created_by=user, original_name=name, content=text, spec=AuditSpec(**values))


@pytest.fixture
def scored(tmp_path: Path) -> Path:
    path = tmp_path / "paired.csv"
    path.write_text(TEXT, encoding="utf-8")
    return path


@pytest.fixture
def audits(bob: User) -> tuple[PredictionAudit, PredictionAudit]:
    return _audit(bob, prediction="model_a"), _audit(bob, prediction="model_b")


def _compare(
    user: User, champion: PredictionAudit, challenger: PredictionAudit, source: Path | None
) -> PairedComparison:
    return comparison_audits.comparison_create_from_audits(
        user=user,
        champion=champion,
        challenger=challenger,
        source=source,
        original_name=source.name if source else "paired.csv",
    )


def test_two_audits_of_one_file_compare_as_the_file_with_both_columns_does(
    bob: User, audits: tuple[PredictionAudit, PredictionAudit], scored: Path
) -> None:
    champion, challenger = audits
    comparison = _compare(bob, champion, challenger, scored)
    from_file = services.comparison_create(
        user=bob,
        source=scored,
        original_name="paired.csv",
        spec=PairedSpec.from_input(label="label", attributes="gender", champion="model_a", challenger="model_b"),
    )
    # The same rows, the same predictions: every number of the comparison is the file comparison's.
    assert comparison.result["attributes"] == from_file.result["attributes"]
    assert comparison.result["agreement"] == from_file.result["agreement"]
    assert comparison.source == ComparisonSource.AUDITS
    assert (comparison.champion_audit_id, comparison.challenger_audit_id) == (champion.pk, challenger.pk)
    assert comparison.champion == f"audit {champion.pk} (model_a)"
    assert comparison.sha256 == champion.sha256 == challenger.sha256
    # What a reviewer sees was paired: both audits, their file's SHA-256 and their frozen documents.
    for role, audit in (("champion", champion), ("challenger", challenger)):
        recorded = comparison.result[role]
        assert recorded["audit"] == audit.pk
        assert recorded["audit_sha256"] == audit.sha256
        assert recorded["prediction"] == audit.parameters["prediction"]
        assert recorded["document"]["sha256"] == verdict_document_of_audit(audit=audit).sha256
        assert comparison.parameters[f"{role}_audit"]["audit"] == audit.pk
    document = VerdictDocument.objects.get(paired_comparison=comparison)
    frozen = json.loads(document.canonical)
    assert frozen["comparison"]["champion"]["audit"] == champion.pk
    assert frozen["parameters"]["challenger_audit"]["audit_sha256"] == challenger.sha256
    event = Event.objects.filter(verb=Verb.PAIRED_COMPARISON_CREATED).order_by("id").first()
    assert event is not None
    assert (event.data["champion_audit"], event.data["challenger_audit"]) == (champion.pk, challenger.pk)


def test_each_models_counts_in_the_pairing_are_its_audits_counts(
    bob: User, audits: tuple[PredictionAudit, PredictionAudit], scored: Path
) -> None:
    """The marginal check, shown: each model's tp, fn, fp and tn per group, summed out of the paired
    table, equal what its audit recorded (and numpy's count of the file)."""
    from auditportal.fairness.statistics import paired_audits
    from auditportal.fairness.statistics.paired_file import OutputsSpec, compare_outputs

    champion, challenger = audits
    models = [paired_audits.AuditedModel(a.pk, a.parameters, a.result) for a in audits]
    spec: OutputsSpec = paired_audits.outputs_spec(models[0], models[1], tolerance=0.05, alpha=0.05)
    outcome = compare_outputs(scored, spec, display_name="paired.csv", max_bytes=1 << 30)
    groups, cells, _ = outcome.tables["gender"]
    frame = np.genfromtxt(scored, delimiter=",", names=True, dtype=None, encoding="utf-8")
    for role, audit, column in (("champion", champion, "model_a"), ("challenger", challenger, "model_b")):
        counts = model_counts(cells, role)
        for index, group in enumerate(groups):
            stored = audit.result["attributes"]["gender"]["groups"][group]
            assert counts[index].tolist() == [stored["tp"], stored["fn"], stored["fp"], stored["tn"]]
            rows = frame["gender"] == group
            label, predicted = frame["label"][rows], frame[column][rows]
            assert counts[index].tolist() == [
                int(np.sum((label == 1) & (predicted == 1))),
                int(np.sum((label == 1) & (predicted == 0))),
                int(np.sum((label == 0) & (predicted == 1))),
                int(np.sum((label == 0) & (predicted == 0))),
            ]
        assert paired_audits.marginal_mismatches(outcome, models[MODELS_INDEX[role]], role) == []


MODELS_INDEX = {"champion": 0, "challenger": 1}


def test_counts_that_differ_from_the_audits_are_refused_and_nothing_is_stored(
    bob: User, audits: tuple[PredictionAudit, PredictionAudit], scored: Path
) -> None:
    champion, challenger = audits
    result = challenger.result
    result["attributes"]["gender"]["groups"]["f"]["tp"] += 1
    PredictionAudit.objects.filter(pk=challenger.pk).update(result=result)
    challenger.refresh_from_db()
    with pytest.raises(UserError) as caught:
        _compare(bob, champion, challenger, scored)
    assert caught.value.field == "challenger_audit"
    message = str(caught.value)
    assert f"the file's counts for audit {challenger.pk}'s model differ from the counts the audit recorded" in message
    assert "'gender' = 'f' tp" in message
    assert not PairedComparison.objects.exists()


def test_score_audits_at_two_thresholds_of_one_column_and_a_prediction_audit_pair(
    bob: User, scored: Path, tmp_path: Path
) -> None:
    low = _audit(bob, score="score_a", threshold=0.5)
    high = _audit(bob, score="score_a", threshold=0.7)
    comparison = _compare(bob, low, high, scored)
    assert comparison.result["output"] == "score"
    assert comparison.result["champion"]["threshold"] == 0.5
    assert comparison.result["challenger"]["threshold"] == 0.7
    # A higher threshold on the same scores never selects more: B's selection rate is below A's.
    groups = comparison.result["attributes"]["gender"]["metrics"]["selection_rate"]["groups"]
    assert all(row["difference"] < 0 for row in groups.values())
    mixed = _compare(bob, _audit(bob, prediction="model_b"), low, scored)
    assert mixed.result["output"] == "mixed"
    assert mixed.result["challenger"]["score"] == "score_a"


def test_a_frozen_what_if_audit_is_read_with_its_group_thresholds(
    bob: User, scored: Path, dataset_storage: Path
) -> None:
    from auditportal.fairness.statistics.whatif import Thresholds

    item = audit_services.whatif_start(
        user=bob,
        source=scored,
        original_name="paired.csv",
        spec=AuditSpec(label="label", score="score_b", threshold=0.5, attributes=("gender",)),
    )
    frozen = audit_services.whatif_freeze(
        user=bob, item=item, thresholds=Thresholds(threshold=0.5, attribute="gender", groups={"f": 0.62})
    )
    plain = _audit(bob, score="score_b", threshold=0.5)
    comparison = _compare(bob, plain, frozen, scored)
    assert comparison.result["challenger"]["thresholds"] == {"attribute": "gender", "groups": {"f": 0.62}}
    rates = comparison.result["attributes"]["gender"]["metrics"]["selection_rate"]["groups"]
    # Only group f's threshold moved: m's predictions are the same, f's fewer.
    assert rates["m"]["table"]["only_champion"] == rates["m"]["table"]["only_challenger"] == 0
    assert rates["f"]["difference"] < 0


# --------------------------------------------------------------------------------------------- refusals


def test_the_same_audit_twice_a_retired_audit_and_audits_of_two_files_are_refused(
    bob: User, carol: User, audits: tuple[PredictionAudit, PredictionAudit], scored: Path
) -> None:
    champion, challenger = audits
    with pytest.raises(UserError, match="is also the champion") as same:
        _compare(bob, champion, champion, scored)
    assert same.value.field == "challenger_audit"
    other = _audit(bob, prediction="model_b", text=paired_csv_text(rows=1500, seed=9), name="other.csv")
    with pytest.raises(UserError, match="two audits are paired only when they audited the same file") as files:
        _compare(bob, champion, other, scored)
    assert files.value.field == "challenger_audit"
    audit_services.prediction_audit_retire(user=carol, audit=champion, reason="the vendor's file was wrong")
    with pytest.raises(UserError, match="retired audit is no longer relied on") as retired:
        _compare(bob, champion, challenger, scored)
    assert retired.value.field == "champion_audit"
    assert "the vendor's file was wrong" in str(retired.value)
    assert not PairedComparison.objects.exists()


def test_audits_of_another_label_or_other_attributes_or_the_same_predictions_are_refused(
    bob: User, scored: Path
) -> None:
    champion = _audit(bob, prediction="model_a")
    cases = [
        (_audit(bob, prediction="model_b", positive="0"), "two audits are paired only on the same label"),
        (_audit(bob, prediction="model_b", attributes=("model_a",)), "paired only on the same attributes"),
        (_audit(bob, prediction="model_b", unknown_tokens=("", "f")), "the groups differ"),
        (_audit(bob, prediction="model_a"), "there is nothing to compare"),
    ]
    for challenger, message in cases:
        with pytest.raises(UserError, match=message) as caught:
            _compare(bob, champion, challenger, scored)
        assert caught.value.field == "challenger_audit"
    assert not PairedComparison.objects.exists()


def test_a_missing_file_or_another_file_is_refused_naming_the_file(
    bob: User, audits: tuple[PredictionAudit, PredictionAudit], tmp_path: Path
) -> None:
    champion, challenger = audits
    with pytest.raises(UserError, match="give the file both audits audited") as missing:
        _compare(bob, champion, challenger, None)
    assert missing.value.field == "file"
    edited = tmp_path / "paired.csv"
    edited.write_text(TEXT.replace("\n0,", "\n1,", 1), encoding="utf-8")
    with pytest.raises(UserError, match="give that file, byte for byte") as other:
        _compare(bob, champion, challenger, edited)
    assert other.value.field == "file"
    assert f"not the file audits {champion.pk} and {challenger.pk} audited" in str(other.value)
    assert not PairedComparison.objects.exists()


# ------------------------------------------------------------------------------------------------- API


def _post(user: User, data: dict[str, Any]) -> Any:
    return client_for(user).post(reverse("api-comparison-audits"), data)


def _upload(text: str = TEXT, name: str = "paired.csv") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode(), content_type="text/csv")


def test_the_api_compares_two_audits_with_the_file_sent_again(
    bob: User, audits: tuple[PredictionAudit, PredictionAudit]
) -> None:
    champion, challenger = audits
    answer = _post(bob, {"file": _upload(), "champion_audit": champion.pk, "challenger_audit": challenger.pk})
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert body["source"] == "audits"
    assert body["champion"]["audit"] == champion.pk
    assert body["challenger"]["audit_sha256"] == challenger.sha256
    assert body["documents"][0]["sha256"]
    again = client_for(bob).get(reverse("api-comparison", args=[body["id"]])).json()
    assert again["challenger"]["audit"] == challenger.pk


@pytest.mark.parametrize(
    ("case", "field", "message"),
    [
        ("one audit only", "challenger_audit", "a paired comparison needs two audits"),
        ("same audit twice", "challenger_audit", "is also the champion"),
        ("no file", "file", "send the file both audits audited"),
        ("another file", "file", "give that file, byte for byte"),
    ],
)
def test_the_api_names_the_field_of_bad_input(
    bob: User, audits: tuple[PredictionAudit, PredictionAudit], case: str, field: str, message: str
) -> None:
    champion, challenger = audits
    data: dict[str, Any] = {"file": _upload(), "champion_audit": champion.pk, "challenger_audit": challenger.pk}
    if case == "one audit only":
        del data["challenger_audit"]
    elif case == "same audit twice":
        data["challenger_audit"] = champion.pk
    elif case == "no file":
        del data["file"]
    else:
        data["file"] = _upload(TEXT + "1,1,1,0.5,0.5,f\n")
    answer = _post(bob, data)
    assert answer.status_code == 400
    assert field in json.dumps(answer.json())
    assert message in json.dumps(answer.json())
    assert not PairedComparison.objects.exists()


def test_an_audit_that_does_not_exist_is_404_and_an_account_without_a_role_403(
    bob: User, oscar: User, audits: tuple[PredictionAudit, PredictionAudit]
) -> None:
    champion, _ = audits
    data = {"file": _upload(), "champion_audit": champion.pk, "challenger_audit": 10**9}
    assert _post(bob, data).status_code == 404
    assert _post(oscar, {**data, "file": _upload()}).status_code == 403


def test_the_file_comparison_api_sends_audits_to_their_own_operation(bob: User) -> None:
    answer = client_for(bob).post(reverse("api-comparison-list"), {"champion_audit": 1, "challenger_audit": 2})
    assert answer.status_code == 400
    assert "POST /api/v1/comparisons/audits/" in json.dumps(answer.json())


# --------------------------------------------------------------------------------------------- command


def _run(*args: str) -> str:
    out = StringIO()
    call_command("compare_predictions", *args, stdout=out)
    return out.getvalue()


def test_the_command_compares_two_audits_of_the_file(
    bob: User, audits: tuple[PredictionAudit, PredictionAudit], scored: Path
) -> None:
    champion, challenger = audits
    args = ["--champion-audit", str(champion.pk), "--challenger-audit", str(challenger.pk), str(scored)]
    printed = json.loads(_run(*args, "--user", "bob", "--format", "json"))
    comparison = PairedComparison.objects.get()
    assert printed["id"] == comparison.pk
    assert printed["champion"]["audit"] == champion.pk
    assert comparison.created_by == bob


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--champion-audit", "{a}"), "--challenger-audit is required"),
        (("--champion-audit", "{a}", "--challenger-audit", "{a}", "{file}"), "--challenger-audit: audit"),
        (("--champion-audit", "{a}", "--challenger-audit", "{b}"), "FILE: name the file both audits audited"),
        (("--champion-audit", "{a}", "--challenger-audit", "999999", "{file}"), "no such audit"),
        (("--champion-audit", "{a}", "--challenger-audit", "{b}", "--label", "x", "{file}"), "--label: taken from"),
        (("--champion-audit", "{a}", "--challenger-audit", "{b}", "--positive", "0", "{file}"), "--positive: taken"),
        (("--champion-audit", "{a}", "--challenger-audit", "{b}", "{other}"), "FILE: other.csv has SHA-256"),
    ],
)
def test_the_command_names_the_flag_of_bad_input(
    bob: User,
    audits: tuple[PredictionAudit, PredictionAudit],
    scored: Path,
    tmp_path: Path,
    args: tuple[str, ...],
    message: str,
) -> None:
    other = tmp_path / "other.csv"
    other.write_text(TEXT + "1,1,1,0.5,0.5,f\n", encoding="utf-8")
    values = {"a": audits[0].pk, "b": audits[1].pk, "file": scored, "other": other}
    with pytest.raises(CommandError) as caught:
        _run(*(arg.format(**values) for arg in args), "--user", "bob")
    assert message in str(caught.value)
    assert not PairedComparison.objects.exists()


@pytest.mark.parametrize(
    "thresholds",
    [
        {"threshold": 0.5, "attribute": "gender", "groups": {"f": 0.41, "x": 0.6}},
        {"threshold": 0.47, "attribute": "gender&age", "groups": {"f&young": 0.3, "m&old": 0.651}},
    ],
    ids=["attribute", "intersection"],
)
def test_group_thresholds_on_an_attribute_or_the_intersection_take_the_what_ifs_predictions(
    tmp_path: Path, thresholds: dict[str, Any]
) -> None:
    """No database: an audit frozen from a what-if (its document is whatif.document_at's) is read back
    from the file with its group thresholds, and its counts are the document's."""
    from auditportal.fairness.statistics import paired_audits, whatif
    from auditportal.fairness.statistics.paired_file import compare_outputs
    from tests.audits.test_whatif_core import _scored

    path = _scored(tmp_path / "scores.csv", rows=3000)
    spec = AuditSpec(label="label", score="score", threshold=0.5, attributes=("gender", "age"), intersect=True)
    prepared = whatif.prepare(path, spec, display_name="scores.csv", max_bytes=1 << 30)
    chosen = whatif.Thresholds(
        threshold=thresholds["threshold"], attribute=thresholds["attribute"], groups=thresholds["groups"]
    )
    frozen = paired_audits.AuditedModel(
        2,
        {**spec.parameters(), "threshold": chosen.threshold, "thresholds": chosen.as_json()},
        whatif.document_at(prepared, chosen),
    )
    plain = paired_audits.AuditedModel(
        1, {**spec.parameters(), "threshold": 0.45}, whatif.document_at(prepared, whatif.Thresholds(0.45))
    )
    outputs = paired_audits.outputs_spec(plain, frozen, tolerance=0.05, alpha=0.05)
    assert dict(outputs.challenger.override_groups) == thresholds["groups"]
    outcome = compare_outputs(path, outputs, display_name="scores.csv", max_bytes=1 << 30)
    assert paired_audits.marginal_mismatches(outcome, plain, "champion") == []
    assert paired_audits.marginal_mismatches(outcome, frozen, "challenger") == []
    # Read without its group thresholds, the frozen audit's counts are not its document's.
    bare = paired_audits.AuditedModel(2, {**spec.parameters(), "threshold": chosen.threshold}, frozen.document)
    outcome = compare_outputs(
        path, paired_audits.outputs_spec(plain, bare, tolerance=0.05, alpha=0.05), display_name="s", max_bytes=1 << 30
    )
    assert paired_audits.marginal_mismatches(outcome, bare, "challenger")
