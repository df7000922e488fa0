from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from auditportal.accounts.cli import CLI_USERNAME
from auditportal.accounts.models import User
from auditportal.activity.models import Event
from auditportal.datasets.models import DatasetVersion
from tests.database_template import sqlite_template_copy

ROOT = Path(__file__).resolve().parents[2]


def _register(*args: str) -> str:
    out = StringIO()
    call_command("register_dataset", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_register_dataset_prints_the_new_version_id_last(small_csv: Path, dataset_storage: Path) -> None:
    output = _register(
        str(small_csv), "--name", "loans", "--label", "approved", "--positive", "1",
        "--attribute", "gender", "--attribute", "age_group",
    )  # fmt: skip
    version = DatasetVersion.objects.get()
    assert output.splitlines()[-1] == str(version.pk)
    assert "gender: 2 groups, 2 unknown" in output
    assert version.created_by.username == CLI_USERNAME
    assert not version.created_by.has_usable_password()
    assert Event.objects.get(verb="dataset_version.registered").actor == version.created_by


@pytest.mark.django_db
def test_register_dataset_honours_custom_unknown_tokens_and_features(small_csv: Path, dataset_storage: Path) -> None:
    _register(
        str(small_csv), "--name", "loans", "--label", "approved", "--positive", "1",
        "--attribute", "gender", "--unknown-token", "n/a", "--features", "income",
    )  # fmt: skip
    version = DatasetVersion.objects.get()
    assert [f["name"] for f in version.features] == ["income"]
    # "unknown" is no longer a declared token, so it becomes a group of its own; empty stays unknown.
    gender = version.attributes.get()
    assert gender.groups == ["female", "male", "unknown"]
    assert gender.unknown_count == 1


@pytest.mark.django_db
def test_register_dataset_refuses_a_user_without_the_steward_role(
    small_csv: Path, dataset_storage: Path, bob: User
) -> None:
    with pytest.raises(CommandError, match="--user 'bob' does not hold the data steward role"):
        _register(
            str(small_csv), "--name", "x", "--label", "approved", "--positive", "1", "--attribute", "gender",
            "--user", "bob",
        )  # fmt: skip
    assert not DatasetVersion.objects.exists()


@pytest.mark.django_db
def test_register_dataset_names_a_missing_column(small_csv: Path, dataset_storage: Path) -> None:
    with pytest.raises(CommandError, match=r"loans\.csv.*'race'"):
        _register(str(small_csv), "--name", "x", "--label", "approved", "--positive", "1", "--attribute", "race")
    assert not DatasetVersion.objects.exists()


@pytest.mark.slow  # a subprocess that starts the portal (and migrates a database of its own, 10 s, without a template)
def test_register_dataset_exits_non_zero_with_the_message_on_stderr(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("a;b;c\n1;2;3\n", encoding="utf-8")
    # The subprocess gets a database of its own: it must never migrate or write the real one.
    database = tmp_path / "cli.sqlite3"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "auditportal.settings.test",
        "PORTAL_VAR_DIR": str(tmp_path / "var"),
        "DATABASE_URL": f"sqlite:///{database}",
    }
    # A copy of the migrated template the test databases are copied from (tests/database_template.py),
    # or, where there is none, what manage.py migrate makes.
    if not sqlite_template_copy(database):
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=120)
    result = subprocess.run(
        [sys.executable, "manage.py", "register_dataset", str(bad), "--name", "bad", "--label", "a",
         "--positive", "1", "--attribute", "b"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "bad.csv" in result.stderr
    assert ";" in result.stderr
    store = tmp_path / "var" / "datasets"
    assert [p for p in store.rglob("*") if p.is_file()] == []


@pytest.mark.django_db
def test_register_dataset_names_the_option_of_a_disallowed_name(small_csv: Path, dataset_storage: Path) -> None:
    with pytest.raises(CommandError, match=r"^--name: Dataset name '\.\./x' is not allowed"):
        _register(str(small_csv), "--name", "../x", "--label", "approved", "--positive", "1", "--attribute", "gender")
    assert not DatasetVersion.objects.exists()
