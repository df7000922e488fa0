from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.activity.models import Event
from auditportal.datasets import services
from auditportal.datasets.models import Dataset, DatasetVersion, GroupSummary, SensitiveAttribute
from auditportal.datasets.services import registration
from auditportal.fairness.errors import UserError
from auditportal.fairness.files.tabular import DatasetError, DatasetSpec

SPEC = DatasetSpec(label="approved", positive="1", attributes=("gender", "age_group"))


def _register(user: User, source: Path, spec: DatasetSpec = SPEC, name: str = "loans") -> DatasetVersion:
    return services.dataset_version_register(user=user, source=source, original_name=source.name, name=name, spec=spec)


def _nothing_stored(store: Path) -> bool:
    files = [p for p in store.rglob("*") if p.is_file()] if store.exists() else []
    return (
        not files
        and not Dataset.objects.exists()
        and not DatasetVersion.objects.exists()
        and not GroupSummary.objects.exists()
        and not SensitiveAttribute.objects.exists()
        and not Event.objects.filter(verb__startswith="dataset").exists()
    )


def test_a_steward_registers_a_file_with_its_group_summary(alice: User, small_csv: Path, dataset_storage: Path) -> None:
    version = _register(alice, small_csv)
    version.refresh_from_db()
    assert (version.dataset.name, version.number, version.num_rows) == ("loans", 1, 8)
    assert (version.positives, version.negatives) == (4, 4)
    assert version.path.read_bytes() == small_csv.read_bytes()
    assert version.path.is_relative_to(dataset_storage)
    assert [f["name"] for f in version.features] == ["income", "region"]
    gender = version.attributes.get(name="gender")
    assert (gender.groups, gender.unknown_count) == (["female", "male"], 2)
    female = version.group_summaries.get(attribute="gender", group="female")
    assert (female.rows, female.positives, female.negatives) == (3, 2, 1)
    assert female.share == pytest.approx(3 / 8)
    unknown = version.group_summaries.get(attribute="gender", is_unknown=True)
    assert unknown.rows == 2
    assert version.group_summaries.filter(attribute="gender&age_group", is_intersection=True).exists()
    event = Event.objects.get(verb="dataset_version.registered")
    assert (event.actor, event.target_id, event.data["sha256"]) == (alice, str(version.pk), version.sha256)


def test_registering_the_same_name_again_creates_the_next_version(
    alice: User, small_csv: Path, dataset_storage: Path
) -> None:
    first = _register(alice, small_csv)
    second = _register(alice, small_csv)
    assert (first.dataset_id, first.number, second.number) == (second.dataset_id, 1, 2)
    assert first.storage_path != second.storage_path
    assert first.path.exists()
    assert second.path.exists()


@pytest.mark.django_db  # the member comes from a fixture fetched by name
@pytest.mark.parametrize("fixture_name", ["bob", "carol", "dave", "oscar"])
def test_only_a_data_steward_may_register(
    request: pytest.FixtureRequest, fixture_name: str, small_csv: Path, dataset_storage: Path
) -> None:
    user = request.getfixturevalue(fixture_name)
    with pytest.raises(PermissionDenied, match="Only a data steward can register datasets"):
        _register(user, small_csv)
    assert _nothing_stored(dataset_storage)


def test_a_bad_declaration_leaves_nothing_behind(alice: User, small_csv: Path, dataset_storage: Path) -> None:
    spec = DatasetSpec(label="approved", positive="yes", attributes=("gender",))
    with pytest.raises(DatasetError, match=r"loans\.csv.*'approved'"):
        _register(alice, small_csv, spec)
    assert _nothing_stored(dataset_storage)


