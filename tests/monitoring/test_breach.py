"""A confirmed breach: in one transaction the model's approval is suspended, the deployment rolls back
to the most recent earlier model still approved (or is suspended), an incident keeps the evidence as
a frozen canonical document with its SHA-256, events are written; after the commit the committee and
the requester are mailed and webhooks queued. Idempotent; only the committee brings a model back."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from django.core import mail
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.approvals import selectors as approval_selectors
from auditportal.approvals import services as approval_services
from auditportal.approvals.models import RequestState, ReviewRequest
from auditportal.evidence.selectors import verdict_document_of_audit
from auditportal.fairness.documents.canonical import canonical_json
from auditportal.monitoring import notifications, services
from auditportal.monitoring import tasks as monitoring_tasks  # registers its tasks (worker_runs)
from auditportal.monitoring.models import (
    ChangeKind,
    Deployment,
    DeploymentChange,
    DeploymentState,
    Incident,
)
from auditportal.monitoring.services import breach as breach_module
from auditportal.outbox.models import OutboxMessage
from tests.approvals.conftest import approved, worker_runs
from tests.factories import PredictionAuditFactory
from tests.monitoring.breaching import breaching_look, compliant_look
from tests.monitoring.conftest import Approve

pytestmark = pytest.mark.django_db
assert monitoring_tasks.incident_opened_mail_task.name == breach_module.MAIL_INCIDENT_TASK


def _refresh(deployment: Deployment) -> Deployment:
    return Deployment.objects.get(pk=deployment.pk)


@pytest.fixture
def rolled_out(deployment: Deployment, approve: Approve, bob: User) -> dict[str, ReviewRequest]:
    """credit:3 then credit:4 promoted into credit-scoring/prod; credit:4 serves."""
    requests = {"credit:3": approve("credit:3"), "credit:4": approve("credit:4")}
    services.deployment_promote(deployment=deployment, model_identifier="credit:3", by=bob)
    services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob)
    return requests


def _confirm(deployment: Deployment, model: str = "credit:4", **kwargs: Any) -> Incident | None:
    return services.breach_confirm(
        deployment=deployment,
        model_identifier=model,
        judgement=kwargs.pop("judgement", breaching_look()),
        batch_ids=kwargs.pop("batch_ids", [12, 11]),
        look_id=kwargs.pop("look_id", 7),
    )


def test_a_breach_suspends_the_model_and_rolls_back_to_the_earlier_approved_model(
    deployment: Deployment, rolled_out: dict[str, ReviewRequest]
) -> None:
    incident = _confirm(deployment)
    assert incident is not None
    deployment = _refresh(deployment)
    assert (deployment.state, deployment.model_identifier) == (DeploymentState.ROLLED_BACK, "credit:3")
    assert deployment.review_request == rolled_out["credit:3"]
    change = deployment.changes.order_by("-seq").first()
    assert change is not None
    assert (change.kind, change.from_model, change.incident) == (ChangeKind.ROLLED_BACK, "credit:4", incident)
    assert change.cause == {
        "kind": "monitoring_breach",
        "incident": incident.pk,
        "deployment": "credit-scoring/prod",
        "model": "credit:4",
    }
    request = ReviewRequest.objects.get(pk=rolled_out["credit:4"].pk)
    assert request.state == RequestState.SUSPENDED
    answer = approval_selectors.gate_answer(model_identifier="credit:4")
    assert answer is not None
    assert answer.approved is False
    assert answer.suspension is not None
    assert answer.suspension["cause"]["incident"] == incident.pk
    assert "fnr of group 'women' is 0.1800 (180/1000)" in incident.reason
    assert incident.reason.startswith("credit:4 breached its monitor in credit-scoring/prod at look #7: ")


def test_the_incident_keeps_the_breached_findings_as_a_frozen_document_with_its_sha256(
    deployment: Deployment, rolled_out: dict[str, ReviewRequest]
) -> None:
    incident = _confirm(deployment)
    assert incident is not None
    incident = Incident.objects.get(pk=incident.pk)  # as stored, read back
    document = incident.document
    assert document is not None
    assert incident.document_sha256 == hashlib.sha256(canonical_json(document)).hexdigest()
    assert incident.document_sha256 == hashlib.sha256(breach_module.incident_canonical(incident)).hexdigest()
    assert (document["deployment"], document["model"], document["look"], document["batches"]) == (
        "credit-scoring/prod",
        "credit:4",
        7,
        [11, 12],
    )
    assert document["review_request"] == rolled_out["credit:4"].pk
    assert document["monitor_policy_version"] == 1
    assert document["method"] == document["judgement"]["method"]
    assert document["alpha_split"]
    assert document["comparisons"] == 2
    assert document["comparison_alpha"] == 0.025
    [breach] = document["breaches"]
    assert (breach["kind"], breach["metric"], breach["group"], breach["bound"], breach["limit"]) == (
        "rate",
        "fnr",
        "women",
        "at_most",
        0.05,
    )
    assert (breach["successes"], breach["trials"]) == (180, 1000)
    assert 0.05 < breach["low"] < 0.18 < breach["high"]
    assert breach["boundary"] is not None
    assert incident.cause == {"kind": "monitoring_breach", "look": 7, "batches": [11, 12], "findings": 1}


def test_a_look_in_breach_under_two_attributes_opens_one_incident_naming_both(
    deployment: Deployment, rolled_out: dict[str, ReviewRequest]
) -> None:
    judgements = {"gender": breaching_look(), "age_group": breaching_look(), "region": compliant_look()}
    incident = services.breach_confirm(
        deployment=deployment, model_identifier="credit:4", judgements=judgements, batch_ids=[11], look_id=7
    )
    assert incident is not None
    document = incident.document
    assert document is not None
    assert document["attributes"] == ["age_group", "gender"]  # the compliant one is no breach
    assert document["attribute"] == "age_group"
    assert sorted(document["judgements"]) == ["age_group", "gender"]
    assert document["judgements"]["gender"] == breaching_look().as_json()
    assert sorted((b["attribute"], b["metric"], b["group"]) for b in document["breaches"]) == [
        ("age_group", "fnr", "women"),
        ("gender", "fnr", "women"),
    ]
    assert incident.cause["findings"] == 2
    assert incident.document_sha256 == hashlib.sha256(canonical_json(document)).hexdigest()
    assert "at look #7 (age_group, gender): age_group: fnr of group 'women'" in incident.reason
    assert "; gender: fnr of group 'women'" in incident.reason
    assert notifications.incident_opened(incident_id=incident.pk) == 3
    assert "fnr of age_group women: interval [" in mail.outbox[-1].body
    assert "fnr of gender women: interval [" in mail.outbox[-1].body
    with pytest.raises(ValueError, match="confirms no breach"):
        services.breach_confirm(
            deployment=deployment,
            model_identifier="credit:3",
            judgements={"region": compliant_look()},
            batch_ids=[11],
        )
    with pytest.raises(ValueError, match="one of them"):
        services.breach_confirm(
            deployment=deployment,
            model_identifier="credit:3",
            judgement=breaching_look(),
            judgements={"gender": breaching_look()},
            batch_ids=[11],
        )


def test_a_breach_writes_its_events_in_order(deployment: Deployment, rolled_out: dict[str, ReviewRequest]) -> None:
    before = Event.objects.count()
    incident = _confirm(deployment)
    assert incident is not None
    verbs = list(Event.objects.order_by("seq").values_list("verb", flat=True)[before:])
    assert verbs == [Verb.REVIEW_REQUEST_SUSPENDED, Verb.DEPLOYMENT_ROLLED_BACK, Verb.INCIDENT_OPENED]
    opened = Event.objects.get(verb=Verb.INCIDENT_OPENED)
    assert opened.actor is None
    assert opened.data["document_sha256"] == incident.document_sha256
    assert opened.data["changes"] == [{"deployment": "credit-scoring/prod", "change": 3, "kind": "rolled_back"}]


def test_without_an_earlier_approved_model_the_deployment_is_suspended(
    deployment: Deployment, approve: Approve, bob: User
) -> None:
    approve("credit:4")
    services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob)
    incident = _confirm(deployment)
    deployment = _refresh(deployment)
    assert (deployment.state, deployment.model_identifier, deployment.review_request) == (
        DeploymentState.SUSPENDED,
        "",
        None,
    )
    assert deployment.changes.order_by("-seq").values_list("kind", "incident", flat=False).first() == (
        ChangeKind.SUSPENDED,
        incident.pk if incident else None,
    )


def test_an_earlier_model_whose_approval_is_lost_is_passed_over(
    deployment: Deployment, approve: Approve, bob: User
) -> None:
    approve("credit:2")
    lost = approve("credit:3")
    approve("credit:4")
    for model in ("credit:2", "credit:3", "credit:4"):
        services.deployment_promote(deployment=deployment, model_identifier=model, by=bob)
    approval_services.approval_suspend(request=lost, reason="its audit was retired", by=None, cause={"kind": "x"})
    _confirm(deployment)
    assert _refresh(deployment).model_identifier == "credit:2"


def test_a_second_breach_of_the_same_model_does_nothing(
    deployment: Deployment, rolled_out: dict[str, ReviewRequest]
) -> None:
    first = _confirm(deployment)
    counts = (Incident.objects.count(), DeploymentChange.objects.count(), Event.objects.count())
    outbox = OutboxMessage.objects.count()
    assert first is not None
    assert _confirm(deployment, look_id=8, batch_ids=[13]) is None
    assert (Incident.objects.count(), DeploymentChange.objects.count(), Event.objects.count()) == counts
    assert OutboxMessage.objects.count() == outbox
    assert services.incident_open(model_identifier="credit:4") == first


def test_a_breach_of_a_model_no_longer_serving_suspends_it_and_changes_no_deployment(
    deployment: Deployment, rolled_out: dict[str, ReviewRequest]
) -> None:
    changes = DeploymentChange.objects.count()
    incident = _confirm(deployment, model="credit:3")
    assert incident is not None
    assert DeploymentChange.objects.count() == changes
    deployment = _refresh(deployment)
    assert (deployment.state, deployment.model_identifier) == (DeploymentState.SERVING, "credit:4")
    assert ReviewRequest.objects.get(pk=rolled_out["credit:3"].pk).state == RequestState.SUSPENDED
    # and it is never fallen back to: a later breach of credit:4 suspends the deployment
    _confirm(deployment)
    assert _refresh(deployment).state == DeploymentState.SUSPENDED


def test_every_deployment_serving_the_model_rolls_back(
    deployment: Deployment, rolled_out: dict[str, ReviewRequest], bob: User
) -> None:
    staging = services.deployment_create(user=bob, name="credit-scoring/staging", model_identifier="credit:4")
    incident = _confirm(deployment)
    staging = _refresh(staging)
    assert staging.state == DeploymentState.SUSPENDED  # nothing earlier there
    change = staging.changes.order_by("-seq").first()
    assert change is not None
    assert change.incident is None
    assert change.cause["incident"] == (incident.pk if incident else 0)


def test_an_error_midway_leaves_nothing_written(
    deployment: Deployment, rolled_out: dict[str, ReviewRequest], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**kwargs: Any) -> None:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(breach_module, "deployment_rollback", broken)
    counts = (Incident.objects.count(), DeploymentChange.objects.count(), Event.objects.count())
    outbox = OutboxMessage.objects.count()
    with pytest.raises(RuntimeError, match="the disk is full"):
        _confirm(deployment)
    assert (Incident.objects.count(), DeploymentChange.objects.count(), Event.objects.count()) == counts
    assert OutboxMessage.objects.count() == outbox
    assert ReviewRequest.objects.get(pk=rolled_out["credit:4"].pk).state == RequestState.APPROVED
    assert _refresh(deployment).model_identifier == "credit:4"


def test_a_judgement_without_a_breach_or_bad_ids_is_refused(deployment: Deployment) -> None:
    with pytest.raises(ValueError, match="confirms no breach"):
        _confirm(deployment, judgement=compliant_look())
    with pytest.raises(ValueError, match="batch_ids must be a list of positive whole numbers"):
        _confirm(deployment, batch_ids=["12"])
    with pytest.raises(ValueError, match="look_id"):
        _confirm(deployment, look_id=-1)
    assert Incident.objects.count() == 0


def test_after_commit_the_committee_and_the_requester_are_mailed(
    deployment: Deployment,
    rolled_out: dict[str, ReviewRequest],
    dave: User,
    frank: User,
    settings: SettingsWrapper,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.PORTAL_BASE_URL = "https://portal.example"
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        incident = _confirm(deployment)
    assert incident is not None
    assert worker_runs(breach_module.MAIL_INCIDENT_TASK) == []  # nothing before the commit
    for callback in callbacks:
        callback()
    assert worker_runs(breach_module.MAIL_INCIDENT_TASK) == [3]
    incident_mails = [m for m in mail.outbox if m.subject.startswith("[Bias audit] Breach:")]
    assert sorted(m.to[0] for m in incident_mails) == ["bob@example.org", "dave@example.org", "frank@example.org"]
    message = incident_mails[0]
    assert message.subject == f"[Bias audit] Breach: credit:4 in credit-scoring/prod (incident #{incident.pk})"
    assert "fnr of women: interval [" in message.body
    assert "limit 0.05 (at_most)" in message.body
    assert "Serves now:       credit:3 (rolled back)" in message.body
    assert incident.document_sha256 in message.body
    assert "https://portal.example/monitoring/credit-scoring/prod/" in message.body
    # the suspension told the requester too, through approvals' own mail
    assert worker_runs(approval_services.MAIL_DECIDED_TASK) == [1]


# -- coming back ---------------------------------------------------------------------------------


def test_nothing_brings_a_breached_model_back_but_a_new_approval_and_a_promotion(
    deployment: Deployment,
    rolled_out: dict[str, ReviewRequest],
    bob: User,
    carol: User,
    dave: User,
    frank: User,
) -> None:
    _confirm(deployment)
    assert services.deployments_reconcile() == []
    deployment = _refresh(deployment)
    assert (deployment.state, deployment.model_identifier) == (DeploymentState.ROLLED_BACK, "credit:3")
    with pytest.raises(services.DeploymentError, match="suspended"):
        services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob)
    # the committee approves a new request for the model: the incident closes, the gate approves it,
    # and still nothing serves it until someone promotes it
    audit = PredictionAuditFactory.create(created_by=bob)
    again = approval_services.review_request_create(
        user=bob,
        title="Credit model credit:4, retrained threshold",
        intended_use="Pre-screening of loan applications",
        documents=[verdict_document_of_audit(audit=audit)],
        model_identifier="credit:4",
    )
    approved(again, carol, [dave, frank])
    assert services.incident_open(model_identifier="credit:4") is None
    answer = approval_selectors.gate_answer(model_identifier="credit:4")
    assert answer is not None
    assert answer.approved
    assert services.deployments_reconcile() == []
    assert _refresh(deployment).model_identifier == "credit:3"
    services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob)
    assert _refresh(deployment).state == DeploymentState.SERVING
