"""Changing the fairness policy: earlier verdicts keep theirs, later ones are judged under the new one."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.audits import services as audit_services
from auditportal.audits.models import PredictionAudit
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments.models import Trial, TrialVerdict
from auditportal.experiments.verdicts import trial_verdicts_update
from auditportal.fairness.statistics.audit import AuditSpec
from auditportal.policies.models import FairnessPolicy
from tests.audits.conftest import PREDICTIONS_CSV
from tests.factories import TrialFactory, client_for
from tests.policies.helpers import policy_change

SPEC = AuditSpec(label="label", prediction="pred", attributes=("gender",))
# recall 0.60 vs 0.90 over thousands of positives: FAIL under any tolerance below 0.25
GAP = {"female": (1200, 800, 300, 2700), "male": (2700, 300, 300, 2700)}


def _metrics(groups: dict[str, tuple[int, int, int, int]]) -> dict[str, float | None]:
    metrics: dict[str, float | None] = {"count/gender/unknown": 0.0}
    for group, cells in groups.items():
        for cell, value in zip(("tp", "fn", "fp", "tn"), cells, strict=True):
            metrics[f"count/gender/{group}/{cell}"] = float(value)
    return metrics


def _audit(user: User, tmp_path: Path) -> PredictionAudit:
    source = tmp_path / "scores.csv"
    source.write_text(PREDICTIONS_CSV, encoding="utf-8")
    return audit_services.prediction_audit_run(user=user, source=source, original_name="scores.csv", spec=SPEC)


@pytest.fixture
def trial(demo_version: DatasetVersion, bob: User) -> Trial:
    return TrialFactory.create(experiment__dataset_version=demo_version, experiment__launched_by=bob)


def test_a_policy_change_leaves_existing_audits_untouched_and_judges_new_ones(
    bob: User, erin: User, tmp_path: Path, dataset_storage: Path
) -> None:
    before = _audit(bob, tmp_path)
    assert before.policy is not None
    assert (before.policy.version, before.verdict) == (1, "INCONCLUSIVE")
    assert before.result["policy"] == before.policy.as_document()
    stored = PredictionAudit.objects.values("verdict", "result", "policy", "parameters").get(pk=before.pk)

    # A lenient tolerance that every comparison of this file passes (groups of 5 rows: the exact bounds
    # of 1 in 3 against 2 in 2 reach a TPR gap of 0.992).
    policy = policy_change(user=erin, tolerance=0.999, reason="lenient, for the test")
    assert Event.objects.filter(verb=Verb.FAIRNESS_POLICY_CREATED, target_id=str(policy.pk)).exists()

    assert PredictionAudit.objects.values("verdict", "result", "policy", "parameters").get(pk=before.pk) == stored
    after = _audit(bob, tmp_path)
    assert after.policy == policy
    assert (after.verdict, after.result["tolerance"], after.result["policy"]["version"]) == ("PASS", 0.999, 2)
    event = Event.objects.filter(verb=Verb.PREDICTION_AUDIT_CREATED).latest("pk")
    assert event.data["policy"] == 2


def test_a_policy_change_leaves_trial_verdicts_untouched_until_the_next_validation(trial: Trial, erin: User) -> None:
    (verdict,) = trial_verdicts_update(trial=trial, step=5, metrics=_metrics(GAP))
    assert verdict.policy is not None
    assert (verdict.policy.version, verdict.verdict, verdict.tolerance) == (1, "FAIL", 0.05)
    stored = TrialVerdict.objects.values().get(pk=verdict.pk)

    policy_change(user=erin, tolerance=0.4, reason="lenient, for the test")
    assert TrialVerdict.objects.values().get(pk=verdict.pk) == stored

    (later,) = trial_verdicts_update(trial=trial, step=6, metrics=_metrics(GAP))
    assert later.policy is not None
    assert (later.policy.version, later.verdict, later.tolerance, later.step) == (2, "PASS", 0.4, 6)
    changed = Event.objects.filter(verb=Verb.TRIAL_VERDICT_CHANGED).latest("pk")
    assert changed.data == {"attribute": "gender", "from": "FAIL", "to": "PASS", "step": 6, "policy": 2}


def test_a_minimum_group_size_applies_to_trial_verdicts(trial: Trial, erin: User) -> None:
    same = {"female": (2700, 300, 300, 2700), "male": (2700, 300, 300, 2700)}
    (verdict,) = trial_verdicts_update(trial=trial, step=5, metrics=_metrics(same))
    assert verdict.verdict == "PASS"
    policy_change(user=erin, min_group_size=10_000, reason="larger groups before a PASS")
    (verdict,) = trial_verdicts_update(trial=trial, step=6, metrics=_metrics(same))
    assert verdict.verdict == "INCONCLUSIVE"
    (tpr,) = [c for c in verdict.document["comparisons"] if c["metric"] == "tpr"]
    assert tpr["note"] == "the group has 6,000 rows, fewer than the policy's minimum of 10,000: it cannot PASS"


def test_the_experiment_page_and_its_progress_show_the_verdicts_policy(trial: Trial, bob: User) -> None:
    trial_verdicts_update(trial=trial, step=5, metrics=_metrics(GAP))
    client = client_for(bob)
    html = client.get(reverse("experiments:detail", args=[trial.experiment.pk])).content.decode()
    assert '<a class="policy" href="/policy/#v1"><small>policy v1</small></a>' in html
    progress = client.get(reverse("experiments:progress", args=[trial.experiment.pk])).json()
    (row,) = progress["trials"]
    assert row["verdicts"][0]["policy_version"] == 1


def test_the_audit_form_has_no_tolerance_and_names_the_policy(bob: User, erin: User) -> None:
    policy_change(user=erin, tolerance=0.1, alpha=0.01, reason="stricter alpha")
    response = client_for(bob).get(reverse("audits:prediction-new"))
    form = response.context["form"]
    assert "tolerance" not in form.fields
    assert "alpha" not in form.fields
    html = response.content.decode()
    assert 'Judged under <a href="/policy/#v2">fairness policy v2</a>: δ=0.1, α=0.01' in html


def test_the_audit_page_shows_the_policy_version_with_a_link(bob: User, tmp_path: Path, dataset_storage: Path) -> None:
    audit = _audit(bob, tmp_path)
    html = client_for(bob).get(reverse("audits:prediction", args=[audit.pk])).content.decode()
    assert '<a href="/policy/#v1">version 1</a>' in html


@pytest.mark.parametrize("field", ["tolerance", "alpha"])
def test_the_audit_api_refuses_a_tolerance_or_alpha(field: str, bob: User, erin: User, dataset_storage: Path) -> None:
    policy_change(user=erin, tolerance=0.1, reason="stricter")
    upload = SimpleUploadedFile("scores.csv", PREDICTIONS_CSV.encode(), content_type="text/csv")
    data = {"file": upload, "label": "label", "prediction": "pred", "attributes": ["gender"], field: "0.2"}
    response = client_for(bob).post("/api/v1/audits/predictions/", data)
    assert response.status_code == 400
    assert response.json() == {
        "detail": "set by the fairness policy (version 2); administrators change it on /policy/",
        "field": field,
    }
    assert not PredictionAudit.objects.exists()


def test_the_audit_command_refuses_tolerance_naming_the_flag(bob: User, predictions_csv: Path) -> None:
    with pytest.raises(CommandError) as caught:
        call_command(
            "audit_predictions", str(predictions_csv), "--label", "label", "--prediction", "pred",
            "--attribute", "gender", "--tolerance", "0.2", stdout=StringIO(),
        )  # fmt: skip
    assert (
        str(caught.value) == "--tolerance: set by the fairness policy (version 1); administrators change it on /policy/"
    )
    assert not PredictionAudit.objects.exists()
    assert FairnessPolicy.objects.count() == 1
