"""Each verb of the activity trail is written by the service call that makes that change.

Like Zulip's test that every AuditLogEventType is written by some action: a new verb without a
scenario here fails, and so does a scenario whose call no longer writes its verb.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
from collections.abc import Callable
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from auditportal.accounts import services as account_services
from auditportal.accounts.models import Role, RoleGrantProposal, User
from auditportal.activity import services as activity_services
from auditportal.activity.models import Event, Verb
from auditportal.approvals import notifications as approval_notifications
from auditportal.approvals import services as approval_services
from auditportal.approvals.models import ReviewRequest, Waiver
from auditportal.attributions import services as attribution_services
from auditportal.audits import services as audit_services
from auditportal.audits.models import WhatIf
from auditportal.comparisons import services as comparison_services
from auditportal.comparisons import trial_services as comparison_trial_services
from auditportal.datasets import services as dataset_services
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments import services as experiment_services
from auditportal.experiments.ingest import trial_metrics_ingest
from auditportal.experiments.models import Experiment, ExperimentStatus, Trial, TrialState
from auditportal.fairness.documents.findings import FAIL
from auditportal.fairness.documents.report_context import ReportContext
from auditportal.fairness.files.metricsfile import MetricRecord
from auditportal.fairness.files.tabular import DatasetSpec
from auditportal.fairness.statistics import attributions as attribution_statistics
from auditportal.fairness.statistics.audit import AuditSpec
from auditportal.fairness.statistics.paired_file import PairedSpec
from auditportal.fairness.statistics.whatif import Thresholds
from auditportal.monitoring import services as monitoring_services
from auditportal.monitoring.models import Deployment, MonitorPolicyProposal, WebhookEndpoint
from auditportal.policies import services as policy_services
from auditportal.policies.models import PolicyProposal
from auditportal.reports import heads as report_heads
from auditportal.reports import services as report_services
from auditportal.reports import signing as report_signing
from tests.approvals import conftest as approval_helpers
from tests.attributions import conftest as attribution_helpers
from tests.attributions.documents import summary_document
from tests.audits.conftest import PREDICTIONS_CSV
from tests.comparisons.conftest import paired_csv_text
from tests.datasets.conftest import SMALL_CSV, flip_labels
from tests.evidence.helpers import FAIR, UNFAIR
from tests.experiments.conftest import poll_until_done
from tests.factories import (
    PASSWORD,
    DatasetVersionFactory,
    ExperimentFactory,
    PredictionAuditFactory,
    TrialFactory,
    make_user,
)
from tests.monitoring.breaching import breaching_look
from tests.reports.helpers import decided_context

# A scenario prepares what its call needs and returns the one service call under test.
Scenario = Callable[[pytest.FixtureRequest], Callable[[], object]]


def _user(request: pytest.FixtureRequest, name: str) -> User:
    user: User = request.getfixturevalue(name)
    return user


def _experiment(request: pytest.FixtureRequest) -> Experiment:
    version: DatasetVersion = request.getfixturevalue("demo_version")
    request.getfixturevalue("fake_trainer")
    return experiment_services.experiment_create(
        user=_user(request, "bob"), dataset_version=version, template="single", batches=4
    )


def _user_created(request: pytest.FixtureRequest) -> Callable[[], object]:
    erin = _user(request, "erin")
    return lambda: account_services.user_create(username="zoe", email="zoe@example.org", created_by=erin)


def _account(change: Callable[[User, User], object]) -> Scenario:
    """``change(dave, erin)``: erin, an administrator, changes dave's account (or dave his own)."""

    def scenario(request: pytest.FixtureRequest) -> Callable[[], object]:
        dave, erin = _user(request, "dave"), _user(request, "erin")
        return lambda: change(dave, erin)

    return scenario


def _deactivated_then(change: Callable[[User, User], object]) -> Scenario:
    def scenario(request: pytest.FixtureRequest) -> Callable[[], object]:
        dave, erin = _user(request, "dave"), _user(request, "erin")
        account_services.user_deactivate(user=dave, by=erin)
        return lambda: change(dave, erin)

    return scenario


def _role_granted(request: pytest.FixtureRequest) -> Callable[[], object]:
    oscar, erin = _user(request, "oscar"), _user(request, "erin")
    return lambda: account_services.role_grant(user=oscar, role=Role.REVIEWER, granted_by=erin)


def _role_grant_proposed(request: pytest.FixtureRequest) -> Callable[[], object]:
    oscar, erin = _user(request, "oscar"), _user(request, "erin")
    return lambda: account_services.role_grant_propose(user=oscar, role=Role.ETHICS_COMMITTEE, by=erin)


def _role_grant_proposal(request: pytest.FixtureRequest, *, confirm: bool) -> Callable[[], object]:
    oscar, erin = _user(request, "oscar"), _user(request, "erin")
    proposal = account_services.role_grant_propose(user=oscar, role=Role.ETHICS_COMMITTEE, by=erin)
    assert isinstance(proposal, RoleGrantProposal)
    if confirm:
        second = make_user("irene", [Role.ADMIN])
        return lambda: account_services.role_grant_confirm(proposal=proposal, by=second)
    return lambda: account_services.role_grant_withdraw(proposal=proposal, by=erin)


