"""Deployments: created with a safe name and version 1 of their monitor policy; only a model the gate
approves now is promoted, every change kept; a rollback falls back to the most recent earlier model
that is still approved, or suspends the deployment; the reconciliation rolls back what lost its approval."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import Role, User
from auditportal.activity.models import Event, Verb
from auditportal.approvals import selectors as approval_selectors
from auditportal.approvals import services as approval_services
from auditportal.approvals.models import ReviewRequest, Waiver
from auditportal.audits import services as audit_services
from auditportal.datasets.models import DatasetVersion
from auditportal.evidence.selectors import verdict_document_of_audit
from auditportal.monitoring import selectors, services
from auditportal.monitoring.models import (
    ChangeKind,
    Deployment,
    DeploymentChange,
    DeploymentState,
    Incident,
    MonitorPolicy,
)
from auditportal.monitoring.services import DeploymentError
from auditportal.monitoring.spec import MonitorSpec
from tests.approvals.conftest import approved, in_review, trial_document
from tests.evidence.helpers import UNFAIR
from tests.factories import PredictionAuditFactory, make_user
from tests.monitoring.conftest import Approve, suspend

pytestmark = pytest.mark.django_db


def _events(verb: Verb) -> list[Event]:
    return list(Event.objects.filter(verb=verb).order_by("seq"))


def _refresh(deployment: Deployment) -> Deployment:
    return Deployment.objects.get(pk=deployment.pk)


# -- creating ------------------------------------------------------------------------------------


def test_an_engineer_creates_an_empty_deployment_with_the_default_monitor_policy_and_an_event(bob: User) -> None:
    deployment = services.deployment_create(user=bob, name="credit-scoring/prod", description="  Loans  ")
    assert (deployment.name, deployment.description, deployment.state, deployment.model_identifier) == (
        "credit-scoring/prod",
        "Loans",
        DeploymentState.EMPTY,
        "",
    )
    policy = MonitorPolicy.objects.get(deployment=deployment)
    assert (policy.version, policy.created_by, policy.spec) == (1, bob, MonitorSpec().as_json())
    [event] = _events(Verb.DEPLOYMENT_CREATED)
    assert (event.actor, event.target_id, event.data["deployment"]) == (bob, str(deployment.pk), "credit-scoring/prod")
    assert deployment.changes.count() == 0


@pytest.mark.parametrize(
    "name",
    [
        "",
        "Credit-scoring/prod",
        "credit scoring",
        "credit//prod",
        "/credit",
        "credit/",
        "-credit",
        "credit/-/promote",
        "credit/.hidden",
        "crédit",
        "credit\x00prod",
        "c" * 101,
        "../etc",
    ],
)
def test_a_name_that_is_not_a_safe_slug_is_refused_naming_the_field_and_nothing_is_made(bob: User, name: str) -> None:
    with pytest.raises(DeploymentError, match="A deployment's name is 1 to 100 characters") as refused:
        services.deployment_create(user=bob, name=name)
    assert refused.value.field == "name"
    assert not Deployment.objects.exists()
    assert not Event.objects.filter(verb=Verb.DEPLOYMENT_CREATED).exists()


def test_a_name_is_taken_once(bob: User, erin: User) -> None:
    services.deployment_create(user=bob, name="credit-scoring/prod")
    with pytest.raises(DeploymentError, match="A deployment named 'credit-scoring/prod' exists already") as refused:
        services.deployment_create(user=erin, name="credit-scoring/prod")
    assert refused.value.field == "name"
    assert Deployment.objects.count() == 1


@pytest.mark.parametrize("who", ["carol", "dave", "oscar", "alice"])
def test_only_ml_engineers_and_administrators_create_deployments(who: str, request: pytest.FixtureRequest) -> None:
    user: User = request.getfixturevalue(who)
    with pytest.raises(PermissionDenied, match="Only an ML engineer or an administrator can create a deployment"):
        services.deployment_create(user=user, name="credit-scoring/prod")
    assert not Deployment.objects.exists()


def test_an_administrator_creates_one_with_a_first_approved_model(erin: User, approve: Approve) -> None:
    request = approve("credit:3")
    deployment = services.deployment_create(user=erin, name="credit/staging", model_identifier="credit:3")
    assert (deployment.state, deployment.model_identifier, deployment.review_request_id) == (
        DeploymentState.SERVING,
        "credit:3",
        request.pk,
    )
    assert [e.verb for e in Event.objects.filter(target_type="monitoring.deployment").order_by("seq")] == [
        Verb.DEPLOYMENT_CREATED,
        Verb.DEPLOYMENT_PROMOTED,
    ]


def test_a_first_model_that_is_not_approved_leaves_no_deployment(erin: User) -> None:
    with pytest.raises(DeploymentError, match="no review request names the model 'credit:9'") as refused:
        services.deployment_create(user=erin, name="credit/staging", model_identifier="credit:9")
    assert refused.value.field == "model"
    assert not Deployment.objects.exists()
    assert not MonitorPolicy.objects.exists()


# -- promoting -----------------------------------------------------------------------------------


def test_an_approved_model_is_promoted_and_every_promotion_stays_in_the_history(
    deployment: Deployment, approve: Approve, bob: User, erin: User
) -> None:
    first, second = approve("credit:3"), approve("credit:4")
    services.deployment_promote(deployment=deployment, model_identifier="credit:3", by=bob)
    promoted = services.deployment_promote(
        deployment=deployment, model_identifier=" credit:4 ", by=erin, reason="Better recall for thin files."
    )
    assert (promoted.state, promoted.model_identifier, promoted.review_request_id, promoted.reason) == (
        DeploymentState.SERVING,
        "credit:4",
        second.pk,
        "Better recall for thin files.",
    )
    assert _refresh(deployment).model_identifier == "credit:4"
    history = list(selectors.deployment_history(deployment=deployment))
    assert [(c.seq, c.kind, c.model_identifier, c.from_model, c.review_request_id, c.by) for c in history] == [
        (2, ChangeKind.PROMOTED, "credit:4", "credit:3", second.pk, erin),
        (1, ChangeKind.PROMOTED, "credit:3", "", first.pk, bob),
    ]
    assert history[1].reason == f"Promoted by bob: review request #{first.pk} approves it."
    events = _events(Verb.DEPLOYMENT_PROMOTED)
    assert [(e.actor, e.data["model"], e.data["from_model"], e.data["review_request"]) for e in events] == [
        (bob, "credit:3", None, first.pk),
        (erin, "credit:4", "credit:3", second.pk),
    ]


def test_a_model_no_review_request_names_is_refused_with_the_reason(deployment: Deployment, bob: User) -> None:
    with pytest.raises(DeploymentError) as refused:
        services.deployment_promote(deployment=deployment, model_identifier="credit:9", by=bob)
    assert (
        str(refused.value)
        == "'credit:9' cannot be promoted: no review request names the model 'credit:9', so it is not approved."
    )
    assert refused.value.field == "model"
    assert _refresh(deployment).state == DeploymentState.EMPTY
    assert not DeploymentChange.objects.exists()
    assert not _events(Verb.DEPLOYMENT_PROMOTED)


def test_a_model_still_in_review_is_refused_with_its_state(
    deployment: Deployment, bob: User, carol: User, dataset_storage: Path
) -> None:
    request = approval_services.review_request_create(
        user=bob,
        title="Credit v5",
        intended_use="Pre-screening",
        documents=[verdict_document_of_audit(audit=PredictionAuditFactory.create(created_by=bob))],
        model_identifier="credit:5",
    )
    in_review(request, carol)
    with pytest.raises(DeploymentError) as refused:
        services.deployment_promote(deployment=deployment, model_identifier="credit:5", by=bob)
    assert str(refused.value) == (
        f"'credit:5' cannot be promoted: it is not approved: its review request #{request.pk} is in review."
    )
    assert not DeploymentChange.objects.exists()


def test_a_suspended_model_is_refused_with_the_suspensions_reason(
    deployment: Deployment, approve: Approve, bob: User
) -> None:
    request = approve("credit:4")
    suspend(request, "the FNR of women rose above 5% in production")
    with pytest.raises(DeploymentError) as refused:
        services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob)
    assert str(refused.value) == (
        f"'credit:4' cannot be promoted: its approval (review request #{request.pk}) is suspended: "
        "the FNR of women rose above 5% in production"
    )
    assert refused.value.field == "model"


def test_a_revoked_approval_is_refused(deployment: Deployment, approve: Approve, bob: User, erin: User) -> None:
    request = approve("credit:4")
    approval_services.review_request_revoke(user=erin, request=request, reason="A data leak.")
    with pytest.raises(DeploymentError, match=rf"its approval \(review request #{request.pk}\) was revoked on "):
        services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob)


@pytest.fixture
def waived_request(
    demo_version: DatasetVersion, bob: User, carol: User, dave: User, frank: User, runs: Path
) -> ReviewRequest:
    """bob's trial with FAIL comparisons, approved on waivers that expire in 30 days."""
    document = trial_document(demo_version, bob, UNFAIR, runs)
    request = approval_services.review_request_create(
        user=bob, title="Credit model v4", intended_use="Pre-screening", documents=[document]
    )
    return approved(request, carol, [dave, frank])


