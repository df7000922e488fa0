from __future__ import annotations

from pathlib import Path

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import Role, User
from auditportal.audits.models import PredictionAudit
from auditportal.datasets.models import DatasetVersion
from auditportal.reports import services, signing
from tests.factories import DatasetVersionFactory, PredictionAuditFactory, make_user
from tests.reports.helpers import SignedReport, decided_context


@pytest.fixture(autouse=True)
def small_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """2048-bit keys: a quarter of the time of the 3072-bit production keys to make, same code path."""
    monkeypatch.setattr(signing, "KEY_SIZE", 2048)


@pytest.fixture(autouse=True)
def report_storage(settings: SettingsWrapper, tmp_path: Path) -> Path:
    """A private report store per test (the stamp font cache stays shared: it is made once)."""
    settings.REPORT_STORAGE_DIR = tmp_path / "reports"
    return tmp_path / "reports"


@pytest.fixture
def member_dave(db: None) -> User:
    return make_user("dave", [Role.ETHICS_COMMITTEE])


@pytest.fixture
def member_fay(db: None) -> User:
    user = make_user("fay", [Role.ETHICS_COMMITTEE])
    user.first_name, user.last_name = "Fay", "Okafor"
    user.save(update_fields=["first_name", "last_name"])
    return user


@pytest.fixture
def audit(db: None, dataset_storage: Path) -> PredictionAudit:
    audit: PredictionAudit = PredictionAuditFactory.create()
    return audit


@pytest.fixture
def dataset_version(db: None, dataset_storage: Path) -> DatasetVersion:
    version: DatasetVersion = DatasetVersionFactory.create()
    return version


@pytest.fixture
def signed_report(
    audit: PredictionAudit, dataset_version: DatasetVersion, member_dave: User, member_fay: User
) -> SignedReport:
    """A report certified by the organisation and signed by both committee members."""
    report = services.report_generate(context=decided_context(audit, dataset_version, [member_dave, member_fay]))
    first = report.revisions.get()
    second = services.report_sign_member(report=report, member=member_dave)
    third = services.report_sign_member(report=report, member=member_fay)
    return SignedReport(report=report, revisions=[first, second, third])
