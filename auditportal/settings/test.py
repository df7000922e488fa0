"""Test settings: the production settings with a throw-away key and var directory."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("SECRET_KEY", "test-secret-key-not-for-production")
os.environ.setdefault("REPORT_KEY_PASSPHRASE", "test-report-key-passphrase-not-for-production")
os.environ.setdefault("PORTAL_VAR_DIR", tempfile.mkdtemp(prefix="auditportal-test-var-"))
# Each xdist worker writes under its own folder of it: pytest's controller sets the variable first and
# its workers inherit it, so otherwise two workers' tests wrote datasets, uploads and runs side by side
# (a test that checks nothing was written saw the other worker's files). Split once per worker: the
# processes a test starts (manage.py, Celery workers) inherit the worker's folder as it is.
if (_worker := os.environ.get("PYTEST_XDIST_WORKER", "")) and _worker != os.environ.get("PORTAL_TEST_VAR_SPLIT", ""):
    os.environ["PORTAL_VAR_DIR"] = os.path.join(os.environ["PORTAL_VAR_DIR"], _worker)
    os.makedirs(os.environ["PORTAL_VAR_DIR"], exist_ok=True)
    os.environ["PORTAL_TEST_VAR_SPLIT"] = _worker
# The test client and the browser tests' live server speak plain HTTP (tests/test_security.py checks
# the production defaults).
os.environ.setdefault("SECURE_SSL_REDIRECT", "false")
os.environ.setdefault("SECURE_COOKIES", "false")
# The verification throttle counts in the process's cache, across tests: tests/reports/test_bounds.py
# sets a low rate for its own test.
os.environ.setdefault("REPORT_VERIFY_PER_HOUR", "100000")
# The local backend runs one trainer at a time unless a test asks for more, whatever the machine's
# cores (its default): trials then start in a known order.
os.environ.setdefault("EXPERIMENT_LOCAL_CONCURRENCY", "1")
# A trial's runner looks for a stop request every 50 ms, not every half second: the tests that cancel a
# trial or stop it early (ASHA) wait for it.
os.environ.setdefault("EXPERIMENT_RUNNER_CHECK_SECONDS", "0.05")

from auditportal.settings.base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# WhiteNoise warns about a missing STATIC_ROOT; tests serve static files through the finders.
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # noqa: F405

# End-to-end tests start a real Celery worker that must open the test database: an in-memory
# SQLite database cannot be shared between processes, so the test database is a file in this run's
# private var directory (PostgreSQL needs nothing: the worker connects to test_<name>).
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}  # noqa: F405
    # A throw-away database need not survive a power cut: without waiting for the disk at each commit
    # (SQLite's default is to fsync every transaction), migrating a test database takes 17 s instead of
    # 30 s here, and the suite's transactional tests commit thousands of times. A process that dies
    # still leaves a consistent file (only the operating system's crash could lose the last commits).
    DATABASES["default"]["OPTIONS"]["init_command"] = "PRAGMA synchronous=OFF;"  # noqa: F405
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":  # noqa: F405
    # The same on PostgreSQL: a commit returns before its WAL reaches the disk (the server's own crash
    # safety is unchanged; only the last commits of a crash could be lost, from a database thrown away).
    DATABASES["default"].setdefault("OPTIONS", {})["options"] = "-c synchronous_commit=off"  # noqa: F405

# A task only the tests queue (tests/outbox/tasks.py), registered in the real worker the end-to-end
# tests start with these settings.
CELERY_IMPORTS = ("tests.outbox.tasks",)

# Under pytest-xdist (`make test`) the worker processes share the broker (the var directory above is
# made once and inherited; on Redis, one database): each queues its tasks on a queue of its own, which
# the real Celery worker it starts (tests/worker.py, same environment) consumes, so one test process's
# worker never takes another's tasks, whose rows are in another test database.
if os.environ.get("PYTEST_XDIST_WORKER"):
    CELERY_TASK_DEFAULT_QUEUE = f"celery-{os.environ['PYTEST_XDIST_WORKER']}"
