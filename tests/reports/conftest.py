from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pytest_django import DjangoDbBlocker
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import Role, User
from auditportal.audits.models import PredictionAudit
from auditportal.datasets.models import DatasetVersion
from auditportal.reports import services, signing
from tests.database import rows_shared_by_tests
from tests.factories import PASSWORD, DatasetVersionFactory, PredictionAuditFactory, make_user
from tests.keys import KeyPool
from tests.reports.helpers import SignedReport, decided_context

# The tests that read the signed report built once (``signed_report``): they run last in this
# folder, so that no other test here runs while its rows are there.
SHARED = "signed_report"


@pytest.fixture(autouse=True)
def small_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """2048-bit keys: a quarter of the time of the 3072-bit production keys to make, same code path."""
    monkeypatch.setattr(signing, "KEY_SIZE", 2048)


@pytest.fixture(autouse=True)
def report_storage(request: pytest.FixtureRequest, settings: SettingsWrapper, tmp_path: Path) -> Path:
    """A private report store per test (the stamp font cache stays shared: it is made once); for a test
    of the shared signed report, a copy of its files."""
    settings.REPORT_STORAGE_DIR = tmp_path / "reports"
    if SHARED in request.fixturenames:
        world: ReportWorld = request.getfixturevalue("report_world")
        shutil.copytree(world.reports, tmp_path / "reports")
    return tmp_path / "reports"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests of the shared signed report after every other test of this folder (a stable
    partition; the folder's tests stay together), so that its rows are made once, when the first of
    them starts, and are gone, rolled back, before any test outside them runs."""
    folder = Path(__file__).parent
    mine = [index for index, item in enumerate(items) if folder in item.path.parents]
    if not mine:
        return
    block = [items[index] for index in mine]
    ordered = [item for item in block if SHARED not in _fixturenames(item)] + [
        item for item in block if SHARED in _fixturenames(item)
    ]
    for index, item in zip(mine, ordered, strict=True):
        items[index] = item


def _fixturenames(item: pytest.Item) -> list[str]:
    return list(getattr(item, "fixturenames", ()))


@dataclass(frozen=True)
class ReportWorld:
    dave: User
    fay: User
    audit: PredictionAudit
    dataset_version: DatasetVersion
    signed: SignedReport
    reports: Path  # the report store its revisions are in


@pytest.fixture(scope="package")
def report_world(
    django_db_setup: None,
    django_db_blocker: DjangoDbBlocker,
    tmp_path_factory: pytest.TempPathFactory,
    key_pool: KeyPool,
) -> Iterator[ReportWorld]:
    """A report certified by the organisation and signed by both committee members, with the rows
    around it: built once (rendering and signing take seconds), rolled back after the last test of
    this folder; what a test changes is rolled back after it. Its keys are its own, not the pool's
    (a test's rotation must get a key the report was not signed with)."""
    base = tmp_path_factory.mktemp("signed-report")
    with rows_shared_by_tests(django_db_blocker, base):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(signing, "KEY_SIZE", 2048)
            patch.setattr(signing, "new_private_key", key_pool.make)
            dave, fay = _dave(), _fay()
            audit: PredictionAudit = PredictionAuditFactory.create()
            version: DatasetVersion = DatasetVersionFactory.create()
            signed = _signed(audit, version, dave, fay)
        yield ReportWorld(
            dave=dave, fay=fay, audit=audit, dataset_version=version, signed=signed, reports=base / "reports"
        )


def _shares_the_report(request: pytest.FixtureRequest) -> ReportWorld | None:
    if SHARED not in request.fixturenames:
        return None
    world: ReportWorld = request.getfixturevalue("report_world")
    return world


def _dave() -> User:
    return make_user("dave", [Role.ETHICS_COMMITTEE])


def _fay() -> User:
    user = make_user("fay", [Role.ETHICS_COMMITTEE])
    user.first_name, user.last_name = "Fay", "Okafor"
    user.save(update_fields=["first_name", "last_name"])
    return user


def _signed(audit: PredictionAudit, version: DatasetVersion, dave: User, fay: User) -> SignedReport:
    report = services.report_generate(context=decided_context(audit, version, [dave, fay]))
    first = report.revisions.get()
    second = services.report_sign_member(report=report, member=dave, password=PASSWORD)
    third = services.report_sign_member(report=report, member=fay, password=PASSWORD)
    return SignedReport(report=report, revisions=[first, second, third])


@pytest.fixture
def member_dave(request: pytest.FixtureRequest, db: None) -> User:
    world = _shares_the_report(request)
    return world.dave if world is not None else _dave()


@pytest.fixture
def member_fay(request: pytest.FixtureRequest, db: None) -> User:
    world = _shares_the_report(request)
    return world.fay if world is not None else _fay()


@pytest.fixture
def audit(request: pytest.FixtureRequest, db: None) -> PredictionAudit:
    world = _shares_the_report(request)
    if world is not None:
        return world.audit
    request.getfixturevalue("dataset_storage")
    audit: PredictionAudit = PredictionAuditFactory.create()
    return audit


@pytest.fixture
def dataset_version(request: pytest.FixtureRequest, db: None) -> DatasetVersion:
    world = _shares_the_report(request)
    if world is not None:
        return world.dataset_version
    request.getfixturevalue("dataset_storage")
    version: DatasetVersion = DatasetVersionFactory.create()
    return version


@pytest.fixture
def signed_report(report_world: ReportWorld, db: None) -> SignedReport:
    """The signed report built once for this folder (``report_world``), with ``member_dave``,
    ``member_fay``, ``audit`` and ``dataset_version`` its own; a copy of its files in this test's store."""
    return report_world.signed


@pytest.fixture
def signed_report_committed(
    transactional_db: None, dataset_storage: Path, member_dave: User, member_fay: User
) -> SignedReport:
    """A signed report of the test's own, for a transactional test (a subprocess reads it)."""
    audit: PredictionAudit = PredictionAuditFactory.create()
    version: DatasetVersion = DatasetVersionFactory.create()
    return _signed(audit, version, member_dave, member_fay)
