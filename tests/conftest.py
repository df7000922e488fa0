from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import Role, User
from auditportal.celery import app as celery_app
from auditportal.reports import signing
from tests.database import flush_past_the_truncate_trigger
from tests.database_template import django_db_setup as django_db_setup  # migrated once, copied
from tests.db_independent import pytest_collection_modifyitems as pytest_collection_modifyitems
from tests.db_independent import pytest_fixture_setup as pytest_fixture_setup
from tests.db_independent import pytest_runtest_call as pytest_runtest_call
from tests.factories import make_user
from tests.keys import KeyPool
from tests.time_limit import pytest_configure as pytest_configure  # the speed check's hooks
from tests.time_limit import pytest_runtest_makereport as pytest_runtest_makereport

flush_past_the_truncate_trigger()


@pytest.fixture(scope="session")
def key_pool() -> Iterator[KeyPool]:
    pool = KeyPool(signing.new_private_key)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(signing, "new_private_key", pool.take)
        yield pool


@pytest.fixture(autouse=True)
def keys_from_the_pool(key_pool: KeyPool) -> None:
    key_pool.restart()


@pytest.fixture(autouse=True)
def tasks_left_purged(request: pytest.FixtureRequest) -> Iterator[None]:
    """Around a test whose rows commit (a transactional test, the live server's: the tests that start
    real workers), this test process's queue is emptied. Before: tasks an earlier test queued and no
    worker ran (a test in a rolled-back transaction that ran its on-commit callbacks queues a decision's
    mails, a breach's incident mail) would reach this test's workers and fail on rows that never
    committed. After: the tasks it queued that no worker ran are not left for a later test's worker. An
    autouse fixture is torn down last, after the test's workers have stopped."""
    commits = bool({"transactional_db", "live_server"} & set(request.fixturenames))
    if commits:
        _queue_purge()
    yield
    if commits:
        _queue_purge()


def _queue_purge() -> None:
    with celery_app.connection_for_write() as connection:
        connection.default_channel.queue_purge(celery_app.conf.task_default_queue)


@pytest.fixture
def alice(db: None) -> User:
    """Data steward."""
    return make_user("alice", [Role.DATA_STEWARD])


@pytest.fixture
def bob(db: None) -> User:
    """ML engineer."""
    return make_user("bob", [Role.ML_ENGINEER])


@pytest.fixture
def carol(db: None) -> User:
    """Reviewer."""
    return make_user("carol", [Role.REVIEWER])


@pytest.fixture
def dave(db: None) -> User:
    """Ethics-committee member."""
    return make_user("dave", [Role.ETHICS_COMMITTEE])


@pytest.fixture
def erin(db: None) -> User:
    """Administrator."""
    return make_user("erin", [Role.ADMIN])


@pytest.fixture
def oscar(db: None) -> User:
    """Outsider: an account with no role."""
    return make_user("oscar", [])


@pytest.fixture
def dataset_storage(settings: SettingsWrapper, tmp_path: Path) -> Path:
    """A private dataset store, shard directory and upload directory for one test."""
    settings.DATASET_STORAGE_DIR = tmp_path / "store"
    settings.SHARD_DIR = tmp_path / "shards"
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "uploads")
    (tmp_path / "uploads").mkdir()
    return tmp_path / "store"
