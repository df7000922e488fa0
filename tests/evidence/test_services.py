from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.http import Http404

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.audits import services as audit_services
from auditportal.audits.models import PredictionAudit
from auditportal.audits.selectors import prediction_audit_list
from auditportal.datasets.models import DatasetVersion
from auditportal.datasets.services import DatasetIntegrityError
from auditportal.evidence.models import VerdictDocument
from auditportal.evidence.rules import FreezerRequired
from auditportal.evidence.selectors import verdict_document_list
from auditportal.experiments import services as experiment_services
from auditportal.experiments.models import Experiment, Trial
from auditportal.experiments.selectors import experiment_list
from auditportal.fairness.statistics.audit import AuditSpec
from auditportal.policies.selectors import policy_active
from tests.audits.conftest import PREDICTIONS_CSV
from tests.evidence.helpers import policy_v2, trial_with_validations
from tests.experiments.conftest import poll_until_done


def _run_audit(user: User, tmp_path: Path) -> PredictionAudit:
    source = tmp_path / "scores.csv"
    source.write_text(PREDICTIONS_CSV, encoding="utf-8")
    spec = AuditSpec(label="label", prediction="pred", attributes=("gender", "age_group"), intersect=True)
    return audit_services.prediction_audit_run(user=user, source=source, original_name="scores.csv", spec=spec)


def _frozen_events() -> list[dict[str, Any]]:
    return list(Event.objects.filter(verb=Verb.VERDICT_DOCUMENT_FROZEN).order_by("pk").values_list("data", flat=True))


@pytest.fixture
def trial(demo_version: DatasetVersion, bob: User) -> Trial:
    return trial_with_validations(demo_version, bob)


def test_a_prediction_audit_is_frozen_with_it(bob: User, tmp_path: Path) -> None:
    audit = _run_audit(bob, tmp_path)
    (document,) = audit.verdict_documents.all()
    assert (document.kind, document.step, document.trigger, document.frozen_by) == (
        "prediction_audit",
        None,
        "created",
        None,
    )
    assert document.policy == policy_active()
    assert hashlib.sha256(document.canonical.encode()).hexdigest() == document.sha256
    value = json.loads(document.canonical)
    assert value["audit"] == audit.result
    assert value["file"] == {"name": "scores.csv", "sha256": audit.sha256, "rows": audit.num_rows}
    assert value["parameters"] == audit.parameters
    assert value["policy"] == policy_active().as_document()
    assert value["verdict"] == audit.result["verdict"]
    assert _frozen_events() == [
        {
            "kind": "prediction_audit",
            "subject": f"audits.predictionaudit:{audit.pk}",
            "step": None,
            "sha256": document.sha256,
            "policy": 1,
            "trigger": "created",
            "verdict": audit.result["verdict"],
        }
    ]


def test_the_same_audit_run_twice_gives_one_document_hash(bob: User, carol: User, tmp_path: Path) -> None:
    first, second = _run_audit(bob, tmp_path), _run_audit(carol, tmp_path)
    assert first.pk != second.pk
    one, two = first.verdict_documents.get(), second.verdict_documents.get()
    assert one.pk != two.pk
    assert one.sha256 == two.sha256
    assert one.canonical == two.canonical


def test_an_engineer_freezes_any_validation_step_from_its_stored_counts(trial: Trial, bob: User) -> None:
    document = experiment_services.verdict_document_freeze_trial(user=bob, trial=trial, step=2)
    assert (document.kind, document.trial, document.step, document.trigger, document.frozen_by) == (
        "trial_validation",
        trial,
        2,
        "requested",
        bob,
    )
    value = document.document
    assert value["step"] == 2
    female = value["attributes"]["gender"]["groups"]["female"]
    assert (female["tp"], female["fn"], female["fp"], female["tn"]) == (1200, 800, 300, 2700)
    assert value["verdict"] == "FAIL"
    experiment = trial.experiment
    assert value["experiment"]["config_sha256"] == hashlib.sha256(experiment.config_yaml.encode()).hexdigest()
    assert value["trial"] == {"number": trial.number, "det_trial_id": None, "hparams": trial.hparams}
    version = experiment.dataset_version
    assert value["dataset_version"] == {
        "name": version.dataset.name,
        "number": version.number,
        "sha256": version.sha256,
    }
    later = experiment_services.verdict_document_freeze_trial(user=bob, trial=trial, step=4)
    assert later.document["attributes"]["gender"]["unknown"] == 5
    assert later.sha256 != document.sha256
    assert [event["step"] for event in _frozen_events()] == [2, 4]


def test_a_reviewer_may_freeze_too(trial: Trial, carol: User) -> None:
    assert experiment_services.verdict_document_freeze_trial(user=carol, trial=trial, step=4).frozen_by == carol


def test_freezing_the_same_content_again_returns_the_stored_document(trial: Trial, bob: User, carol: User) -> None:
    first = experiment_services.verdict_document_freeze_trial(user=bob, trial=trial, step=4)
    again = experiment_services.verdict_document_freeze_trial(user=carol, trial=trial, step=4)
    assert again.pk == first.pk
    assert again.frozen_by == bob
    assert VerdictDocument.objects.count() == 1
    assert len(_frozen_events()) == 1


