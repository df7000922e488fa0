"""Which tests do not depend on the database and broker the suite runs against.

CI runs the whole suite twice: on the embedded default (SQLite, the filesystem broker) and on
PostgreSQL + Redis. A test that opens no test database cannot answer differently on the second run:
pytest-django refuses database access to a test that did not ask for it, so its result depends on the
code alone. ``PORTAL_TESTS_DATABASE_ONLY=1`` (set by .ci/run for the PostgreSQL run) leaves those tests
out of that run; they ran on the first. A test asks for a database through the ``django_db`` mark or a
fixture built on ``django_db_setup`` (``db``, ``transactional_db``, ``live_server`` and every fixture
that uses them), which is what this module checks. A test that reaches the database or the broker in
another way (a subprocess given the settings' ``DATABASE_URL`` or broker, say) carries
``@pytest.mark.uses_database`` so that it runs on both.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

ENV = "PORTAL_TESTS_DATABASE_ONLY"


def uses_database(item: pytest.Item) -> bool:
    """Whether ``item`` opens the test database (or says it reaches the database or broker otherwise)."""
    if item.get_closest_marker("django_db") or item.get_closest_marker("uses_database"):
        return True
    return "django_db_setup" in getattr(item, "fixturenames", ())


def database_only() -> bool:
    raw = os.environ.get(ENV, "").strip().lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise pytest.UsageError(f"{ENV}={raw!r}: say 1 (leave out the tests that open no database) or 0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not database_only():
        return
    kept: list[pytest.Item] = []
    left: list[pytest.Item] = []
    for item in items:
        (kept if uses_database(item) else left).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


UNDECLARED = pytest.StashKey[bool]()


def pytest_fixture_setup(fixturedef: pytest.FixtureDef[object], request: pytest.FixtureRequest) -> None:
    """Notes a test that opens the database without the mark or a database fixture in its signature
    (``request.getfixturevalue("db")``, or a fixture fetched that way): ``pytest_runtest_call`` below
    fails it, on SQLite too, rather than the PostgreSQL run leaving it out unseen."""
    item = request.node
    if fixturedef.argname == "_django_db_helper" and isinstance(item, pytest.Item) and not uses_database(item):
        item.stash[UNDECLARED] = True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    result = yield
    if item.stash.get(UNDECLARED, False):
        pytest.fail(
            f"{item.nodeid} opens the test database through a fixture it fetched at run time; mark it "
            "@pytest.mark.django_db so that the PostgreSQL run keeps it (tests/db_independent.py)",
            pytrace=False,
        )
    return result
