"""A populated portal for the API's schema tests and fuzzer: every kind of object the API serves, a
member who holds every role, and a gate token."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone
from pytest_django import DjangoDbBlocker
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts import services as account_services
from auditportal.accounts.models import Role, TokenScope, User
from auditportal.approvals import services as approval_services
from auditportal.approvals.models import ReviewRequest, VoteChoice
from auditportal.datasets.models import DatasetVersion
from auditportal.evidence.models import VerdictDocument
from auditportal.evidence.selectors import verdict_document_of_audit
from auditportal.experiments.models import Experiment
from auditportal.monitoring import services as monitoring_services
from auditportal.monitoring.models import MonitorPolicyProposal, WebhookDelivery, WebhookDeliveryStatus
from tests.api.lazy_operations import pytest_pycollect_makeitem as pytest_pycollect_makeitem  # the fuzzer's
from tests.api.lazy_operations import pytest_runtest_setup as pytest_runtest_setup  # tests, built when run
from tests.approvals.conftest import approved, in_review, trial_document, vote, waive_all
from tests.database import rows_shared_by_tests
from tests.evidence.helpers import FAIR, UNFAIR
from tests.experiments.conftest import demo_version
from tests.factories import DemoDatasetVersionFactory, PredictionAuditFactory, make_user

__all__ = ["demo_version"]

MODEL = "vendor-score:2.1"


@dataclass
class Portal:
    member: User  # every role: the API's every operation is open to them, subject to its rules
    token: str  # a gate token
    monitoring_token: str  # a monitoring token: it posts the deployment's production batches
    model: str  # a model identifier a review request names
    ids: dict[str, list[int]] = field(default_factory=dict)  # path parameter -> ids that exist
    names: dict[str, list[str]] = field(default_factory=dict)  # path parameter -> names that exist (deployments)


@pytest.fixture
def portal(demo_version: DatasetVersion, settings: SettingsWrapper, tmp_path: Path, dataset_storage: Path) -> Portal:
    settings.EXPERIMENT_RUN_DIR = tmp_path / "runs"
    return portal_build(demo_version, tmp_path / "runs")


@pytest.fixture(scope="module")
def module_portal(
    django_db_setup: None, django_db_blocker: DjangoDbBlocker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Portal]:
    """The portal built once for a module whose tests each send it many requests (the fuzzer, the
    sweep): rolled back at the module's end, and what one test changes is gone for the next. Such a
    module overrides ``portal`` with a fixture that returns it (and asks for ``db``)."""
    base = tmp_path_factory.mktemp("portal")
    with rows_shared_by_tests(django_db_blocker, base):
        yield portal_build(DemoDatasetVersionFactory.create(rows=400), base / "runs")


def portal_build(demo_version: DatasetVersion, runs: Path) -> Portal:
    """Every kind of object the API serves; trials' checkpoint folders under ``runs``."""
    pat = make_user("pat", list(Role))
    bob = make_user("bob", [Role.ML_ENGINEER])
    carol = make_user("carol", [Role.REVIEWER])
    dave = make_user("dave", [Role.ETHICS_COMMITTEE])
    frank = make_user("frank", [Role.ETHICS_COMMITTEE])
    erin = make_user("erin", [Role.ADMIN])

    audit = PredictionAuditFactory.create(created_by=bob)
    audit_request = approval_services.review_request_create(
        user=bob,
        title="Vendor scoring model",
        intended_use="Ranking applications for manual review",
        documents=[verdict_document_of_audit(audit=audit)],
        model_identifier=MODEL,
    )
    approved(audit_request, carol, [dave, frank])
    fair = trial_document(demo_version, bob, FAIR, runs)
    unfair = trial_document(demo_version, bob, UNFAIR, runs)
    unfair_request = approval_services.review_request_create(
        user=bob, title="Credit model v4", intended_use="Pre-screening", documents=[unfair]
    )
    in_review(unfair_request, carol)
    approval_services.review_comment_add(user=carol, request=unfair_request, body="Why the gap?")
    waive_all(unfair_request, bob, [dave])
    vote(unfair_request, dave, VoteChoice.REJECT, "the gap is too large")
    # The same findings, in review without any waiver yet.
    unwaived = approval_services.review_request_create(
        user=bob,
        title="Credit model v5",
        intended_use="Pre-screening",
        documents=[trial_document(demo_version, bob, UNFAIR, runs)],
    )
    in_review(unwaived, carol)
    fair_request = approval_services.review_request_create(
        user=bob, title="Credit model v3", intended_use="Pre-screening", documents=[fair]
    )
    token = account_services.api_token_create(user=erin, account="deploy-bot", name="pipeline", days=30).secret
    # A deployment serving the approved model, and another administrator's proposal to loosen its monitor.
    deployment = monitoring_services.deployment_create(
        user=bob, name="credit-scoring/prod", description="Loan pre-screening", model_identifier=MODEL
    )
    proposal = monitoring_services.monitor_policy_create(
        user=erin, deployment=deployment, changes={"alpha": 0.01}, reason="Fewer false alarms"
    )
    assert isinstance(proposal, MonitorPolicyProposal)
    # A serving pipeline's monitoring token, and a counted batch of pre-aggregated counts (its look).
    monitoring = account_services.api_token_create(
        user=erin, account="scoring-service", name="batches", days=30, scope=TokenScope.MONITORING
    ).secret
    received = monitoring_services.batch_receive_counts(
        deployment=deployment,
        user=erin,
        batch_id="2026-12-07T08",
        counts={"gender": {"groups": {"f": {"tp": 40, "fn": 2, "fp": 5, "tn": 60}, "m": {"tp": 45, "fn": 1}}}},
        model="",
    )
    monitoring_services.batch_count(batch_id=received.batch.pk)
    # A webhook endpoint with one delivered event in its log (written as the delivery task would leave it).
    webhook, _ = monitoring_services.webhook_register(
        deployment=deployment, user=erin, url="https://rollouts.example/hooks", description="Argo Rollouts"
    )
    WebhookDelivery.objects.create(
        endpoint=webhook,
        event="deployment.promoted",
        body='{"event":"deployment.promoted"}',
        attempts=1,
        status=WebhookDeliveryStatus.DELIVERED,
        response_code=200,
        response_body_head="<b>ok</b>",
        last_attempt_at=timezone.now(),
        delivered_at=timezone.now(),
    )

    requests = [audit_request, unfair_request, unwaived, fair_request]
    return Portal(
        member=pat,
        token=token,
        monitoring_token=monitoring,
        model=MODEL,
        ids={
            "version_id": [demo_version.pk],
            "experiment_id": list(Experiment.objects.values_list("pk", flat=True)),
            "audit_id": [audit.pk],
            "document_id": list(VerdictDocument.objects.values_list("pk", flat=True)),
            "request_id": [r.pk for r in requests],
            "waiver_id": list(unfair_request.waivers.values_list("pk", flat=True)),
            "monitor_proposal_id": [proposal.pk],
            "webhook_id": [webhook.pk],
        },
        names={"name": [deployment.name], "batch_id": [received.batch.batch_id]},
    )


def session_of(user: User) -> dict[str, str]:
    """The cookies of a logged-in browser session, with a CSRF cookie (send it back as X-CSRFToken)."""
    client = Client()
    client.force_login(user)
    client.get("/login/")  # sets the CSRF cookie
    return {name: morsel.value for name, morsel in client.cookies.items()}


def review_requests(portal: Portal) -> list[ReviewRequest]:
    return list(ReviewRequest.objects.filter(pk__in=portal.ids["request_id"]))
