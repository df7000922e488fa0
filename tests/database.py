"""The test database: as a DATABASE_URL for a subprocess (a command line, a Celery worker) to open
(the subprocess sees only committed rows: tests that use it are transactional), and rows that many
tests share, made once."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.db import connection, transaction
from django.test import override_settings
from pytest_django import DjangoDbBlocker


def subprocess_database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        assert db["NAME"] != ":memory:", "a subprocess needs a database file"
        assert "mode=memory" not in str(db["NAME"]), "a subprocess needs a database file"
        return f"sqlite:///{db['NAME']}"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@contextmanager
def rows_shared_by_tests(django_db_blocker: DjangoDbBlocker, directory: Path) -> Iterator[None]:
    """For a fixture wider than one test (module, package): the rows it makes inside stay until its
    end and are rolled back then; each test's own transaction (pytest-django's ``db``) nests inside,
    so what a test changes is gone for the next. Files go under ``directory`` (stores, shards,
    uploads, runs, reports), as ``dataset_storage`` does for one test.

    Only for tests that run in a transaction (``django_db`` without ``transaction=True``): nothing is
    committed while it is open, so no subprocess or live server could see the rows.
    """
    (directory / "uploads").mkdir(parents=True, exist_ok=True)
    with (
        django_db_blocker.unblock(),
        override_settings(
            DATASET_STORAGE_DIR=directory / "store",
            SHARD_DIR=directory / "shards",
            FILE_UPLOAD_TEMP_DIR=str(directory / "uploads"),
            EXPERIMENT_RUN_DIR=directory / "runs",
            REPORT_STORAGE_DIR=directory / "reports",
        ),
    ):
        outer = transaction.atomic()
        outer._from_testcase = True  # type: ignore[attr-defined]  # as Django's TestCase marks its own
        outer.__enter__()
        try:
            yield
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


# The activity log refuses TRUNCATE on PostgreSQL (activity/0011), and the flush that ends each
# transactional test is one TRUNCATE of every table. The test database's role owns the tables, as a
# deployment's migrating role does: it lets its own flush past the trigger, in the flush's transaction.
# (A migration test may have left the trigger unapplied, hence the check that it exists.)
_TRUNCATE_TRIGGER_SQL = """
DO $$ BEGIN
    IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'activity_event_no_truncate') THEN
        ALTER TABLE activity_event {} TRIGGER activity_event_no_truncate;
    END IF;
END $$;
"""


def flush_past_the_truncate_trigger() -> None:
    """Patch PostgreSQL's flush SQL so that the test runner's flush empties the activity log too."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    original = DatabaseOperations.sql_flush
    if getattr(original, "past_truncate_trigger", False):
        return

    def sql_flush(self: DatabaseOperations, style: Any, tables: list[str], **kwargs: Any) -> list[str]:
        statements: list[str] = original(self, style, tables, **kwargs)
        if "activity_event" not in tables:
            return statements
        return [_TRUNCATE_TRIGGER_SQL.format("DISABLE"), *statements, _TRUNCATE_TRIGGER_SQL.format("ENABLE")]

    sql_flush.past_truncate_trigger = True  # type: ignore[attr-defined]
    DatabaseOperations.sql_flush = sql_flush  # type: ignore[method-assign,assignment]
