"""The populated portal the authorization matrix runs against: one user per role, a second steward
and a second engineer (the "other owners"), an account without roles, a superuser without portal
roles, and one object of every kind a URL names (dataset and version, staged uploads, experiment and
trial and its attributions, prediction audit, verdict documents, review request with comment, recommendation, vote and
waiver, report and its authority, gate token, a deployment serving an approved model with its history,
an incident, a proposal to loosen its monitor policy and a webhook with a delivery)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

from django.contrib.auth.models import Group

from auditportal.accounts import services as account_services
from auditportal.accounts.models import Role, User
from auditportal.approvals import services as approval_services
from auditportal.approvals.models import ReviewRequest, VoteChoice, Waiver
from auditportal.audits import services as audit_services
from auditportal.audits.models import PredictionAudit, QueuedPredictionAudit
from auditportal.comparisons import services as comparison_services
from auditportal.datasets import services as dataset_services
from auditportal.datasets.models import DatasetVersion, StagedUpload
from auditportal.evidence.models import VerdictDocument
from auditportal.evidence.selectors import verdict_document_of_audit
from auditportal.experiments.models import Experiment, Trial
from auditportal.fairness.documents.findings import FAIL
from auditportal.fairness.statistics.audit import AuditSpec
from auditportal.fairness.statistics.paired_file import PairedSpec
from auditportal.monitoring import services as monitoring_services
from auditportal.monitoring.models import Deployment, Incident, WebhookDelivery
from auditportal.outbox.models import OutboxMessage
from auditportal.policies import services as policy_services
from auditportal.reports import services as report_services
from auditportal.reports.models import CertificateAuthority, Report
from tests.approvals.conftest import approved, in_review, keys, trial_document, vote
from tests.attributions.conftest import done_attribution
from tests.audits.conftest import PREDICTIONS_CSV
from tests.comparisons.conftest import paired_csv_text
from tests.datasets.conftest import SMALL_CSV
from tests.evidence.helpers import UNFAIR
from tests.factories import PASSWORD, DatasetVersionFactory, PredictionAuditFactory, make_user
from tests.reports.helpers import decided_context

# The user classes of the matrix, in the order of the expectation table's columns.
USER_CLASSES: tuple[str, ...] = (
    "anon",  # not logged in
    "norole",  # logged in, no role: sees nothing
    "steward",  # data steward, owner of the dataset and of the staged upload in the URLs
    "steward2",  # another data steward: owns neither
    "eng",  # ML engineer, launcher of the experiment, creator of the audit and of the review request
    "eng2",  # another ML engineer: owns none of them
    "reviewer",
    "committee",  # ethics-committee member
    "admin",  # the portal's administrator role
    "super",  # Django superuser (staff) without any portal role: the admin site only
)

USERNAMES = {
    "norole": "oscar",
    "steward": "alice",
    "steward2": "sam",
    "eng": "bob",
    "eng2": "ed",
    "reviewer": "carol",
    "committee": "dave",
    "admin": "erin",
    "super": "root",
}

_ROLES: dict[str, list[Role]] = {
    "norole": [],
    "steward": [Role.DATA_STEWARD],
    "steward2": [Role.DATA_STEWARD],
    "eng": [Role.ML_ENGINEER],
    "eng2": [Role.ML_ENGINEER],
    "reviewer": [Role.REVIEWER],
    "committee": [Role.ETHICS_COMMITTEE],
    "admin": [Role.ADMIN],
    "super": [],
}


# Names of the world's objects that only members may see (an account without roles sees none).
NAMES = {
    "dataset": "matrix-dataset",
    "staged": "matrix-alices-upload",
    "other_staged": "matrix-sams-upload",
    "experiment": "matrix-experiment",
    "audit": "matrix-scores.csv",
    "request": "matrix credit model v4",
    "deployment": "matrix-credit/prod",
}
# What a trial shows only to ML engineers and administrators (issue 18); the checkpoint path and the
# config are added once the world is built.
MODEL = "matrix-vendor-score:2.1"  # the model the audit's review request names (the gate's question)
DEPLOYED = "matrix-credit:1"  # an approved model, serving in the world's deployment
CONFIG_ONLY = "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"  # a line only the full config has
ENGINEER_ONLY = {"log tail": "Traceback (most recent call last): /srv/matrix-secret/train.py line 1"}


@dataclass
class World:
    users: dict[str, User]
    version: DatasetVersion
    other_version: DatasetVersion  # the second steward's
    staged: StagedUpload  # the steward's, private to them
    other_staged: StagedUpload  # the second steward's
    experiment: Experiment
    trial: Trial
    audit: PredictionAudit
    other_audit: PredictionAudit  # the second engineer's
    document: VerdictDocument  # the trial's, in the review request
    other_document: VerdictDocument  # the second engineer's audit's, in no request yet
    request: ReviewRequest
    waiver: Waiver
    report: Report
    deployment: Deployment  # serving DEPLOYED, with a proposal to loosen its monitor (another administrator's)
    gate_token: str
    fail_key: str  # a FAIL comparison of the request's document (what a waiver names)
    # What the pages show only to ML engineers and administrators: label -> text in the page.
    engineer_only: dict[str, str] = field(default_factory=dict)
    kwargs: dict[str, object] = field(default_factory=dict)  # URL keyword -> value


def _staged(owner: User, name: str, directory: Path) -> StagedUpload:
    """A staged upload as the browser flow leaves it once the worker profiled it (ready to declare)."""
    source = directory / f"{name}.csv"
    source.write_text(SMALL_CSV, encoding="utf-8")
    staged = dataset_services.staged_upload_create(
        user=owner, source=source, original_name=f"{name}.csv", dataset_name=name
    )
    profiled = dataset_services.staged_upload_profile(staged_id=staged.pk)
    assert profiled is not None
    assert profiled.status == "ready", profiled.error
    return profiled


def build_world(runs: Path, scratch: Path) -> World:
    users = {key: make_user(USERNAMES[key], _ROLES[key]) for key in USERNAMES}
    root = users["super"]
    root.is_staff = root.is_superuser = True
    root.save(update_fields=["is_staff", "is_superuser"])
    frank = make_user("frank", [Role.ETHICS_COMMITTEE])  # a second committee member, for the report
    # A grant of a deciding role waiting for a second administrator (the admin's proposal pages).
    role_proposal = account_services.role_grant_propose(
        user=users["norole"], role=Role.ETHICS_COMMITTEE, by=users["admin"]
    )

    Group.objects.create(name="matrix-group")  # so that the admin's group pages show a row
    version = DatasetVersionFactory.create(created_by=users["steward"], name=NAMES["dataset"])
    other_version = DatasetVersionFactory.create(created_by=users["steward2"], name="matrix-other-dataset")
    staged = _staged(users["steward"], NAMES["staged"], scratch)
    other_staged = _staged(users["steward2"], NAMES["other_staged"], scratch)

    document = trial_document(version, users["eng"], UNFAIR, runs)
    trial = document.trial
    assert trial is not None
    trial.log_tail = ENGINEER_ONLY["log tail"]
    trial.save(update_fields=["log_tail"])
    experiment = trial.experiment
    experiment.name = NAMES["experiment"]
    experiment.save(update_fields=["name"])
    audit = PredictionAuditFactory.create(created_by=users["eng"], original_name=NAMES["audit"])
    other_audit = PredictionAuditFactory.create(created_by=users["eng2"])
    paired_file = scratch / "matrix-paired.csv"
    paired_file.write_text(paired_csv_text(rows=200), encoding="utf-8")
    comparison = comparison_services.comparison_create(
        user=users["eng"],
        source=paired_file,
        original_name="matrix-paired.csv",
        spec=PairedSpec.from_input(label="label", attributes="gender", champion="model_a", challenger="model_b"),
    )
    # A large file's audit a worker has not taken yet: its uploader's alone.
    queued = QueuedPredictionAudit.objects.create(
        owner=users["eng"],
        original_name="matrix-large.csv",
        storage_path="audit-uploads/none/matrix-large.csv",
        size_bytes=1,
    )
    # A what-if of the engineer's, prepared: every member reads it, auditors freeze it.
    with tempfile.TemporaryDirectory(prefix="matrix-whatif-") as directory:
        scored = Path(directory) / "scores.csv"
        scored.write_text(PREDICTIONS_CSV, encoding="utf-8")
        whatif_item = audit_services.whatif_start(
            user=users["eng"],
            source=scored,
            original_name="scores.csv",
            spec=AuditSpec(label="label", score="score", threshold=0.5, attributes=("gender",)),
        )

    # An audit's request with an approving vote: its INCONCLUSIVE comparisons are acknowledged.
    audit_request = approval_services.review_request_create(
        user=users["eng"],
        title="Vendor scoring model",
        intended_use="Ranking applications for manual review",
        documents=[verdict_document_of_audit(audit=audit)],
        model_identifier=MODEL,
    )
    vote(in_review(audit_request, users["reviewer"]), users["committee"])
    request = approval_services.review_request_create(
        user=users["eng"], title=NAMES["request"], intended_use="Pre-screening", documents=[document]
    )
    in_review(request, users["reviewer"])
    approval_services.review_comment_add(user=users["reviewer"], request=request, body="Why the gap?")
    approval_services.review_request_recommend(
        user=users["reviewer"], request=request, choice=VoteChoice.REJECT, reason="the gap is too large"
    )
    waiver = approval_services.waiver_propose(
        user=users["eng"],
        request=request,
        finding_key=keys(request, FAIL)[0],
        reason="the gap is explained by the vendor's data",
        compensating_measures="manual review of every rejection",
        expires_on=date.today() + timedelta(days=30),
    )
    approval_services.waiver_vote_cast(
        user=users["committee"],
        waiver=waiver,
        choice=VoteChoice.APPROVE,
        reason="acceptable with manual review",
        password=PASSWORD,
        document_sha256=[document.sha256],
    )
    vote(request, users["committee"], VoteChoice.REJECT, "the gap is too large")

    report = report_services.report_generate(
        context=decided_context(audit, version, [users["committee"], frank]),
        review_request_id=None,
    )
    # The trial's attributions, done (the pages draw its charts).
    attribution = done_attribution(trial, users["eng"])
    # A task the broker has not taken yet, for the admin's outbox pages.
    OutboxMessage.objects.create(name="approvals.tag_checkpoint", args=[request.pk], last_error="broker down")
    # A second administrator's proposal to loosen the policy: the admin class may confirm it.
    proposal = policy_services.policy_create(
        user=make_user("iris", [Role.ADMIN]), approval_quorum=1, reason="faster approvals"
    )
    # A deployment serving an approved model (the engineer's audit, approved by the committee), an
    # incident, and a second administrator's proposal to loosen its monitor.
    deployed_request = approval_services.review_request_create(
        user=users["eng"],
        title="Matrix credit model",
        intended_use="Pre-screening",
        documents=[verdict_document_of_audit(audit=PredictionAuditFactory.create(created_by=users["eng"]))],
        model_identifier=DEPLOYED,
    )
    approved(deployed_request, users["reviewer"], [users["committee"], frank])
    deployment = monitoring_services.deployment_create(
        user=users["eng"], name=NAMES["deployment"], description="Loans", model_identifier=DEPLOYED
    )
    Incident.objects.create(
        deployment=deployment, model_identifier=DEPLOYED, reason="matrix breach", cause={"kind": "matrix"}
    )
    monitor_proposal = monitoring_services.monitor_policy_create(
        user=User.objects.get(username="iris"),
        deployment=deployment,
        changes={"alpha": 0.01},
        reason="fewer alarms",
    )
    # A webhook endpoint of the deployment (the administrators' webhook routes).
    webhook, _ = monitoring_services.webhook_register(
        deployment=deployment, user=users["admin"], url="https://rollouts.example/hooks"
    )
    WebhookDelivery.objects.create(  # an event in its log, as a worker leaves a refused one
        endpoint=webhook, event="incident.opened", body="{}", attempts=1, status="failed", response_code=410
    )
    # A counted production batch (its look) of the deployment, posted as pre-aggregated counts.
    received = monitoring_services.batch_receive_counts(
        deployment=deployment,
        user=users["admin"],
        batch_id="matrix-batch-1",
        counts={"gender": {"groups": {"f": {"tp": 40, "fn": 2, "fp": 5, "tn": 60}, "m": {"tp": 45, "fn": 1}}}},
        model="",
    )
    monitoring_services.batch_count(batch_id=received.batch.pk)
    gate_token = account_services.api_token_create(
        user=users["admin"], account="deploy-bot", name="pipeline", days=30
    ).secret
    world = World(
        users=users,
        version=version,
        other_version=other_version,
        staged=staged,
        other_staged=other_staged,
        experiment=trial.experiment,
        trial=trial,
        audit=audit,
        other_audit=other_audit,
        document=document,
        other_document=verdict_document_of_audit(audit=other_audit),
        request=request,
        waiver=waiver,
        report=report,
        deployment=deployment,
        gate_token=gate_token,
        fail_key=keys(request, FAIL)[0],
    )
    assert trial.checkpoint
    assert CONFIG_ONLY in world.experiment.config_yaml
    world.engineer_only = {**ENGINEER_ONLY, "checkpoint path": trial.checkpoint, "full config": CONFIG_ONLY}
    world.kwargs = {
        "dataset_id": version.dataset_id,
        "version_id": version.pk,
        "staged_id": staged.pk,
        "experiment_id": trial.experiment_id,
        "trial_id": trial.pk,
        "audit_id": audit.pk,
        "comparison_id": comparison.pk,
        "attribution_id": attribution.pk,
        "document_id": document.pk,
        "request_id": request.pk,
        "waiver_id": waiver.pk,
        "report_id": report.pk,
        "number": 1,
        "authority_id": CertificateAuthority.objects.get().pk,
        "proposal_id": proposal.pk,
        "queued_id": queued.pk,
        "whatif_id": whatif_item.pk,
        "user_id": users["eng2"].pk,  # the members pages' member
        "role_proposal_id": role_proposal.pk,
        "name": deployment.name,
        "monitor_proposal_id": monitor_proposal.pk,
        "webhook_id": webhook.pk,
        "batch_id": received.batch.batch_id,
    }
    return world
