"""The test database, migrated once and copied for each test process.

pytest-django's ``django_db_setup`` made each test process's database by running every migration
(11-15 s of CPU on SQLite, a little less on PostgreSQL), once per xdist worker and once per run. Here
the first process to need it migrates a template database, and every process (this run's other
workers, later runs) copies it: a file copy on SQLite, ``CREATE DATABASE ... TEMPLATE`` on PostgreSQL
(the template's tables, rows, triggers and grants come along; roles are the server's, not a
database's). Then Django's own setup runs on the copy as with ``--reuse-db``: ``migrate`` finds every
migration applied (it would apply one that was not) and sends ``post_migrate`` as always.

The template is kept between runs under a name made from everything that decides what migrating
writes (``template_key``): the portal's source (migrations, models, the ``post_migrate`` handlers),
the installed packages (Django's and the other apps' migrations), the settings the migrations and the
handlers read, the database server, and the local date (migrating seeds fairness policy version 1 and
its event, dated; a test that searches the log up to yesterday expects nothing from before today). A
change to any of them makes a new template; the old ones are removed then. ``--create-db`` rebuilds it
anyway. SQLite's template lives under ``var/test-db/`` (``make clean`` removes it), PostgreSQL's is a
database next to the test databases (``test_<name>_tpl_<key>``).

``--reuse-db`` keeps its meaning: a test database that exists is used as it is and kept.

Under xdist the controller makes the template in a thread while its workers start and collect
(``_BuildAhead``), so that the first worker to need it does not build it from scratch while the
other waits on the lock; the workers take the lock as before, and build it if it is still missing.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import os
import shutil
import sys
import threading
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import pytest
from django.conf import settings
from django.db import connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.test.utils import setup_databases, teardown_databases
from django.utils import timezone
from pytest_django import DjangoDbBlocker
from pytest_django.fixtures import _disable_migrations, _get_databases_for_setup
from pytest_django.plugin import blocking_manager_key

ROOT = Path(__file__).resolve().parents[1]
SQLITE_TEMPLATES = ROOT / "var" / "test-db"
# What a migration or a post_migrate handler reads (grep settings in */migrations, */apps.py).
SETTINGS_IN_THE_KEY = (
    "AUTH_USER_MODEL",
    "DEFAULT_AUTO_FIELD",
    "FAIRNESS_ALPHA",
    "FAIRNESS_TOLERANCE",
    "INSTALLED_APPS",
    "TIME_ZONE",
    "USE_TZ",
)
# PostgreSQL: one lock for every template of the server (building one, removing the old ones, copying).
_ADVISORY_LOCK = 0x7465_7374_5F74_706C  # "test_tpl"


def template_key() -> str:
    digest = hashlib.sha256()
    for path in sorted((ROOT / "auditportal").rglob("*.py")):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    packages = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions())
    database = connection.settings_dict
    parts = [
        sys.version,
        *packages,
        *(f"{name}={getattr(settings, name)!r}" for name in SETTINGS_IN_THE_KEY),
        *(f"{name}={database.get(name)!r}" for name in ("ENGINE", "HOST", "PORT", "USER", "OPTIONS")),
        f"TEST={ {k: v for k, v in database.get('TEST', {}).items() if k != 'NAME'}!r}",
        timezone.localdate().isoformat(),
    ]
    digest.update("\n".join(parts).encode())
    return digest.hexdigest()[:16]


@pytest.fixture(scope="session")
def django_db_setup(
    request: pytest.FixtureRequest,
    django_test_environment: None,
    django_db_blocker: DjangoDbBlocker,
    django_db_use_migrations: bool,
    django_db_keepdb: bool,
    django_db_createdb: bool,
    django_db_modify_db_settings: None,  # the xdist suffix, before the names are read
) -> Generator[None, None, None]:
    """pytest-django's fixture of that name, with the default database copied from the template."""
    verbosity = request.config.option.verbose
    aliases, serialized_aliases = _get_databases_for_setup(request.session.items)
    with django_db_blocker.unblock():
        keepdb = django_db_keepdb and not django_db_createdb
        if not django_db_use_migrations:
            _disable_migrations()  # --nomigrations: as pytest-django, no template
        elif connection.alias in aliases:
            if not (keepdb and _exists(connection, _test_db_name(connection))):
                _ensure_template(connection, rebuild=django_db_createdb, copy_to=_test_db_name(connection))
            keepdb = True  # the copy is the test database: Django's setup only checks it is migrated
        db_cfg = setup_databases(
            verbosity=verbosity,
            interactive=False,
            aliases=cast(Any, aliases),  # a set of aliases, as pytest-django passes it (the stubs say a mapping)
            serialized_aliases=serialized_aliases,
            keepdb=keepdb,
        )
    yield
    if not django_db_keepdb:
        with django_db_blocker.unblock():
            try:
                teardown_databases(db_cfg, verbosity=verbosity)
            except Exception as exc:  # as pytest-django: a warning, not a failed run
                request.node.warn(pytest.PytestWarning(f"Error when trying to teardown test databases: {exc!r}"))