def _role_revoked(request: pytest.FixtureRequest) -> Callable[[], object]:
    bob, erin = _user(request, "bob"), _user(request, "erin")
    return lambda: account_services.role_revoke(user=bob, role=Role.ML_ENGINEER, revoked_by=erin)


def _dataset_registered(request: pytest.FixtureRequest) -> Callable[[], object]:
    alice = _user(request, "alice")
    request.getfixturevalue("dataset_storage")
    source = request.getfixturevalue("tmp_path") / "loans.csv"
    source.write_text(SMALL_CSV, encoding="utf-8")
    return lambda: dataset_services.dataset_version_register(
        user=alice,
        source=source,
        original_name="loans.csv",
        name="loans",
        spec=DatasetSpec(label="approved", positive="1", attributes=("gender",)),
    )


def _dataset_version_integrity_failed(request: pytest.FixtureRequest) -> Callable[[], object]:
    version: DatasetVersion = request.getfixturevalue("demo_version")
    flip_labels(version)

    def call() -> None:
        with pytest.raises(dataset_services.DatasetIntegrityError):
            dataset_services.dataset_version_check_integrity(version=version, actor=_user(request, "alice"))

    return call


def _dataset_version_retired(request: pytest.FixtureRequest) -> Callable[[], object]:
    version: DatasetVersion = request.getfixturevalue("demo_version")
    # Its creator (a steward the factory made) owns it; an administrator may retire it too.
    erin = _user(request, "erin")
    return lambda: dataset_services.dataset_version_retire(user=erin, version=version, reason="superseded")


def _dataset_steward_added(request: pytest.FixtureRequest) -> Callable[[], object]:
    version: DatasetVersion = request.getfixturevalue("demo_version")
    alice, erin = _user(request, "alice"), _user(request, "erin")
    return lambda: dataset_services.dataset_steward_add(dataset=version.dataset, user=alice, actor=erin)


def _dataset_steward_removed(request: pytest.FixtureRequest) -> Callable[[], object]:
    version: DatasetVersion = request.getfixturevalue("demo_version")
    alice, erin = _user(request, "alice"), _user(request, "erin")
    dataset_services.dataset_steward_add(dataset=version.dataset, user=alice, actor=erin)
    return lambda: dataset_services.dataset_steward_remove(dataset=version.dataset, user=alice, actor=erin)


def _prediction_audit_created(request: pytest.FixtureRequest) -> Callable[[], object]:
    bob = _user(request, "bob")
    request.getfixturevalue("dataset_storage")
    source = request.getfixturevalue("tmp_path") / "scores.csv"
    source.write_text(PREDICTIONS_CSV, encoding="utf-8")
    spec = AuditSpec(label="label", prediction="pred", attributes=("gender",))
    return lambda: audit_services.prediction_audit_run(user=bob, source=source, original_name="scores.csv", spec=spec)


def _prediction_audit_queued(request: pytest.FixtureRequest) -> Callable[[], object]:
    bob = _user(request, "bob")
    request.getfixturevalue("dataset_storage")
    source = request.getfixturevalue("tmp_path") / "scores.csv"
    source.write_text(PREDICTIONS_CSV, encoding="utf-8")
    spec = AuditSpec(label="label", prediction="pred", attributes=("gender",))
    return lambda: audit_services.prediction_audit_queue(user=bob, source=source, original_name="scores.csv", spec=spec)


def _whatif(request: pytest.FixtureRequest) -> tuple[User, Callable[[], WhatIf]]:
    bob = _user(request, "bob")
    request.getfixturevalue("dataset_storage")
    source = request.getfixturevalue("tmp_path") / "scores.csv"
    source.write_text(PREDICTIONS_CSV, encoding="utf-8")
    spec = AuditSpec(label="label", score="score", threshold=0.5, attributes=("gender",))
    return bob, lambda: audit_services.whatif_start(user=bob, source=source, original_name="scores.csv", spec=spec)


def _whatif_started(request: pytest.FixtureRequest) -> Callable[[], object]:
    return _whatif(request)[1]


def _whatif_frozen(request: pytest.FixtureRequest) -> Callable[[], object]:
    bob, start = _whatif(request)
    item = start()
    thresholds = Thresholds(threshold=0.5, attribute="gender", groups={"f": 0.4})
    return lambda: audit_services.whatif_freeze(user=bob, item=item, thresholds=thresholds)


def _prediction_audit_retired(request: pytest.FixtureRequest) -> Callable[[], object]:
    bob = _user(request, "bob")
    request.getfixturevalue("dataset_storage")
    audit = PredictionAuditFactory.create(created_by=bob)
    return lambda: audit_services.prediction_audit_retire(user=bob, audit=audit, reason="wrong predictions file")


def _experiment_launched(request: pytest.FixtureRequest) -> Callable[[], object]:
    return lambda: _experiment(request)


def _experiment_started(request: pytest.FixtureRequest) -> Callable[[], object]:
    experiment = _experiment(request)

    def finish() -> None:  # no trainer process may outlive the test
        experiment.refresh_from_db()
        if experiment.status == ExperimentStatus.RUNNING:
            poll_until_done(experiment)

    request.addfinalizer(finish)
    return lambda: experiment_services.experiment_launch(experiment=experiment)