def test_a_database_failure_removes_the_stored_file(
    alice: User, small_csv: Path, dataset_storage: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(**kwargs: object) -> None:
        raise RuntimeError("database went away")

    monkeypatch.setattr(registration, "event_record", explode)
    with pytest.raises(RuntimeError, match="database went away"):
        _register(alice, small_csv)
    assert _nothing_stored(dataset_storage)


def test_a_file_over_the_size_limit_is_refused(
    alice: User, small_csv: Path, dataset_storage: Path, settings: SettingsWrapper
) -> None:
    settings.DATASET_MAX_UPLOAD_BYTES = 100
    with pytest.raises(DatasetError, match=r"loans\.csv: the file is .* over the 100 bytes limit"):
        _register(alice, small_csv)
    assert _nothing_stored(dataset_storage)


@pytest.mark.parametrize("name", ["", "../etc", "a/b", "x" * 121, "-leading-dash"])
def test_a_hostile_dataset_name_is_refused(alice: User, small_csv: Path, dataset_storage: Path, name: str) -> None:
    with pytest.raises(UserError, match="is not allowed") as caught:
        _register(alice, small_csv, name=name)
    assert caught.value.field == "name"
    assert _nothing_stored(dataset_storage)


def test_a_staged_upload_survives_a_rejected_declaration(alice: User, small_csv: Path, dataset_storage: Path) -> None:
    staged = services.staged_upload_create(
        user=alice, source=small_csv, original_name="loans.csv", dataset_name="loans"
    )
    assert staged.path.exists()
    with pytest.raises(DatasetError):
        services.staged_upload_register(
            user=alice, staged=staged, spec=DatasetSpec(label="approved", positive="7", attributes=("gender",))
        )
    assert staged.path.exists(), "a wrong declaration must not cost the steward the upload"
    version = services.staged_upload_register(user=alice, staged=staged, spec=SPEC)
    assert version.path.exists()
    assert not staged.path.exists()
    assert version.num_rows == 8


def test_only_the_uploader_may_register_a_staged_upload(alice: User, small_csv: Path, dataset_storage: Path) -> None:
    from auditportal.accounts.models import Role
    from tests.factories import make_user

    staged = services.staged_upload_create(
        user=alice, source=small_csv, original_name="loans.csv", dataset_name="loans"
    )
    mallory = make_user("mallory", [Role.DATA_STEWARD])
    with pytest.raises(PermissionDenied, match="only be registered by the steward who uploaded it"):
        services.staged_upload_register(user=mallory, staged=staged, spec=SPEC)
    assert staged.path.exists()
    assert not DatasetVersion.objects.exists()


def test_uploads_left_in_step_one_expire_after_a_day(alice: User, small_csv: Path, dataset_storage: Path) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from auditportal.datasets.models import StagedUpload

    old = services.staged_upload_create(user=alice, source=small_csv, original_name="loans.csv", dataset_name="a")
    a_day_ago = timezone.now() - timedelta(hours=25)
    StagedUpload.objects.filter(pk=old.pk).update(created_at=a_day_ago, progress_at=a_day_ago)
    fresh_source = small_csv.with_name("fresh.csv")
    fresh_source.write_bytes(b"x,y\n1,0\n")
    fresh = services.staged_upload_create(user=alice, source=fresh_source, original_name="fresh.csv", dataset_name="b")
    assert list(StagedUpload.objects.values_list("pk", flat=True)) == [fresh.pk]
    assert not old.path.exists()
    assert fresh.path.exists()


def test_beat_expires_staged_uploads_and_left_over_temporary_files_every_hour(
    alice: User, small_csv: Path, dataset_storage: Path, settings: SettingsWrapper
) -> None:
    from auditportal.celery import app
    from auditportal.datasets.models import StagedStatus, StagedUpload

    entry = settings.CELERY_BEAT_SCHEDULE["datasets-expire-staged-uploads"]
    assert (entry["task"], entry["schedule"]) == ("datasets.expire_staged_uploads", timedelta(hours=1))
    a_day_ago = timezone.now() - timedelta(hours=25)

    def staged(name: str) -> StagedUpload:
        source = small_csv.with_name(name)
        source.write_text(small_csv.read_text())
        return services.staged_upload_create(user=alice, source=source, original_name=name, dataset_name="a")

    old, fresh, busy = staged("old.csv"), staged("fresh.csv"), staged("busy.csv")
    StagedUpload.objects.filter(pk=old.pk).update(created_at=a_day_ago, progress_at=a_day_ago)
    # A worker registering an upload started a day ago has reported a minute ago: it is left alone.
    StagedUpload.objects.filter(pk=busy.pk).update(
        created_at=a_day_ago, status=StagedStatus.REGISTERING, progress_at=timezone.now() - timedelta(minutes=1)
    )
    uploads = Path(settings.FILE_UPLOAD_TEMP_DIR)
    left_over, current, other = uploads / "tmpab12.upload.csv", uploads / "tmpcd34.upload.csv", uploads / "notes"
    for path in (left_over, current, other):
        path.write_bytes(b"x" * 1000)
    for path in (left_over, other):
        os.utime(path, (a_day_ago.timestamp(), a_day_ago.timestamp()))

    app.loader.import_default_modules()  # what a worker (and beat) does at start: find every app's tasks
    assert app.tasks["datasets.expire_staged_uploads"].apply().get() == 1

    assert set(StagedUpload.objects.values_list("pk", flat=True)) == {fresh.pk, busy.pk}
    assert not old.path.parent.exists()
    assert fresh.path.is_file()
    assert busy.path.is_file()
    assert sorted(p.name for p in uploads.iterdir()) == ["notes", "tmpcd34.upload.csv"]