def _expire_waivers(request: ReviewRequest) -> None:
    # Time passes: the waivers' expiry is now behind us (as on the day after the date they were given).
    Waiver.objects.filter(request=request).update(expires_at=timezone.now() - timedelta(minutes=1))


def test_an_approval_whose_waiver_expired_is_refused_with_when_it_lapsed(
    deployment: Deployment, waived_request: ReviewRequest, bob: User
) -> None:
    model = waived_request.model_identifier
    services.deployment_promote(deployment=deployment, model_identifier=model, by=bob)
    other = services.deployment_create(user=bob, name="credit-scoring/staging")
    _expire_waivers(waived_request)
    with pytest.raises(DeploymentError, match=r"lapsed at .* UTC, when a waiver it rests on expired\.$") as refused:
        services.deployment_promote(deployment=other, model_identifier=model, by=bob)
    assert refused.value.field == "model"
    # The deployment that serves it says so until the reconciliation rolls it back (nothing to fall to).
    assert selectors.deployment_status(name="credit-scoring/prod").approved is False
    [change] = services.deployments_reconcile()
    assert (change.kind, change.cause["kind"], change.by) == (ChangeKind.SUSPENDED, "approval_lost", None)
    assert "lapsed at" in change.reason


def test_the_model_that_already_serves_is_not_promoted_again(
    deployment: Deployment, approve: Approve, bob: User
) -> None:
    approve("credit:4")
    services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob)
    with pytest.raises(DeploymentError, match="'credit:4' already serves in credit-scoring/prod") as refused:
        services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob)
    assert refused.value.field == "model"
    assert deployment.changes.count() == 1


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("", "Name the model to promote"),
        ("   ", "Name the model to promote"),
        ("m" * 256, "A model identifier is at most 255 characters"),
        ("credit\x00:4", "A model identifier cannot contain NUL characters"),
    ],
)
def test_a_model_identifier_that_cannot_be_one_is_refused_naming_the_field(
    deployment: Deployment, bob: User, model: str, message: str
) -> None:
    with pytest.raises(DeploymentError, match=message) as refused:
        services.deployment_promote(deployment=deployment, model_identifier=model, by=bob)
    assert refused.value.field == "model"