def _experiment_launch_failed(request: pytest.FixtureRequest) -> Callable[[], object]:
    experiment = _experiment(request)
    experiment.dataset_version.path.unlink()  # the stored file has gone missing
    return lambda: experiment_services.experiment_launch(experiment=experiment)


def _experiment_finished(request: pytest.FixtureRequest) -> Callable[[], object]:
    experiment = _experiment(request)

    def call() -> Experiment:
        experiment_services.experiment_launch(experiment=experiment)
        return poll_until_done(experiment)

    return call


def _experiment_failed(request: pytest.FixtureRequest) -> Callable[[], object]:
    request.getfixturevalue("monkeypatch").setenv("FAKE_TRAINER_CRASH", "trial-1")
    return _experiment_finished(request)


def _experiment_cancelled(request: pytest.FixtureRequest) -> Callable[[], object]:
    experiment = _experiment(request)
    return lambda: experiment_services.experiment_cancel(user=_user(request, "bob"), experiment=experiment)


def _trial_early_stopped(request: pytest.FixtureRequest) -> Callable[[], object]:
    # Four trials make a two-rung bracket of three (asha.py): trial 2, worse than trial 1 at the first
    # rung, is stopped there when the poll that ingests its validation enters it into the rung.
    # max_concurrent_trials=0: the searcher's own split over brackets, as test_asha's search of eight.
    monkeypatch = request.getfixturevalue("monkeypatch")
    monkeypatch.setenv("FAKE_TRAINER_SLEEP", "trial-2=0.1")  # the others need not train slowly
    monkeypatch.setenv("FAKE_TRAINER_OBJECTIVES", "trial-1=0.5,trial-2=0.9,trial-3=0.1,trial-4=0.1")
    request.getfixturevalue("fake_trainer")
    version: DatasetVersion = request.getfixturevalue("demo_version")
    experiment = experiment_services.experiment_create(
        user=_user(request, "bob"),
        dataset_version=version,
        template="asha",
        max_trials=4,
        batches=16,
        max_concurrent_trials=0,
    )
    return lambda: (experiment_services.experiment_launch(experiment=experiment), poll_until_done(experiment))


def _trial_verdict_changed(request: pytest.FixtureRequest) -> Callable[[], object]:
    experiment = _experiment(request)
    trial = Trial.objects.create(experiment=experiment, number=1, steps_planned=4)
    metrics: dict[str, float | None] = {"count/gender/unknown": 0.0}
    for group, cells in {"female": (1200, 800, 300, 2700), "male": (2700, 300, 300, 2700)}.items():
        for cell, value in zip(("tp", "fn", "fp", "tn"), cells, strict=True):
            metrics[f"count/gender/{group}/{cell}"] = float(value)
    report = MetricRecord(kind="validation", step=4, metrics=metrics, end=10)
    return lambda: trial_metrics_ingest(trial=trial, records=[report])


def _fairness_policy_created(request: pytest.FixtureRequest) -> Callable[[], object]:
    erin = _user(request, "erin")
    return lambda: policy_services.policy_create(user=erin, tolerance=0.01, reason="Stricter review board")


def _fairness_policy_proposal(request: pytest.FixtureRequest) -> PolicyProposal:
    made = policy_services.policy_create(user=_user(request, "erin"), approval_quorum=1, reason="Faster approvals")
    assert isinstance(made, PolicyProposal)
    return made


def _fairness_policy_proposed(request: pytest.FixtureRequest) -> Callable[[], object]:
    erin = _user(request, "erin")
    return lambda: policy_services.policy_create(user=erin, approval_quorum=1, reason="Faster approvals")


def _fairness_policy_proposal_confirmed(request: pytest.FixtureRequest) -> Callable[[], object]:
    proposal = _fairness_policy_proposal(request)
    second = make_user("irene", [Role.ADMIN])
    return lambda: policy_services.policy_proposal_confirm(user=second, proposal=proposal)


def _fairness_policy_proposal_withdrawn(request: pytest.FixtureRequest) -> Callable[[], object]:
    proposal = _fairness_policy_proposal(request)
    return lambda: policy_services.policy_proposal_withdraw(user=_user(request, "erin"), proposal=proposal)


def _verdict_document_frozen(request: pytest.FixtureRequest) -> Callable[[], object]:
    # An engineer freezes a trial's validation (a prediction audit is frozen as it is made, too).
    bob = _user(request, "bob")
    experiment = _experiment(request)
    trial = Trial.objects.create(experiment=experiment, number=1, steps_planned=4)
    metrics: dict[str, float | None] = {}
    for group, cells in {"female": (1200, 800, 300, 2700), "male": (2700, 300, 300, 2700)}.items():
        for cell, value in zip(("tp", "fn", "fp", "tn"), cells, strict=True):
            metrics[f"count/gender/{group}/{cell}"] = float(value)
    trial_metrics_ingest(trial=trial, records=[MetricRecord(kind="validation", step=4, metrics=metrics)])
    return lambda: experiment_services.verdict_document_freeze_trial(user=bob, trial=trial, step=4)