def test_a_newer_policy_makes_a_new_document_and_leaves_the_old_one_untouched(trial: Trial, bob: User) -> None:
    old = experiment_services.verdict_document_freeze_trial(user=bob, trial=trial, step=4)
    canonical, sha256 = old.canonical, old.sha256
    policy_v2()
    new = experiment_services.verdict_document_freeze_trial(user=bob, trial=trial, step=4)
    assert new.pk != old.pk
    assert (new.policy.version, new.document["policy"]["tolerance"]) == (2, 0.01)
    old.refresh_from_db()
    assert (old.canonical, old.sha256, old.policy.version) == (canonical, sha256, 1)
    assert list(trial.verdict_documents.order_by("id").values_list("policy__version", flat=True)) == [1, 2]


def test_other_members_may_not_freeze_and_outsiders_do_not_learn_the_trial_exists(
    trial: Trial, dave: User, oscar: User
) -> None:
    with pytest.raises(FreezerRequired, match="Only an ML engineer or a reviewer can freeze"):
        experiment_services.verdict_document_freeze_trial(user=dave, trial=trial, step=4)
    with pytest.raises(Http404):
        experiment_services.verdict_document_freeze_trial(user=oscar, trial=trial, step=4)
    assert not VerdictDocument.objects.exists()


def test_a_step_without_a_validation_is_refused(trial: Trial, bob: User) -> None:
    with pytest.raises(experiment_services.NoValidation) as caught:
        experiment_services.verdict_document_freeze_trial(user=bob, trial=trial, step=3)
    assert caught.value.message == (
        f"Trial {trial.number} of experiment {trial.experiment_id} has no validation counts at step 3."
    )
    assert caught.value.field == "step"


def test_a_tampered_dataset_file_is_not_frozen(trial: Trial, bob: User) -> None:
    version = trial.experiment.dataset_version
    path = version.path
    path.write_bytes(path.read_bytes().replace(b",1\n", b",0\n", 5))
    with pytest.raises(DatasetIntegrityError) as caught:
        experiment_services.verdict_document_freeze_trial(user=bob, trial=trial, step=4)
    assert str(version) in caught.value.message
    assert "The file changed after registration" in caught.value.message
    assert not VerdictDocument.objects.exists()
    assert _frozen_events() == []


def test_a_document_has_exactly_one_subject(trial: Trial, bob: User, tmp_path: Path) -> None:
    audit = _run_audit(bob, tmp_path)
    stored = audit.verdict_documents.get()
    for subject in ({"prediction_audit": audit, "trial": trial, "step": 4}, {"step": 4}, {"trial": trial}):
        with pytest.raises(IntegrityError), transaction.atomic():
            VerdictDocument.objects.create(
                kind=stored.kind,
                schema_version=1,
                canonical="{}",
                sha256="0" * 64,
                policy=stored.policy,
                trigger="requested",
                **subject,
            )


def test_the_same_content_for_the_same_subject_is_stored_once(bob: User, tmp_path: Path) -> None:
    audit = _run_audit(bob, tmp_path)
    stored = audit.verdict_documents.get()
    with pytest.raises(IntegrityError), transaction.atomic():
        VerdictDocument.objects.create(
            kind=stored.kind,
            prediction_audit=audit,
            schema_version=1,
            canonical=stored.canonical,
            sha256=stored.sha256,
            policy=stored.policy,
            trigger="requested",
        )


@pytest.mark.slow
def test_a_completed_trials_last_validation_is_frozen_automatically(
    demo_version: DatasetVersion, bob: User, fake_trainer: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from auditportal.fairness.files import metricsfile

    # The metrics file is read in small chunks, so the trial's exit is seen before its last lines
    # are: they must still be ingested before the document is frozen.
    monkeypatch.setenv("FAKE_TRAINER_CELLS", "1")
    reader = metricsfile.read_records
    monkeypatch.setattr(metricsfile, "read_records", lambda path, offset: reader(path, offset, max_bytes=1500))
    experiment = experiment_services.experiment_create(
        user=bob, dataset_version=demo_version, template="single", batches=6
    )
    experiment_services.experiment_launch(experiment=experiment)
    finished: Experiment = poll_until_done(experiment)
    trial = finished.trials.get()
    assert trial.state == "COMPLETED"
    (document,) = trial.verdict_documents.all()
    assert (document.step, document.trigger, document.frozen_by) == (6, "trial_completed", None)
    assert trial.latest_step == 6
    assert document.document["attributes"]["gender"]["groups"]["female"]["tp"] == 16
    assert [event["trigger"] for event in _frozen_events()] == ["trial_completed"]


def test_each_user_sees_the_documents_of_exactly_the_subjects_they_may_see(
    trial: Trial, alice: User, bob: User, carol: User, dave: User, erin: User, oscar: User, tmp_path: Path
) -> None:
    # evidence sits below audits and experiments and scopes by its own rule (evidence.rules.can_read):
    # it must agree with theirs.
    _run_audit(bob, tmp_path)
    experiment_services.verdict_document_freeze_trial(user=bob, trial=trial, step=4)
    for user in (alice, bob, carol, dave, erin, oscar):
        subjects = Q(prediction_audit__in=prediction_audit_list(user=user).values("pk")) | Q(
            trial__experiment__in=experiment_list(user=user).values("pk")
        )
        expected = set(VerdictDocument.objects.filter(subjects).values_list("pk", flat=True))
        assert set(verdict_document_list(user=user).values_list("pk", flat=True)) == expected, user.username
    assert verdict_document_list(user=oscar).count() == 0
    assert verdict_document_list(user=dave).count() == 2
