"""Files the portal writes are its account's alone: 0600 files, 0700 directories (issue 18).

One umask set by the settings (auditportal/lib/files.py) covers every writer; these tests stat what
each kind of writer leaves on disk."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.datasets import services as dataset_services
from auditportal.datasets.models import DatasetVersion, StagedUpload
from auditportal.fairness.files import sharding
from auditportal.lib.files import private_dir, write_private_text
from auditportal.reports import services as report_services
from tests.datasets.conftest import SMALL_CSV
from tests.factories import DatasetVersionFactory, client_for


def mode(path: Path | str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def assert_private_tree(root: Path) -> int:
    """Every directory under (and including) ``root`` is 0700 and every file 0600; returns the file count."""
    assert mode(root) == 0o700, root
    files = 0
    for path in root.rglob("*"):
        if path.is_dir():
            assert mode(path) == 0o700, path
        else:
            assert mode(path) == 0o600, path
            files += 1
    return files


@pytest.fixture
def version(alice: User, dataset_storage: Path) -> DatasetVersion:
    return DatasetVersionFactory.create(created_by=alice, name="loans")


def test_a_registered_dataset_file_and_its_folders_are_private(version: DatasetVersion, dataset_storage: Path) -> None:
    assert mode(version.path) == 0o600
    assert mode(version.path.parent) == 0o700
    assert assert_private_tree(dataset_storage) == 1


def test_a_registered_file_is_private_even_when_its_source_was_not(
    alice: User, dataset_storage: Path, tmp_path: Path
) -> None:
    source = tmp_path / "open.csv"
    source.write_text(SMALL_CSV, encoding="utf-8")
    source.chmod(0o644)
    registered = dataset_services.dataset_version_register(
        user=alice,
        source=source,
        original_name="loans.csv",
        name="loans",
        spec=DatasetVersionFactory.spec,
    )
    assert mode(registered.path) == 0o600


def test_a_staged_upload_is_kept_private(alice: User, dataset_storage: Path) -> None:
    upload = SimpleUploadedFile("loans.csv", SMALL_CSV.encode(), content_type="text/csv")
    response = client_for(alice).post(reverse("datasets:upload"), {"name": "loans", "file": upload})
    assert response.status_code == 302, response.content.decode()
    staged = StagedUpload.objects.get()
    assert mode(staged.path) == 0o600
    assert assert_private_tree(dataset_storage) == 1


def test_shards_and_their_manifest_are_private_and_the_trainer_still_reads_them(
    version: DatasetVersion, settings: SettingsWrapper
) -> None:
    out_dir, manifest = dataset_services.dataset_version_shard(version=version, parts=2)
    assert (out_dir / sharding.MANIFEST_NAME).is_file()
    assert assert_private_tree(Path(settings.SHARD_DIR)) >= 5  # the manifest, two parts' data and metadata
    # The local trainer runs as the portal's account, in its own process.
    read = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from trainer.data import load_shards; print(len(load_shards(sys.argv[1])[1]))",
            str(out_dir),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=settings.BASE_DIR,
    )
    assert read.returncode == 0, read.stderr
    assert read.stdout.strip() == str(manifest["num_examples"]) == "8"


@pytest.mark.skipif(connection.vendor != "sqlite", reason="the SQLite database file exists on SQLite only")
@pytest.mark.django_db
def test_the_sqlite_database_file_is_private() -> None:
    path = Path(str(connection.settings_dict["NAME"]))
    assert path.is_file(), path
    assert mode(path) == 0o600


def test_the_var_directory_and_the_upload_folder_are_private() -> None:
    assert mode(settings.VAR_DIR) == 0o700
    assert mode(settings.FILE_UPLOAD_TEMP_DIR) == 0o700
    assert settings.FILE_UPLOAD_PERMISSIONS == 0o600


def test_private_dir_tightens_a_folder_made_before(tmp_path: Path) -> None:
    loose = tmp_path / "var"
    loose.mkdir()
    loose.chmod(0o755)
    private_dir(loose / "datasets")
    private_dir(loose)
    assert (mode(loose), mode(loose / "datasets")) == (0o700, 0o700)


def test_the_demo_password_file_is_private_even_if_it_existed_readable(
    db: None, settings: SettingsWrapper, tmp_path: Path
) -> None:
    settings.DEBUG = True
    path = tmp_path / "demo-users.txt"
    path.write_text("old\n")
    path.chmod(0o644)
    call_command("seed_demo", password="correct horse battery", password_file=path, stdout=io.StringIO())
    assert mode(path) == 0o600
    text = path.read_text()
    assert "steward" in text
    assert "correct horse battery" in text


def test_write_private_text_ignores_a_loose_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_private_text(tmp_path / "secret.txt", "x")
    finally:
        os.umask(old)
    assert mode(tmp_path / "secret.txt") == 0o600


def test_a_stored_report_file_is_read_only_to_the_portal_alone(settings: SettingsWrapper, tmp_path: Path) -> None:
    settings.REPORT_STORAGE_DIR = tmp_path / "reports"
    file_name, _ = report_services._store(b"%PDF-1.7 not a real report\n")
    assert mode(tmp_path / "reports" / file_name) == 0o400
    assert assert_private_tree_dirs(tmp_path / "reports")


def assert_private_tree_dirs(root: Path) -> bool:
    return all(mode(path) == 0o700 for path in [root, *root.rglob("*")] if path.is_dir())
