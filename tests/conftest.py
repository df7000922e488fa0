from __future__ import annotations

from pathlib import Path

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import Role, User
from tests.factories import UserFactory


@pytest.fixture
def alice(db: None) -> User:
    """Data steward."""
    return UserFactory(username="alice", roles=[Role.DATA_STEWARD])


@pytest.fixture
def bob(db: None) -> User:
    """ML engineer."""
    return UserFactory(username="bob", roles=[Role.ML_ENGINEER])


@pytest.fixture
def carol(db: None) -> User:
    """Reviewer."""
    return UserFactory(username="carol", roles=[Role.REVIEWER])


@pytest.fixture
def dave(db: None) -> User:
    """Ethics-committee member."""
    return UserFactory(username="dave", roles=[Role.ETHICS_COMMITTEE])


@pytest.fixture
def erin(db: None) -> User:
    """Administrator."""
    return UserFactory(username="erin", roles=[Role.ADMIN])


@pytest.fixture
def oscar(db: None) -> User:
    """Outsider: an account with no role."""
    return UserFactory(username="oscar", roles=[])


@pytest.fixture
def dataset_storage(settings: SettingsWrapper, tmp_path: Path) -> Path:
    """A private dataset store, shard directory and upload directory for one test."""
    settings.DATASET_STORAGE_DIR = tmp_path / "store"
    settings.SHARD_DIR = tmp_path / "shards"
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "uploads")
    (tmp_path / "uploads").mkdir()
    return tmp_path / "store"