@pytest.mark.parametrize("who", ["carol", "dave", "oscar"])
def test_only_ml_engineers_and_administrators_promote(
    deployment: Deployment, approve: Approve, who: str, request: pytest.FixtureRequest
) -> None:
    approve("credit:4")
    user: User = request.getfixturevalue(who)
    with pytest.raises(PermissionDenied, match="Only an ML engineer or an administrator can promote"):
        services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=user)
    assert not DeploymentChange.objects.exists()


# -- rolling back --------------------------------------------------------------------------------


def _promote(deployment: Deployment, by: User, *models: str) -> None:
    for model in models:
        services.deployment_promote(deployment=deployment, model_identifier=model, by=by)


def test_a_breach_of_the_serving_model_rolls_back_to_the_previous_approved_one(
    deployment: Deployment, approve: Approve, bob: User
) -> None:
    first = approve("credit:3")
    second = approve("credit:4")
    _promote(deployment, bob, "credit:3", "credit:4")
    incident = Incident.objects.create(
        deployment=deployment,
        model_identifier="credit:4",
        review_request=second,
        reason="FNR of women 0.08 > 0.05",
        cause={"kind": "breach", "metric": "fnr"},
    )
    suspend(second)
    change = services.deployment_rollback(
        deployment=deployment,
        reason="credit:4 breached its monitor: FNR of women above 0.05",
        cause={"kind": "breach", "incident": incident.pk},
        incident=incident,
        from_model="credit:4",
    )
    assert change is not None
    assert (change.seq, change.kind, change.model_identifier, change.from_model, change.by, change.incident) == (
        3,
        ChangeKind.ROLLED_BACK,
        "credit:3",
        "credit:4",
        None,
        incident,
    )
    deployment = _refresh(deployment)
    assert (deployment.state, deployment.model_identifier, deployment.review_request_id, deployment.since) == (
        DeploymentState.ROLLED_BACK,
        "credit:3",
        first.pk,
        change.at,
    )
    assert deployment.reason == "credit:4 breached its monitor: FNR of women above 0.05"
    [event] = _events(Verb.DEPLOYMENT_ROLLED_BACK)
    assert event.actor is None
    assert (event.data["model"], event.data["from_model"], event.data["incident"], event.data["passed_over"]) == (
        "credit:3",
        "credit:4",
        incident.pk,
        [],
    )
    # Every earlier entry stays.
    assert [c.kind for c in selectors.deployment_history(deployment=deployment)] == [
        ChangeKind.ROLLED_BACK,
        ChangeKind.PROMOTED,
        ChangeKind.PROMOTED,
    ]


