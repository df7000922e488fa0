from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.cli import CLI_USERNAME
from auditportal.accounts.models import Role, User
from auditportal.activity.models import Event, Verb
from auditportal.datasets.models import DatasetVersion
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def _call(*args: str) -> list[str]:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue().splitlines()


def test_make_demo_dataset_registers_it_and_prints_the_id_last(dataset_storage: Path) -> None:
    lines = _call("make_demo_dataset", "--rows", "3000")
    version = DatasetVersion.objects.get()
    assert lines[-1] == str(version.pk)
    assert lines[0] == f"Registered {version}: 3,000 rows, {version.positives:,} positive"
    assert (version.num_rows, version.label_column) == (3000, "repaid")
    gender = version.attributes.get(name="gender")
    assert set(gender.groups) == {"female", "male", "nonbinary"}
    assert 0.05 < gender.unknown_count / 3000 < 0.11
    assert version.attributes.get(name="age_group").unknown_count == 0


def test_make_demo_dataset_if_missing_reuses_the_existing_version(dataset_storage: Path) -> None:
    first = _call("make_demo_dataset", "--rows", "500")[-1]
    again = _call("make_demo_dataset", "--rows", "500", "--if-missing")[-1]
    assert first == again
    assert DatasetVersion.objects.count() == 1


def test_shard_dataset_writes_balanced_parts_that_check_clean(dataset_storage: Path, tmp_path: Path) -> None:
    version_id = _call("make_demo_dataset", "--rows", "4000")[-1]
    out = tmp_path / "parts"
    lines = _call("shard_dataset", version_id, "--parts", "3", "--out", str(out))
    assert lines[-1] == str(out)
    assert lines[-2].startswith("Wrote 3 parts of ")  # not "3 part(s)"
    assert lines[-2].endswith(" (4,000 rows)")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["parts"] == 3
    total = 0
    for part_dir in manifest["part_dirs"]:
        meta = json.loads((out / part_dir / "metadata.json").read_text())
        rows = pq.read_metadata(out / part_dir / "data.parquet").num_rows
        assert meta["num_examples"] == rows
        total += rows
    assert total == 4000
    assert _call("shard_dataset", version_id, "--parts", "3", "--out", str(out), "--check")[-1].endswith(
        "all parts consistent and balanced"
    )


def test_shard_dataset_check_fails_on_a_tampered_part(dataset_storage: Path, tmp_path: Path) -> None:
    version_id = _call("make_demo_dataset", "--rows", "2000")[-1]
    out = tmp_path / "parts"
    _call("shard_dataset", version_id, "--parts", "2", "--out", str(out))
    meta_path = out / "part-00001" / "metadata.json"
    meta = json.loads(meta_path.read_text())
    meta["num_examples"] += 5
    meta_path.write_text(json.dumps(meta))
    err = StringIO()
    with pytest.raises(CommandError, match=r"^[0-9,]+ problems? in "):
        call_command("shard_dataset", version_id, "--parts", "2", "--out", str(out), "--check", stderr=err)
    assert f"part-00001: metadata.json says num_examples={meta['num_examples']}" in err.getvalue()


def test_shard_dataset_refuses_to_overwrite_without_the_flag(dataset_storage: Path, tmp_path: Path) -> None:
    version_id = _call("make_demo_dataset", "--rows", "1000")[-1]
    out = tmp_path / "parts"
    _call("shard_dataset", version_id, "--parts", "2", "--out", str(out))
    with pytest.raises(CommandError, match="already exists and is not empty; pass --overwrite"):
        _call("shard_dataset", version_id, "--parts", "2", "--out", str(out))
    assert _call("shard_dataset", version_id, "--parts", "2", "--out", str(out), "--overwrite")[-1] == str(out)


def test_shard_dataset_names_an_unknown_version(db: None) -> None:
    with pytest.raises(CommandError, match="dataset version 404 does not exist"):
        _call("shard_dataset", "404", "--parts", "2")


def test_make_demo_dataset_belongs_to_the_demo_steward_when_seed_demo_made_one(
    dataset_storage: Path, settings: SettingsWrapper
) -> None:
    settings.DEBUG = True
    call_command("seed_demo", stdout=StringIO())
    version_id = _call("make_demo_dataset", "--rows", "500")[-1]
    version = DatasetVersion.objects.get(pk=version_id)
    steward = User.objects.get(username="steward")
    assert version.created_by == steward
    assert version.dataset.steward_names() == ["steward"]
    registered = Event.objects.get(verb=Verb.DATASET_VERSION_REGISTERED)
    assert registered.actor == steward
    assert not User.objects.filter(username=CLI_USERNAME).exists()


def test_make_demo_dataset_falls_back_to_the_system_account_without_a_demo_steward(dataset_storage: Path) -> None:
    make_user("steward", [Role.REVIEWER])  # a person named so, who is no data steward
    version = DatasetVersion.objects.get(pk=_call("make_demo_dataset", "--rows", "500")[-1])
    assert version.created_by.username == CLI_USERNAME


def test_make_demo_dataset_acts_as_the_named_user_over_the_demo_steward(dataset_storage: Path) -> None:
    make_user("steward", [Role.DATA_STEWARD])
    make_user("alice", [Role.DATA_STEWARD])
    version = DatasetVersion.objects.get(pk=_call("make_demo_dataset", "--rows", "500", "--user", "alice")[-1])
    assert version.created_by.username == "alice"