class _BuildAhead:
    """The controller of an xdist run (``make test``) makes the template in a thread from its session's
    start, while its workers start and collect (2-4 s of CPU each for a few modules, 10 s or more for
    the whole suite): the first worker to need the template waits for the rest of that build, the
    others copy it after, as when a worker builds it. Where the template exists, the thread only finds
    it (``template_key``, a fraction of a second). The workers still take the lock and build it
    themselves where it is missing (the thread failed, or the date changed meanwhile)."""

    def __init__(self, blocker: DjangoDbBlocker) -> None:
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._build, args=(blocker,), name="test-db-template", daemon=True)

    def _build(self, blocker: DjangoDbBlocker) -> None:
        try:
            with blocker.unblock():  # the controller runs no test: nothing else opens the database here
                _ensure_template(connection, rebuild=False, copy_to=None)
        except BaseException as exc:  # said at the run's end; a worker that needs the template builds it
            self.failure = exc
        finally:
            connections.close_all()  # this thread's


_AHEAD = pytest.StashKey[_BuildAhead]()


def _builds_ahead(config: pytest.Config) -> bool:
    option = config.option
    return (
        config.pluginmanager.get_plugin("dsession") is not None  # the controller of an xdist run
        and blocking_manager_key in config.stash  # pytest-django configured Django
        and not option.collectonly
        and not getattr(option, "nomigrations", False)  # no template
        and not getattr(option, "create_db", False)  # each worker rebuilds it, as before
        and not getattr(option, "reuse_db", False)  # the workers' databases may all exist: no copy
        and connection.vendor in ("sqlite", "postgresql")
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if _builds_ahead(config):
        ahead = config.stash[_AHEAD] = _BuildAhead(config.stash[blocking_manager_key])
        ahead.thread.start()  # before xdist starts the workers (its own hook runs last)


def pytest_sessionfinish(session: pytest.Session) -> None:
    ahead = session.config.stash.get(_AHEAD, None)
    if ahead is not None:
        ahead.thread.join()  # a run that needed no database does not leave a half-made template


def pytest_terminal_summary(terminalreporter: Any) -> None:
    ahead = terminalreporter.config.stash.get(_AHEAD, None)
    if ahead is not None and ahead.failure is not None:
        terminalreporter.write_line(
            f"tests/database_template.py: the controller could not make the test database template "
            f"({ahead.failure!r}); the workers that needed it made it",
            yellow=True,
        )


def _ensure_template(db: BaseDatabaseWrapper, *, rebuild: bool, copy_to: str | None) -> None:
    """Makes the template unless it exists (or ``rebuild``), then copies it to the database ``copy_to``
    if one is named: all under the lock that one template's builders and copiers share."""
    key = template_key()
    if db.vendor == "sqlite":
        SQLITE_TEMPLATES.mkdir(parents=True, exist_ok=True)
        template = SQLITE_TEMPLATES / f"{key}.sqlite3"
        with _file_lock(SQLITE_TEMPLATES / ".lock"):
            if rebuild or not template.exists():
                building = SQLITE_TEMPLATES / f"{key}.sqlite3.building-{os.getpid()}"
                _migrate_into(db, str(building))
                os.replace(building, template)
                for old in SQLITE_TEMPLATES.glob("*.sqlite3*"):
                    if old != template:
                        old.unlink(missing_ok=True)
            if copy_to is not None:
                copying = f"{copy_to}.copying"
                shutil.copyfile(template, copying)
                os.replace(copying, copy_to)
    elif db.vendor == "postgresql":
        base = str(db.settings_dict["NAME"])[:30]
        prefix = f"test_{base}_tpl_"
        template_name = f"{prefix}{key}"
        quote = db.ops.quote_name
        with _advisory_lock(db) as cursor:
            cursor.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", [prefix.replace("_", r"\_") + "%"])
            present = {name for (name,) in cursor.fetchall()}
            if rebuild or template_name not in present:
                building_name = f"{template_name}_building"
                _migrate_into(db, building_name)
                if template_name in present:
                    cursor.execute(f"DROP DATABASE {quote(template_name)}")
                cursor.execute(f"ALTER DATABASE {quote(building_name)} RENAME TO {quote(template_name)}")
                for old in present - {template_name}:
                    cursor.execute(f"DROP DATABASE IF EXISTS {quote(old)}")
            if copy_to is not None:
                cursor.execute(f"DROP DATABASE IF EXISTS {quote(copy_to)}")
                cursor.execute(f"CREATE DATABASE {quote(copy_to)} TEMPLATE {quote(template_name)}")
    else:
        raise NotImplementedError(f"no template copy for {db.vendor}: add one to tests/database_template.py")


def sqlite_template_copy(target: Path) -> bool:
    """Copies the kept SQLite template to ``target`` (a database that ``manage.py migrate`` would have
    made with these settings) and says so; False when this run is not on SQLite or has no template yet."""
    if connection.vendor != "sqlite":
        return False
    with _file_lock(SQLITE_TEMPLATES / ".lock") if SQLITE_TEMPLATES.exists() else _no_lock():
        template = SQLITE_TEMPLATES / f"{template_key()}.sqlite3"
        if not template.exists():
            return False
        shutil.copyfile(template, target)
    return True


@contextmanager
def _no_lock() -> Iterator[None]:
    yield


def _migrate_into(db: BaseDatabaseWrapper, name: str) -> None:
    """Creates and migrates the database ``name`` as Django makes a test database, then leaves the
    connection's settings as they were (``create_test_db`` points them at what it made)."""
    saved = db.settings_dict["NAME"], settings.DATABASES[db.alias]["NAME"], db.settings_dict["TEST"].get("NAME")
    db.settings_dict["TEST"]["NAME"] = name
    try:
        db.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False, keepdb=False)
    finally:
        db.close()
        db.settings_dict["NAME"], settings.DATABASES[db.alias]["NAME"], db.settings_dict["TEST"]["NAME"] = saved


def _test_db_name(db: BaseDatabaseWrapper) -> str:
    return str(cast(Any, db.creation)._get_test_db_name())


def _exists(db: BaseDatabaseWrapper, name: str) -> bool:
    if db.vendor == "sqlite":
        return Path(name).exists()
    with db._nodb_cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        return cursor.fetchone() is not None


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def _advisory_lock(db: BaseDatabaseWrapper) -> Iterator[Any]:
    with db._nodb_cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [_ADVISORY_LOCK])
        try:
            yield cursor
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [_ADVISORY_LOCK])