def _paired_comparison_created(request: pytest.FixtureRequest) -> Callable[[], object]:
    # An engineer compares two models' predictions on the same rows (the document is frozen with it).
    source = request.getfixturevalue("tmp_path") / "paired.csv"
    source.write_text(paired_csv_text(rows=200), encoding="utf-8")
    spec = PairedSpec.from_input(label="label", attributes="gender", champion="model_a", challenger="model_b")
    return lambda: comparison_services.comparison_create(
        user=_user(request, "bob"), source=source, original_name="paired.csv", spec=spec
    )


def _two_completed_trials(request: pytest.FixtureRequest) -> tuple[Trial, Trial]:
    """Two completed local trials on one dataset version with checkpoint folders and shards on disk:
    enough for the checks made before a worker runs the checkpoints (tests/comparisons/test_trials.py
    trains real ones)."""
    root: Path = request.getfixturevalue("tmp_path")
    request.getfixturevalue("settings").EXPERIMENT_RUN_DIR = root
    experiment = ExperimentFactory.create(shard_dir=str(root / "shards"))
    (root / "shards").mkdir()
    manifest = {
        "dataset": {"sha256": experiment.dataset_version.sha256},
        "part_dirs": ["part-00000"],
        "num_examples": 10,
    }
    (root / "shards" / "manifest.json").write_text(json.dumps(manifest))
    trials = []
    for number in (1, 2):
        (root / f"checkpoint-{number}").mkdir()
        (root / f"checkpoint-{number}" / "state_dict.pth").write_bytes(b"")
        trials.append(
            TrialFactory.create(
                experiment=experiment, state=TrialState.COMPLETED, checkpoint=str(root / f"checkpoint-{number}")
            )
        )
    return trials[0], trials[1]


def _paired_comparison_queued(request: pytest.FixtureRequest) -> Callable[[], object]:
    champion, challenger = _two_completed_trials(request)
    return lambda: comparison_trial_services.comparison_request_trials(
        user=_user(request, "bob"), champion=champion, challenger=challenger
    )


def _paired_comparison_failed(request: pytest.FixtureRequest) -> Callable[[], object]:
    # The worker finds the challenger's checkpoint gone: the comparison cannot be paired.
    champion, challenger = _two_completed_trials(request)
    pending = comparison_trial_services.comparison_request_trials(
        user=_user(request, "bob"), champion=champion, challenger=challenger, queue=False
    )
    (Path(challenger.checkpoint) / "state_dict.pth").unlink()
    return lambda: comparison_trial_services.comparison_compute_trials(comparison_id=pending.pk)


def _explainable_trial(request: pytest.FixtureRequest) -> Trial:
    """A completed local trial with its checkpoint and shards on disk: enough for the checks made before a
    worker runs the checkpoint (tests/attributions/test_real.py runs a real one)."""
    runs: Path = request.getfixturevalue("tmp_path") / "runs"
    runs.mkdir()
    request.getfixturevalue("settings").EXPERIMENT_RUN_DIR = runs
    return attribution_helpers.local_trial(DatasetVersionFactory.create(), runs)


def _trial_attribution_queued(request: pytest.FixtureRequest) -> Callable[[], object]:
    trial = _explainable_trial(request)
    return lambda: attribution_services.attribution_request(user=_user(request, "bob"), trial=trial)


def _trial_attribution_completed(request: pytest.FixtureRequest, *, fail: bool) -> Callable[[], object]:
    # The worker's part with the trainer's file and its summary stood in for (test_real.py runs both), or
    # with the checkpoint gone: the failure is stored with its reason.
    trial = _explainable_trial(request)
    pending, _ = attribution_services.attribution_request(user=_user(request, "bob"), trial=trial, queue=False)
    patch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    patch.setattr(attribution_services, "_attributions_file", lambda *args: {})
    patch.setattr(attribution_statistics, "summarise", lambda *a, **k: summary_document())
    if fail:
        (Path(trial.checkpoint) / "state_dict.pth").unlink()
    return lambda: attribution_services.attribution_compute(attribution_id=pending.pk)


def _review_request(request: pytest.FixtureRequest, *, state: str = "draft", unfair: bool = False) -> ReviewRequest:
    """bob's request for a trial (FAIR or UNFAIR counts), carried to ``state`` by carol and two members."""
    bob, carol = _user(request, "bob"), _user(request, "carol")
    runs = request.getfixturevalue("tmp_path") / "runs"
    request.getfixturevalue("settings").EXPERIMENT_RUN_DIR = runs
    document = approval_helpers.trial_document(
        request.getfixturevalue("demo_version"), bob, UNFAIR if unfair else FAIR, runs
    )
    made = approval_services.review_request_create(user=bob, title="t", intended_use="u", documents=[document])
    if state in ("in_review", "approved"):
        approval_helpers.in_review(made, carol)
    if state == "approved":
        for name in ("dave", "frank"):
            approval_helpers.vote(made, _member(name))
    made.refresh_from_db()
    return made


def _member(name: str) -> User:
    return User.objects.filter(username=name).first() or make_user(name, [Role.ETHICS_COMMITTEE])