def test_a_rollback_passes_over_earlier_models_that_lost_their_approval(
    deployment: Deployment, approve: Approve, bob: User
) -> None:
    oldest, older, current = approve("credit:2"), approve("credit:3"), approve("credit:4")
    _promote(deployment, bob, "credit:2", "credit:3", "credit:4")
    suspend(older, "credit:3 was retired")
    suspend(current)
    change = services.deployment_rollback(deployment=deployment, reason="credit:4 breached", from_model="credit:4")
    assert change is not None
    assert (change.kind, change.model_identifier, change.review_request_id) == (
        ChangeKind.ROLLED_BACK,
        "credit:2",
        oldest.pk,
    )
    [event] = _events(Verb.DEPLOYMENT_ROLLED_BACK)
    assert event.data["passed_over"] == [
        {"model": "credit:3", "why": f"its approval (review request #{older.pk}) is suspended: credit:3 was retired"}
    ]


def test_with_no_earlier_approved_model_the_deployment_is_suspended(
    deployment: Deployment, approve: Approve, bob: User
) -> None:
    first, second = approve("credit:3"), approve("credit:4")
    _promote(deployment, bob, "credit:3", "credit:4")
    suspend(first, "credit:3 was retired")
    suspend(second)
    change = services.deployment_rollback(deployment=deployment, reason="credit:4 breached", cause={"kind": "breach"})
    assert change is not None
    assert (change.kind, change.model_identifier, change.review_request, change.from_model) == (
        ChangeKind.SUSPENDED,
        "",
        None,
        "credit:4",
    )
    deployment = _refresh(deployment)
    assert (deployment.state, deployment.model_identifier, deployment.review_request) == (
        DeploymentState.SUSPENDED,
        "",
        None,
    )
    [event] = _events(Verb.DEPLOYMENT_SUSPENDED)
    assert (event.data["model"], event.data["cause"], [p["model"] for p in event.data["passed_over"]]) == (
        None,
        {"kind": "breach"},
        ["credit:3"],
    )
    with pytest.raises(DeploymentError, match="Nothing serves in credit-scoring/prod \\(suspended\\)") as refused:
        services.deployment_rollback(deployment=deployment, reason="again")
    assert refused.value.field == "state"


def test_only_models_promoted_before_the_serving_one_are_fallbacks(
    deployment: Deployment, approve: Approve, bob: User
) -> None:
    """credit:4 was rolled back by hand (still approved); when credit:3, which it fell back to, breaches,
    the deployment does not go forward to credit:4: only a model promoted before credit:3 would do."""
    approve("credit:3")
    approve("credit:4")
    _promote(deployment, bob, "credit:3", "credit:4")
    by_hand = services.deployment_rollback(deployment=deployment, reason="Latency too high", by=bob)
    assert by_hand is not None
    assert (by_hand.model_identifier, by_hand.by) == ("credit:3", bob)
    change = services.deployment_rollback(deployment=deployment, reason="credit:3 breached", from_model="credit:3")
    assert change is not None
    assert change.kind == ChangeKind.SUSPENDED


def test_a_model_promoted_again_falls_back_to_what_served_before_it(
    deployment: Deployment, approve: Approve, bob: User
) -> None:
    approve("credit:3")
    approve("credit:4")
    _promote(deployment, bob, "credit:3", "credit:4", "credit:3")
    change = services.deployment_rollback(deployment=deployment, reason="credit:3 breached", exclude=["credit:9"])
    assert change is not None
    assert (change.kind, change.model_identifier) == (ChangeKind.ROLLED_BACK, "credit:4")


