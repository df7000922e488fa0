from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import Role, User
from auditportal.celery import app as celery_app
from auditportal.reports import signing
from tests import time_limit, xdist_groups
from tests.browser.conftest import NO_CHROMIUM, chromium_path, require_system_tool
from tests.database import flush_past_the_truncate_trigger
from tests.database_template import django_db_setup as django_db_setup  # migrated once, copied
from tests.database_template import pytest_sessionfinish as pytest_sessionfinish  # the xdist controller
from tests.database_template import pytest_sessionstart as pytest_sessionstart  # migrates the template
from tests.database_template import pytest_terminal_summary as pytest_terminal_summary  # while workers start
from tests.db_independent import pytest_collection_modifyitems as pytest_collection_modifyitems
from tests.db_independent import pytest_fixture_setup as pytest_fixture_setup
from tests.db_independent import pytest_runtest_call as pytest_runtest_call
from tests.factories import make_user
from tests.keys import KeyPool
from tests.time_limit import pytest_runtest_makereport as pytest_runtest_makereport


def pytest_configure(config: pytest.Config) -> None:
    time_limit.pytest_configure(config)  # the speed check's
    config.pluginmanager.register(xdist_groups, "portal-xdist-groups")  # xdist_group under pytest 9


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


@pytest.fixture(scope="session")
def session_warm_chromium() -> Iterator[Any]:
    """One warm Chromium for the figures of every test in this process that draws as a worker does (a
    worker, too, keeps one for all its reports; its page is reloaded clean after each): started by the
    first such test, closed at the end. Lent to a test by ``warm_figure_export`` only."""
    if chromium_path() is None:
        require_system_tool(NO_CHROMIUM)
    from auditportal.reports import figures

    figures.start_warm_export()
    warm = figures._warm
    assert warm is not None
    figures._warm = None  # a test that exports cold finds none
    yield warm
    warm.close()


@pytest.fixture
def warm_figure_export(session_warm_chromium: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process draws figures with a warm Chromium, as a worker process does, for this test."""
    from auditportal.reports import figures

    monkeypatch.setattr(figures, "_warm", session_warm_chromium)


@pytest.fixture(scope="session")
def proxy_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A checkpoint trained once per session (a trainer process, 5 to 10 s), read by the attributions
    tests (tests/trainer/test_attribute.py, tests/attributions/test_real.py; one xdist group, so one
    worker trains it): (its shard directory, its checkpoint folder) under one run folder, the shards'
    parent. Read only: a test copies what it changes."""
    from tests.trainer.trainer_testkit import train_on_proxy_frame

    return train_on_proxy_frame(tmp_path_factory.mktemp("proxy-checkpoint"), proxy=True)


@pytest.fixture(scope="session")
def demo_shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo rows (trainer_testkit.make_demo_frame, 4,000) as two stratified shard parts, written once."""
    from tests.trainer.trainer_testkit import make_demo_frame, stratified_assignment, write_shard_dir

    frame = make_demo_frame(4000, seed=0)
    return write_shard_dir(frame, tmp_path_factory.mktemp("demo") / "shards", stratified_assignment(frame, 2))


@pytest.fixture(scope="session")
def lambda_runs(demo_shards: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """Two trainings on ``demo_shards`` (trainer_testkit.LAMBDA_HP: without and with the fairness
    penalty; 150 batches each, about 10 s), trained once per session for the fairness test and the
    paired trials' (one xdist group, so one worker trains them): (their run folder, name -> TrainedRun).
    Read only."""
    from tests.trainer.trainer_testkit import train_lambda_runs

    root = tmp_path_factory.mktemp("lambda-runs")
    return root, train_lambda_runs(root, demo_shards)