def _vote(made: ReviewRequest, name: str, choice: str = "approve") -> Callable[[], object]:
    return lambda: approval_helpers.vote(made, _member(name), choice=choice)


def _proposed_waiver(request: pytest.FixtureRequest) -> tuple[ReviewRequest, Waiver]:
    made = _review_request(request, state="in_review", unfair=True)
    waiver = approval_services.waiver_propose(
        user=_user(request, "carol"),
        request=made,
        finding_key=approval_helpers.keys(made, FAIL)[0],
        reason="r",
        compensating_measures="m",
        expires_on=approval_helpers.days_from_now(30),
    )
    return made, waiver


def _waiver_vote(waiver: Waiver, name: str, choice: str) -> None:
    approval_services.waiver_vote_cast(
        user=_member(name),
        waiver=waiver,
        choice=choice,
        reason="considered",
        password=PASSWORD,
        document_sha256=approval_helpers.hashes(waiver.request),
    )


def _waiver_decided(choice: str) -> Scenario:
    def scenario(request: pytest.FixtureRequest) -> Callable[[], object]:
        _, waiver = _proposed_waiver(request)
        _waiver_vote(waiver, "dave", choice)
        return lambda: _waiver_vote(waiver, "frank", choice)

    return scenario


def _wrong_password(request: pytest.FixtureRequest) -> Callable[[], object]:
    made = _review_request(request, state="in_review")

    def call() -> None:
        with pytest.raises(approval_services.ReauthenticationFailed):
            approval_services.review_vote_cast(
                user=_member("dave"), request=made, choice="reject", reason="r", password="wrong", document_sha256=[]
            )

    return call


def _checkpoint_tagged(request: pytest.FixtureRequest) -> Callable[[], object]:
    made = _review_request(request, state="approved")
    return lambda: approval_services.review_request_tag_checkpoint(request_id=made.pk)


def _mail_sent(request: pytest.FixtureRequest) -> Callable[[], object]:
    made = _review_request(request, state="in_review")
    return lambda: approval_notifications.request_submitted(request_id=made.pk)


def _transition(state: str, call: Callable[[User, ReviewRequest], object], who: str) -> Scenario:
    def scenario(request: pytest.FixtureRequest) -> Callable[[], object]:
        made = _review_request(request, state=state)
        return lambda: call(_user(request, who), made)

    return scenario


def _round_paused(request: pytest.FixtureRequest) -> Callable[[], object]:
    _review_request(request, state="in_review")
    oscar, erin = _user(request, "oscar"), _user(request, "erin")
    return lambda: account_services.role_grant(user=oscar, role=Role.ETHICS_COMMITTEE, granted_by=erin)


def _round_resumed(request: pytest.FixtureRequest) -> Callable[[], object]:
    made = _review_request(request, state="in_review")
    account_services.role_grant(user=_user(request, "oscar"), role=Role.ETHICS_COMMITTEE, granted_by=None)
    return lambda: approval_services.review_round_resume(user=_member("dave"), request=made, reason="reviewed")


def _suspended(request: pytest.FixtureRequest) -> Callable[[], object]:
    made = _review_request(request, state="approved")
    return lambda: approval_services.approval_suspend(
        request=made, reason="evidence retired", by=None, cause={"kind": "monitoring"}
    )


def _deployment(request: pytest.FixtureRequest, *, serving: int = 0) -> Deployment:
    """bob's deployment with ``serving`` approved models promoted into it, the last one serving."""
    bob = _user(request, "bob")
    deployment = monitoring_services.deployment_create(user=bob, name="credit/prod")
    for _ in range(serving):
        made = _review_request(request, state="approved")
        deployment = monitoring_services.deployment_promote(
            deployment=deployment, model_identifier=made.model_identifier, by=bob
        )
    return deployment


def _promoted(request: pytest.FixtureRequest) -> Callable[[], object]:
    deployment = _deployment(request)
    made = _review_request(request, state="approved")
    return lambda: monitoring_services.deployment_promote(
        deployment=deployment, model_identifier=made.model_identifier, by=_user(request, "bob")
    )


def _rolled_back(request: pytest.FixtureRequest, *, serving: int) -> Callable[[], object]:
    deployment = _deployment(request, serving=serving)
    return lambda: monitoring_services.deployment_rollback(deployment=deployment, reason="breach", cause={"kind": "t"})


def _incident_opened(request: pytest.FixtureRequest) -> Callable[[], object]:
    deployment = _deployment(request, serving=1)
    model = deployment.model_identifier
    return lambda: monitoring_services.breach_confirm(
        deployment=deployment, model_identifier=model, judgement=breaching_look(), batch_ids=[1]
    )


def _webhook(request: pytest.FixtureRequest) -> WebhookEndpoint:
    endpoint, _ = monitoring_services.webhook_register(
        deployment=_deployment(request), user=_user(request, "erin"), url="https://rollouts.example/hook"
    )
    return endpoint


def _monitor_proposal(request: pytest.FixtureRequest) -> MonitorPolicyProposal:
    made = monitoring_services.monitor_policy_create(
        user=_user(request, "erin"), deployment=_deployment(request), changes={"alpha": 0.01}, reason="fewer alarms"
    )
    assert isinstance(made, MonitorPolicyProposal)
    return made


