"""The PostgreSQL run leaves out only tests that open no database (tests/db_independent.py)."""

from __future__ import annotations

import pytest

from tests.db_independent import ENV, database_only, uses_database


def test_a_test_that_asks_for_no_database_is_independent(request: pytest.FixtureRequest) -> None:
    assert not uses_database(request.node)


def test_a_test_with_the_db_fixture_uses_the_database(db: None, request: pytest.FixtureRequest) -> None:
    assert uses_database(request.node)


@pytest.mark.django_db
def test_the_django_db_mark_counts(request: pytest.FixtureRequest) -> None:
    assert uses_database(request.node)


@pytest.mark.uses_database
def test_the_explicit_mark_counts(request: pytest.FixtureRequest) -> None:
    assert uses_database(request.node)


@pytest.mark.parametrize(("raw", "expected"), [("", False), ("0", False), ("1", True), ("true", True), ("no", False)])
def test_the_switch_reads_yes_and_no(monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool) -> None:
    monkeypatch.setenv(ENV, raw)
    assert database_only() is expected


def test_a_misspelt_switch_stops_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "postgres")
    with pytest.raises(pytest.UsageError, match=ENV):
        database_only()
