"""Approved models to promote, and deployments to promote them into."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from auditportal.accounts.models import User
from auditportal.approvals import services as approval_services
from auditportal.approvals.models import ReviewRequest
from auditportal.evidence.selectors import verdict_document_of_audit
from auditportal.monitoring import services
from auditportal.monitoring.models import Deployment
from tests.approvals.conftest import approved, frank, runs
from tests.experiments.conftest import demo_version, fake_trainer
from tests.factories import PredictionAuditFactory

__all__ = ["demo_version", "fake_trainer", "frank", "runs"]

Approve = Callable[[str], ReviewRequest]


@pytest.fixture
def approve(bob: User, carol: User, dave: User, frank: User, dataset_storage: Path) -> Approve:
    """``approve("credit:4")``: bob audits a file and asks for the model's approval; carol reviews it,
    dave and frank approve it (the default quorum of two)."""

    def made(model: str) -> ReviewRequest:
        audit = PredictionAuditFactory.create(created_by=bob)
        request = approval_services.review_request_create(
            user=bob,
            title=f"Credit model {model}",
            intended_use="Pre-screening of loan applications",
            documents=[verdict_document_of_audit(audit=audit)],
            model_identifier=model,
        )
        return approved(request, carol, [dave, frank])

    return made


@pytest.fixture
def deployment(bob: User) -> Deployment:
    return services.deployment_create(user=bob, name="credit-scoring/prod", description="Loan pre-screening")


def suspend(request: ReviewRequest, reason: str = "the monitor found the FNR of women above 5%") -> None:
    approval_services.approval_suspend(request=request, reason=reason, by=None, cause={"kind": "monitoring_breach"})