def _monitor_proposal_closed(request: pytest.FixtureRequest, *, confirm: bool) -> Callable[[], object]:
    proposal = _monitor_proposal(request)
    if confirm:
        iris = make_user("iris", [Role.ADMIN])
        return lambda: monitoring_services.monitor_policy_proposal_confirm(user=iris, proposal=proposal)
    return lambda: monitoring_services.monitor_policy_proposal_withdraw(user=_user(request, "erin"), proposal=proposal)


def _approved_by_second_vote(choice: str) -> Scenario:
    def scenario(request: pytest.FixtureRequest) -> Callable[[], object]:
        made = _review_request(request, state="in_review")
        approval_helpers.vote(made, _member("dave"), choice=choice)
        return _vote(made, "frank", choice)

    return scenario


def _api_token_revoked(request: pytest.FixtureRequest) -> Callable[[], object]:
    erin = _user(request, "erin")
    issued = account_services.api_token_create(user=erin, account="bot", name="ci", days=1)
    return lambda: account_services.api_token_revoke(user=erin, token=issued.token)


def _reports(request: pytest.FixtureRequest) -> None:
    request.getfixturevalue("settings").REPORT_STORAGE_DIR = request.getfixturevalue("tmp_path") / "reports"
    request.getfixturevalue("monkeypatch").setattr(report_signing, "KEY_SIZE", 2048)


def _certificate_authority_created(request: pytest.FixtureRequest) -> Callable[[], object]:
    _reports(request)
    erin = _user(request, "erin")
    return lambda: report_services.certificate_authority_create(actor=erin, reason="first root")


def _signing_certificate_issued(request: pytest.FixtureRequest) -> Callable[[], object]:
    _reports(request)
    erin = _user(request, "erin")
    return lambda: report_services.organisation_certificate_create(actor=erin, reason="key rotation")


def _head_exported(request: pytest.FixtureRequest) -> Callable[[], object]:
    _reports(request)
    erin = _user(request, "erin")
    account_services.role_grant(user=_user(request, "oscar"), role=Role.REVIEWER, granted_by=erin)  # a head
    content = report_heads.head_export(actor=erin)
    path = request.getfixturevalue("tmp_path") / "head.json"
    report_heads.head_file_write(path=path, content=content)
    return lambda: report_heads.head_export_record(actor=erin, path=path, content=content)


def _log_verified(request: pytest.FixtureRequest) -> Callable[[], object]:
    dave = _user(request, "dave")
    account_services.role_grant(user=_user(request, "oscar"), role=Role.REVIEWER, granted_by=_user(request, "erin"))
    return lambda: activity_services.chain_verification_run(by=dave)


def _app_role_granted(request: pytest.FixtureRequest) -> Callable[[], object]:
    if connection.vendor != "postgresql":
        pytest.skip("database roles are PostgreSQL's (tests/activity/test_db_roles.py)")
    # Created inside the test's transaction: rolled back with it, the role included.
    name = f"test_app_{secrets.token_hex(4)}"
    return lambda: call_command("db_roles", "--app-role", name, "--create", stdout=StringIO())


def _report_context(request: pytest.FixtureRequest) -> ReportContext:
    _reports(request)
    request.getfixturevalue("dataset_storage")
    audit = PredictionAuditFactory.create(created_by=_user(request, "bob"))
    return decided_context(audit, None, [_user(request, "dave")])


def _report_created(request: pytest.FixtureRequest) -> Callable[[], object]:
    context = _report_context(request)
    return lambda: report_services.report_generate(context=context)


def _monitoring_report_created(request: pytest.FixtureRequest) -> Callable[[], object]:
    _reports(request)
    deployment = _deployment(request)
    end = timezone.now()
    return lambda: report_services.monitoring_report_generate(
        actor=_user(request, "erin"), deployment=deployment, start=end - dt.timedelta(days=1), end=end, now=end
    )


def _report_signed(request: pytest.FixtureRequest) -> Callable[[], object]:
    report = report_services.report_generate(context=_report_context(request))
    return lambda: report_services.report_sign_member(report=report, member=_user(request, "dave"), password=PASSWORD)


def _report_sign_refused(request: pytest.FixtureRequest) -> Callable[[], object]:
    report = report_services.report_generate(context=_report_context(request))

    def call() -> None:
        with pytest.raises(account_services.ReauthenticationFailed):
            report_services.report_sign_member(report=report, member=_user(request, "dave"), password="wrong")

    return call


