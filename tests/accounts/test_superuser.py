"""is_superuser opens the Django admin, nothing more: portal roles come only from grants."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from auditportal.accounts.models import Role, User
from auditportal.accounts.services import role_grant
from auditportal.audits.models import PredictionAudit
from auditportal.datasets.models import DatasetVersion
from tests.factories import DatasetVersionFactory, PredictionAuditFactory, client_for, make_user


@pytest.fixture
def root(db: None) -> User:
    """As `createsuperuser` leaves an account: staff, superuser, no role."""
    user = make_user("root")
    user.is_staff = user.is_superuser = True
    user.save(update_fields=["is_staff", "is_superuser"])
    return user


@pytest.fixture
def audit(bob: User, dataset_storage: Path) -> PredictionAudit:
    return PredictionAuditFactory.create(created_by=bob)


@pytest.fixture
def version(alice: User, dataset_storage: Path) -> DatasetVersion:
    return DatasetVersionFactory.create(created_by=alice, name="loans")


def test_a_superuser_holds_no_role_and_is_no_member(root: User) -> None:
    assert not any(root.has_role(role) for role in Role)
    assert not root.is_member


def test_a_superuser_without_grants_sees_nothing_and_may_do_nothing(
    root: User, audit: PredictionAudit, version: DatasetVersion
) -> None:
    client = client_for(root)
    home = client.get(reverse("home")).content
    assert b"Your account has no role yet" in home
    assert b"loans" not in home
    assert b"Register dataset" not in home
    audits = client.get(reverse("audits:predictions")).content
    assert b"Your account has no role yet" in audits
    assert b"scores.csv" not in audits
    assert client.get(reverse("audits:prediction", args=[audit.pk])).status_code == 404
    assert client.get(reverse("datasets:version", args=[version.pk])).status_code == 404
    assert client.get("/api/v1/audits/predictions/").json()["results"] == []
    assert client.get(reverse("audits:prediction-new")).status_code == 403  # an engineer's or reviewer's job
    assert client.get(reverse("datasets:upload")).status_code == 403  # a steward's
    assert client.get(reverse("experiments:new")).status_code == 403  # an engineer's
    retire = client.post(f"/api/v1/audits/predictions/{audit.pk}/retire/", {"reason": "x"})
    assert retire.status_code == 404
    audit.refresh_from_db()
    assert not audit.is_retired


def test_a_superuser_engineer_is_not_a_reviewer(root: User, audit: PredictionAudit, erin: User) -> None:
    role_grant(user=root, role=Role.ML_ENGINEER, granted_by=erin)
    client = client_for(root)
    page = client.get(reverse("audits:prediction", args=[audit.pk]))
    assert page.status_code == 200
    assert b"Retire this audit" not in page.content  # someone else's audit: a reviewer's call
    assert client.post(reverse("audits:prediction-retire", args=[audit.pk]), {"reason": "x"}).status_code == 403
    assert not root.has_role(Role.REVIEWER)
    assert not root.has_role(Role.ETHICS_COMMITTEE)
    audit.refresh_from_db()
    assert not audit.is_retired