def test_models_the_caller_excludes_are_passed_over(deployment: Deployment, approve: Approve, bob: User) -> None:
    approve("credit:3")
    approve("credit:4")
    _promote(deployment, bob, "credit:3", "credit:4")
    change = services.deployment_rollback(deployment=deployment, reason="breach", exclude=["credit:3"])
    assert change is not None
    assert change.kind == ChangeKind.SUSPENDED
    assert _events(Verb.DEPLOYMENT_SUSPENDED)[0].data["passed_over"] == [
        {"model": "credit:3", "why": "excluded by the caller (an open incident)"}
    ]


def test_a_rollback_for_a_model_that_no_longer_serves_changes_nothing(
    deployment: Deployment, approve: Approve, bob: User
) -> None:
    approve("credit:3")
    approve("credit:4")
    _promote(deployment, bob, "credit:3", "credit:4")
    assert services.deployment_rollback(deployment=deployment, reason="late breach", from_model="credit:3") is None
    assert deployment.changes.count() == 2
    assert _refresh(deployment).state == DeploymentState.SERVING
    assert not _events(Verb.DEPLOYMENT_ROLLED_BACK)


def test_a_rollback_needs_a_reason_and_a_person_needs_the_role(
    deployment: Deployment, approve: Approve, bob: User, carol: User
) -> None:
    approve("credit:4")
    _promote(deployment, bob, "credit:4")
    with pytest.raises(DeploymentError, match="The reason is required") as refused:
        services.deployment_rollback(deployment=deployment, reason="  ")
    assert refused.value.field == "reason"
    with pytest.raises(PermissionDenied, match="Only an ML engineer or an administrator can roll a deployment back"):
        services.deployment_rollback(deployment=deployment, reason="no", by=carol)
    assert deployment.changes.count() == 1


# -- the gate and the reconciliation ---------------------------------------------------------------


def test_a_model_suspended_by_a_retirement_turns_the_gate_and_the_status_false_and_is_rolled_back(
    deployment: Deployment, approve: Approve, bob: User
) -> None:
    first, second = approve("credit:3"), approve("credit:4")
    _promote(deployment, bob, "credit:3", "credit:4")
    assert second.prediction_audit is not None
    audit_services.prediction_audit_retire(user=bob, audit=second.prediction_audit, reason="Labels shifted by a row.")

    answer = approval_selectors.gate_answer(model_identifier="credit:4")
    assert answer is not None
    assert answer.approved is False
    assert answer.suspension is not None
    assert "Labels shifted by a row." in answer.suspension["reason"]
    status = selectors.deployment_status(name="credit-scoring/prod")
    assert (status.state, status.model, status.approved, status.serving_promoted) == (
        "serving",
        "credit:4",
        False,
        False,
    )

    [change] = services.deployments_reconcile()
    assert (change.kind, change.model_identifier, change.by) == (ChangeKind.ROLLED_BACK, "credit:3", None)
    assert change.cause == {"kind": "approval_lost", "model": "credit:4", "review_request": second.pk}
    assert change.reason.startswith("The gate no longer approves 'credit:4': its approval (review request #")
    assert services.deployments_reconcile() == []
    status = selectors.deployment_status(name="credit-scoring/prod")
    assert (status.state, status.model, status.approved, status.review_request) == (
        "rolled_back",
        "credit:3",
        True,
        first.pk,
    )


def test_beat_runs_the_reconciliation_every_minute_as_a_registered_task(
    deployment: Deployment, approve: Approve, bob: User, settings: SettingsWrapper
) -> None:
    from auditportal.celery import app
    from auditportal.monitoring.tasks import deployments_reconcile_task

    assert deployments_reconcile_task.name in app.tasks
    entry = settings.CELERY_BEAT_SCHEDULE["monitoring-reconcile-deployments"]
    assert (entry["task"], entry["schedule"]) == ("monitoring.reconcile_deployments", timedelta(seconds=60))
    request = approve("credit:4")
    _promote(deployment, bob, "credit:4")
    approval_services.review_request_revoke(user=make_user("iris", [Role.ADMIN]), request=request, reason="Leak")
    assert app.tasks["monitoring.reconcile_deployments"].apply().get() == 1
    assert _refresh(deployment).state == DeploymentState.SUSPENDED
    assert app.tasks["monitoring.reconcile_deployments"].apply().get() == 0