SCENARIOS: dict[Verb, Scenario] = {
    Verb.USER_CREATED: _user_created,
    Verb.USER_PASSWORD_CHANGED: _account(
        lambda dave, erin: account_services.user_password_change(
            user=dave, old_password=PASSWORD, new_password="a new passphrase of dave's"
        )
    ),
    Verb.USER_PASSWORD_RESET_FORCED: _account(
        lambda dave, erin: account_services.user_password_reset_force(user=dave, reset_by=erin)
    ),
    Verb.USER_ACTIVATED: _deactivated_then(lambda dave, erin: account_services.user_activate(user=dave, by=erin)),
    Verb.USER_DEACTIVATED: _account(lambda dave, erin: account_services.user_deactivate(user=dave, by=erin)),
    Verb.USER_FLAGS_CHANGED: _account(
        lambda dave, erin: account_services.user_flags_set(user=dave, by=erin, is_staff=True)
    ),
    Verb.USER_EMAIL_CHANGED: _account(
        lambda dave, erin: account_services.user_email_change(
            user=dave, by=dave, email="dave@new.example", password=PASSWORD
        )
    ),
    Verb.ROLE_GRANTED: _role_granted,
    Verb.ROLE_REVOKED: _role_revoked,
    Verb.DATASET_CREATED: _dataset_registered,
    Verb.DATASET_VERSION_REGISTERED: _dataset_registered,
    Verb.DATASET_STEWARD_ADDED: _dataset_steward_added,
    Verb.DATASET_STEWARD_REMOVED: _dataset_steward_removed,
    Verb.DATASET_VERSION_INTEGRITY_FAILED: _dataset_version_integrity_failed,
    Verb.DATASET_VERSION_RETIRED: _dataset_version_retired,
    Verb.PREDICTION_AUDIT_CREATED: _prediction_audit_created,
    Verb.PREDICTION_AUDIT_RETIRED: _prediction_audit_retired,
    Verb.PREDICTION_AUDIT_QUEUED: _prediction_audit_queued,
    Verb.WHATIF_STARTED: _whatif_started,
    Verb.WHATIF_FROZEN: _whatif_frozen,
    Verb.EXPERIMENT_LAUNCHED: _experiment_launched,
    Verb.EXPERIMENT_STARTED: _experiment_started,
    Verb.EXPERIMENT_LAUNCH_FAILED: _experiment_launch_failed,
    Verb.EXPERIMENT_FINISHED: _experiment_finished,
    Verb.EXPERIMENT_FAILED: _experiment_failed,
    Verb.EXPERIMENT_CANCELLED: _experiment_cancelled,
    Verb.TRIAL_EARLY_STOPPED: _trial_early_stopped,
    Verb.PAIRED_COMPARISON_CREATED: _paired_comparison_created,
    Verb.PAIRED_COMPARISON_QUEUED: _paired_comparison_queued,
    Verb.PAIRED_COMPARISON_FAILED: _paired_comparison_failed,
    Verb.TRIAL_ATTRIBUTION_QUEUED: _trial_attribution_queued,
    Verb.TRIAL_ATTRIBUTION_COMPUTED: lambda request: _trial_attribution_completed(request, fail=False),
    Verb.TRIAL_ATTRIBUTION_FAILED: lambda request: _trial_attribution_completed(request, fail=True),
    Verb.TRIAL_VERDICT_CHANGED: _trial_verdict_changed,
    Verb.ROLE_GRANT_PROPOSED: _role_grant_proposed,
    Verb.ROLE_GRANT_PROPOSAL_CONFIRMED: lambda request: _role_grant_proposal(request, confirm=True),
    Verb.ROLE_GRANT_PROPOSAL_WITHDRAWN: lambda request: _role_grant_proposal(request, confirm=False),
    Verb.FAIRNESS_POLICY_CREATED: _fairness_policy_created,
    Verb.FAIRNESS_POLICY_PROPOSED: _fairness_policy_proposed,
    Verb.FAIRNESS_POLICY_PROPOSAL_CONFIRMED: _fairness_policy_proposal_confirmed,
    Verb.FAIRNESS_POLICY_PROPOSAL_WITHDRAWN: _fairness_policy_proposal_withdrawn,
    Verb.VERDICT_DOCUMENT_FROZEN: _verdict_document_frozen,
    Verb.REVIEW_REQUEST_CREATED: lambda request: lambda: _review_request(request),
    Verb.REVIEW_REQUEST_REVISED: _transition(
        "draft", lambda u, r: approval_services.review_request_revise(user=u, request=r, title="new"), "bob"
    ),
    Verb.REVIEW_REQUEST_SUBMITTED: _transition(
        "draft", lambda u, r: approval_services.review_request_submit(user=u, request=r), "bob"
    ),
    Verb.REVIEW_REQUEST_REVIEW_STARTED: lambda request: (
        lambda made: lambda: approval_services.review_request_start_review(user=_user(request, "carol"), request=made)
    )(approval_services.review_request_submit(user=_user(request, "bob"), request=_review_request(request))),
    Verb.REVIEW_REQUEST_CHANGES_REQUESTED: _transition(
        "in_review",
        lambda u, r: approval_services.review_request_request_changes(user=u, request=r, reason="more"),
        "carol",
    ),
    Verb.REVIEW_REQUEST_WITHDRAWN: _transition(
        "draft", lambda u, r: approval_services.review_request_withdraw(user=u, request=r), "bob"
    ),
    Verb.REVIEW_REQUEST_APPROVED: _approved_by_second_vote("approve"),
    Verb.REVIEW_REQUEST_REJECTED: _approved_by_second_vote("reject"),
    Verb.REVIEW_REQUEST_REVOKED: _transition(
        "approved", lambda u, r: approval_services.review_request_revoke(user=u, request=r, reason="x"), "erin"
    ),
    Verb.REVIEW_REQUEST_RECOMMENDED: _transition(
        "in_review",
        lambda u, r: approval_services.review_request_recommend(user=u, request=r, choice="approve", reason="ok"),
        "carol",
    ),
    Verb.REVIEW_REQUEST_CHECKPOINT_TAGGED: _checkpoint_tagged,
    Verb.REVIEW_REQUEST_MAIL_SENT: _mail_sent,
    Verb.REVIEW_REQUEST_PAUSED: _round_paused,
    Verb.REVIEW_REQUEST_RESUMED: _round_resumed,
    Verb.REVIEW_REQUEST_SUSPENDED: _suspended,
    Verb.REVIEW_COMMENT_ADDED: _transition(
        "draft", lambda u, r: approval_services.review_comment_add(user=u, request=r, body="why?"), "carol"
    ),
    Verb.REVIEW_VOTE_CAST: lambda request: _vote(_review_request(request, state="in_review"), "dave"),
    Verb.REVIEW_VOTE_REAUTH_FAILED: _wrong_password,
    Verb.WAIVER_PROPOSED: lambda request: lambda: _proposed_waiver(request),
    Verb.WAIVER_VOTE_CAST: lambda request: lambda: _waiver_vote(_proposed_waiver(request)[1], "dave", "approve"),
    Verb.WAIVER_APPROVED: _waiver_decided("approve"),
    Verb.WAIVER_REJECTED: _waiver_decided("reject"),
    Verb.DEPLOYMENT_CREATED: lambda request: (
        lambda: monitoring_services.deployment_create(user=_user(request, "bob"), name="credit/prod")
    ),
    Verb.DEPLOYMENT_PROMOTED: _promoted,
    Verb.DEPLOYMENT_ROLLED_BACK: lambda request: _rolled_back(request, serving=2),
    Verb.DEPLOYMENT_SUSPENDED: lambda request: _rolled_back(request, serving=1),
    Verb.MONITOR_POLICY_CREATED: lambda request: (
        lambda: monitoring_services.monitor_policy_create(
            user=_user(request, "erin"), deployment=_deployment(request), changes={"alpha": 0.1}, reason="more"
        )
    ),
    Verb.MONITOR_POLICY_PROPOSED: lambda request: lambda: _monitor_proposal(request),
    Verb.MONITOR_POLICY_PROPOSAL_CONFIRMED: lambda request: _monitor_proposal_closed(request, confirm=True),
    Verb.MONITOR_POLICY_PROPOSAL_WITHDRAWN: lambda request: _monitor_proposal_closed(request, confirm=False),
    Verb.INCIDENT_OPENED: _incident_opened,
    Verb.WEBHOOK_REGISTERED: lambda request: lambda: _webhook(request),
    Verb.WEBHOOK_DEACTIVATED: lambda request: (
        lambda endpoint: lambda: monitoring_services.webhook_deactivate(endpoint=endpoint, user=_user(request, "erin"))
    )(_webhook(request)),
    Verb.API_TOKEN_CREATED: lambda request: (
        lambda: account_services.api_token_create(user=_user(request, "erin"), account="bot", name="ci", days=1)
    ),
    Verb.API_TOKEN_REVOKED: _api_token_revoked,
    Verb.CERTIFICATE_AUTHORITY_CREATED: _certificate_authority_created,
    Verb.SIGNING_CERTIFICATE_ISSUED: _signing_certificate_issued,
    Verb.REPORT_CREATED: _report_created,
    Verb.MONITORING_REPORT_CREATED: _monitoring_report_created,
    Verb.REPORT_SIGNED: _report_signed,
    Verb.REPORT_SIGN_REAUTH_FAILED: _report_sign_refused,
    Verb.ACTIVITY_LOG_HEAD_EXPORTED: _head_exported,
    Verb.ACTIVITY_LOG_VERIFIED: _log_verified,
    Verb.DATABASE_APP_ROLE_GRANTED: _app_role_granted,
}


# About 6 s: four trials launched and polled to their end.
SLOW_SCENARIOS = {Verb.TRIAL_EARLY_STOPPED}


@pytest.mark.parametrize(
    "verb",
    [pytest.param(verb, marks=pytest.mark.slow) if verb in SLOW_SCENARIOS else verb for verb in Verb],
    ids=[verb.value for verb in Verb],
)
def test_each_verb_is_written_by_the_service_call_that_makes_its_change(
    verb: Verb, request: pytest.FixtureRequest, db: None
) -> None:
    if verb not in SCENARIOS:
        pytest.fail(f"no tested service call writes {verb.value!r}: add a scenario, or remove the verb")
    call = SCENARIOS[verb](request)
    before = Event.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    call()
    written = set(Event.objects.filter(pk__gt=before).values_list("verb", flat=True))
    assert verb in written, f"{verb.value!r} not written; the call wrote {sorted(written)}"


def test_the_verbs_are_the_event_fields_choices() -> None:
    field = Event._meta.get_field("verb")
    assert field.choices == Verb.choices
    assert max(len(verb.value) for verb in Verb) <= 64 == field.max_length
