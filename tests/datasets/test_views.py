from __future__ import annotations

import html
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.datasets import selectors, services
from auditportal.datasets.models import DatasetVersion, StagedStatus, StagedUpload
from tests.datasets.conftest import SMALL_CSV, many_rows_parquet
from tests.factories import DatasetVersionFactory, client_for


@pytest.fixture
def version(alice: User, dataset_storage: Path) -> DatasetVersion:
    return DatasetVersionFactory.create(created_by=alice, name="loans")


@pytest.fixture
def staged(alice: User, dataset_storage: Path) -> StagedUpload:
    """Step 1 done (the worker's profile included): alice's upload of SMALL_CSV, waiting for its declaration."""
    created = services.staged_upload_create(
        user=alice,
        source=_write(dataset_storage.parent / "in.csv", SMALL_CSV),
        original_name="loans.csv",
        dataset_name="loans",
    )
    profiled = services.staged_upload_profile(staged_id=created.pk)
    assert profiled is not None
    assert profiled.status == StagedStatus.READY
    return profiled


DECLARATION = {
    "label": "approved",
    "positive": "1",
    "attributes": ["gender", "age_group"],
    "unknown_tokens": "nan, -1, unknown",
    "confirm_groups": "on",
}


def test_anonymous_visitors_are_sent_to_the_login_page(db: None) -> None:
    response = Client().get(reverse("home"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_members_see_registered_datasets_on_the_home_page(bob: User, version: DatasetVersion) -> None:
    response = client_for(bob).get(reverse("home"))
    assert response.status_code == 200
    assert b"loans" in response.content


def test_an_outsider_sees_no_dataset_and_gets_404_for_one(oscar: User, version: DatasetVersion) -> None:
    client = client_for(oscar)
    home = client.get(reverse("home"))
    assert b"loans" not in home.content
    assert b"Your account has no role yet" in home.content
    assert client.get(reverse("datasets:version", args=[version.pk])).status_code == 404
    assert client.get(reverse("datasets:detail", args=[version.dataset_id])).status_code == 404


@pytest.mark.django_db  # the member comes from a fixture fetched by name
@pytest.mark.parametrize("fixture_name", ["bob", "carol", "dave"])
def test_members_without_the_steward_role_get_403_on_the_register_form(
    request: pytest.FixtureRequest, fixture_name: str
) -> None:
    client = client_for(request.getfixturevalue(fixture_name))
    response = client.get(reverse("datasets:upload"))
    assert response.status_code == 403
    assert b"Only a data steward can register datasets" in response.content


def test_the_dataset_page_shows_the_per_group_table(carol: User, version: DatasetVersion) -> None:
    response = client_for(carol).get(reverse("datasets:version", args=[version.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert version.sha256 in html
    assert 'data-attribute="gender"' in html
    assert 'data-attribute="gender&amp;age_group"' in html
    assert "37.5%" in html  # female: 3 of 8 rows


def test_a_dataset_link_leads_to_its_latest_version(carol: User, version: DatasetVersion) -> None:
    response = client_for(carol).get(reverse("datasets:detail", args=[version.dataset_id]))
    assert response.status_code == 302
    assert response["Location"] == reverse("datasets:version", args=[version.pk])


def test_a_steward_registers_through_upload_and_declaration(
    alice: User, dataset_storage: Path, inline_worker: Callable[[], AbstractContextManager[Any]]
) -> None:
    client = client_for(alice)
    upload = SimpleUploadedFile("loans.csv", SMALL_CSV.encode(), content_type="text/csv")
    with inline_worker():
        response = client.post(reverse("datasets:upload"), {"name": "loans", "file": upload})
    assert response.status_code == 302, response.content.decode()
    staged = StagedUpload.objects.get()
    assert response["Location"] == reverse("datasets:declare", args=[staged.pk])
    assert staged.status == StagedStatus.READY

    page = client.get(response["Location"])
    assert page.status_code == 200
    assert b"female" in page.content  # inferred groups are shown for confirmation

    with inline_worker():
        response = client.post(reverse("datasets:declare", args=[staged.pk]), DECLARATION)
    assert response.status_code == 302
    assert response["Location"] == reverse("datasets:declare", args=[staged.pk])
    version = DatasetVersion.objects.get()
    staged.refresh_from_db()
    assert (staged.status, staged.version) == (StagedStatus.REGISTERED, version)
    assert version.attributes.get(name="gender").unknown_count == 2

    done = client.get(response["Location"])
    assert done.status_code == 302
    assert done["Location"] == reverse("datasets:version", args=[version.pk])
    # Registered uploads leave the list of the steward's uploads; the staging folder is gone.
    assert list(selectors.staged_upload_list(user=alice)) == []
    assert not staged.path.parent.exists()


def test_the_upload_request_keeps_the_file_and_leaves_the_reading_to_the_worker(
    alice: User, dataset_storage: Path, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    client = client_for(alice)
    upload = SimpleUploadedFile("loans.csv", SMALL_CSV.encode(), content_type="text/csv")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(reverse("datasets:upload"), {"name": "loans", "file": upload})
    staged = StagedUpload.objects.get()
    assert response.status_code == 302
    assert (staged.status, staged.profile) == (StagedStatus.PROFILING, {})
    assert len(callbacks) == 1  # the profile, queued for a worker
    assert staged.path.read_text(encoding="utf-8") == SMALL_CSV

    page = client.get(response["Location"])
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="staged" data-status="profiling"' in html
    assert services.WAITING_FOR_WORKER in html
    status = client.get(reverse("datasets:staged-status", args=[staged.pk])).json()
    assert status["status"] == "profiling"
    assert status["progress"] == services.WAITING_FOR_WORKER
    home = client.get(reverse("home")).content.decode()
    assert 'id="staged-uploads"' in home
    assert "loans.csv" in home

    services.staged_upload_profile(staged_id=staged.pk)
    assert client.get(reverse("datasets:staged-status", args=[staged.pk])).json()["status"] == "ready"
    assert b'id="declare-form"' in client.get(response["Location"]).content


def test_a_declaration_the_worker_refuses_comes_back_to_the_form_with_the_reason_and_keeps_the_upload(
    alice: User, staged: StagedUpload, inline_worker: Callable[[], AbstractContextManager[Any]]
) -> None:
    client = client_for(alice)
    declaration = {"label": "approved", "positive": "maybe", "attributes": ["gender"], "confirm_groups": "on"}
    with inline_worker():
        response = client.post(reverse("datasets:declare", args=[staged.pk]), declaration)
    assert response.status_code == 302
    staged.refresh_from_db()
    assert staged.status == StagedStatus.READY
    assert "maybe" in staged.error
    page = client.get(reverse("datasets:declare", args=[staged.pk]))
    html = page.content.decode()
    assert "loans.csv" in html
    assert "maybe" in html
    assert page.context["form"]["positive"].value() == "maybe"  # the declaration, shown again
    assert staged.path.is_file()
    assert not DatasetVersion.objects.exists()


def test_a_second_submission_of_the_declaration_queues_nothing_and_shows_the_progress(
    alice: User, staged: StagedUpload, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    client = client_for(alice)
    url = reverse("datasets:declare", args=[staged.pk])
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        first = client.post(url, DECLARATION)
        second = client.post(url, DECLARATION)
    assert (first.status_code, second.status_code) == (302, 302)
    assert first["Location"] == second["Location"] == url
    assert len(callbacks) == 1
    staged.refresh_from_db()
    assert staged.status == StagedStatus.REGISTERING
    page = client.get(url)
    assert 'data-status="registering"' in page.content.decode()
    # A steward cannot pull the file from under the worker.
    assert client.post(reverse("datasets:discard", args=[staged.pk])).status_code == 302
    assert StagedUpload.objects.filter(pk=staged.pk).exists()

    services.staged_upload_register_queued(staged_id=staged.pk)
    version = DatasetVersion.objects.get()
    third = client.post(url, DECLARATION)
    assert third.status_code == 302
    assert third["Location"] == reverse("datasets:version", args=[version.pk])
    assert DatasetVersion.objects.count() == 1


def test_a_file_the_worker_cannot_read_ends_failed_with_the_reason_and_is_not_kept(
    alice: User, dataset_storage: Path, inline_worker: Callable[[], AbstractContextManager[Any]]
) -> None:
    # The header is UTF-8; a Latin-1 byte far into the file is found only when the data are read.
    content = b"income,gender,approved\n" + b"1,female,1\n" * 200_000 + "2,m\xe4nnlich,0\n".encode("latin-1")
    client = client_for(alice)
    with inline_worker():
        response = client.post(
            reverse("datasets:upload"),
            {"name": "loans", "file": SimpleUploadedFile("loans.csv", content, content_type="text/csv")},
        )
    staged = StagedUpload.objects.get()
    assert staged.status == StagedStatus.FAILED
    assert staged.error == (
        "loans.csv, row 200001, column 'gender': byte 0xE4 is not valid UTF-8; "
        "the file is not UTF-8 (e.g. Latin-1): save it as UTF-8"
    )
    assert not staged.path.parent.exists()
    page = client.get(response["Location"])
    assert html.escape(staged.error) in page.content.decode()
    assert client.post(reverse("datasets:discard", args=[staged.pk])).status_code == 302
    assert not StagedUpload.objects.exists()


def test_the_label_cannot_also_be_an_attribute(alice: User, staged: StagedUpload) -> None:
    response = client_for(alice).post(
        reverse("datasets:declare", args=[staged.pk]),
        {"label": "gender", "positive": "female", "attributes": ["gender"], "confirm_groups": "on"},
    )
    assert response.status_code == 400
    assert "cannot also be a sensitive attribute" in response.content.decode()


def test_another_stewards_staged_upload_is_not_found(staged: StagedUpload) -> None:
    from auditportal.accounts.models import Role
    from tests.factories import make_user

    mallory = make_user("mallory", [Role.DATA_STEWARD])
    client = client_for(mallory)
    assert client.get(reverse("datasets:declare", args=[staged.pk])).status_code == 404
    assert client.post(reverse("datasets:discard", args=[staged.pk])).status_code == 404
    assert StagedUpload.objects.filter(pk=staged.pk).exists()


@pytest.mark.parametrize("fixture_name", ["bob", "oscar"])
def test_a_staged_upload_is_not_found_for_anyone_but_its_owner_whatever_their_roles(
    request: pytest.FixtureRequest, fixture_name: str, staged: StagedUpload
) -> None:
    client = client_for(request.getfixturevalue(fixture_name))
    declaration = {"label": "approved", "positive": "1", "attributes": ["gender"], "confirm_groups": "on"}
    assert client.get(reverse("datasets:declare", args=[staged.pk])).status_code == 404
    assert client.get(reverse("datasets:staged-status", args=[staged.pk])).status_code == 404
    assert client.post(reverse("datasets:declare", args=[staged.pk]), declaration).status_code == 404
    assert StagedUpload.objects.filter(pk=staged.pk).exists()
    assert not DatasetVersion.objects.exists()


def test_an_uploader_who_lost_the_steward_role_gets_403_on_the_declaration(
    alice: User, erin: User, staged: StagedUpload
) -> None:
    from auditportal.accounts.models import Role
    from auditportal.accounts.services import role_revoke

    role_revoke(user=alice, role=Role.DATA_STEWARD, revoked_by=erin)
    response = client_for(alice).get(reverse("datasets:declare", args=[staged.pk]))
    assert response.status_code == 403
    assert b"Only a data steward can register datasets" in response.content


def test_an_oversized_upload_is_refused_with_its_name_and_nothing_is_kept(
    alice: User, dataset_storage: Path, settings: SettingsWrapper
) -> None:
    settings.DATASET_MAX_UPLOAD_BYTES = 1000
    big = SimpleUploadedFile("huge.csv", b"a,b\n" + b"1,2\n" * 5000, content_type="text/csv")
    response = client_for(alice).post(reverse("datasets:upload"), {"name": "huge", "file": big})
    assert response.status_code == 400
    assert "huge.csv: the file is larger than the 1000 bytes limit" in response.content.decode()
    assert not StagedUpload.objects.exists()
    uploads = Path(settings.FILE_UPLOAD_TEMP_DIR)
    assert not any(uploads.iterdir())
    assert not dataset_storage.exists() or not any(p.is_file() for p in dataset_storage.rglob("*"))


@pytest.mark.parametrize(
    ("file_name", "content", "message"),
    [
        ("empty.csv", b"", "empty.csv"),
        ("notes.txt", b"a,b\n1,2\n", "notes.txt"),
        ("semi.csv", b"a;b;c\n1;2;3\n", "semi.csv"),
    ],
)
def test_a_bad_file_is_refused_at_upload_with_its_name(
    alice: User, dataset_storage: Path, file_name: str, content: bytes, message: str
) -> None:
    upload = SimpleUploadedFile(file_name, content, content_type="text/csv")
    response = client_for(alice).post(reverse("datasets:upload"), {"name": "bad", "file": upload})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not StagedUpload.objects.exists()


def test_a_disallowed_dataset_name_is_shown_on_the_name_field(alice: User, dataset_storage: Path) -> None:
    upload = SimpleUploadedFile("loans.csv", SMALL_CSV.encode(), content_type="text/csv")
    response = client_for(alice).post(reverse("datasets:upload"), {"name": "../etc", "file": upload})
    assert response.status_code == 400
    assert response.context["form"].errors["name"] == [
        "Dataset name '../etc' is not allowed: use 1-120 letters, digits, spaces and . _ ( ) + -, "
        "starting with a letter or digit."
    ]
    assert not StagedUpload.objects.exists()


def test_the_api_lists_datasets_for_members_only(bob: User, oscar: User, version: DatasetVersion) -> None:
    assert [d["name"] for d in client_for(bob).get("/api/v1/datasets/").json()["results"]] == ["loans"]
    assert client_for(oscar).get("/api/v1/datasets/").json()["results"] == []
    assert client_for(oscar).get(f"/api/v1/dataset-versions/{version.pk}/").status_code == 404
    detail = client_for(bob).get(f"/api/v1/dataset-versions/{version.pk}/").json()
    assert detail["sha256"] == version.sha256
    gender = next(table for table in detail["groups"] if table["attribute"] == "gender")
    assert {row["group"]: row["rows"] for row in gender["groups"]} == {"female": 3, "male": 3, None: 2}


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_parquet_file_declaring_50_million_rows_is_refused_at_upload_from_its_metadata(
    alice: User, dataset_storage: Path, tmp_path: Path, no_data_read: None, settings: SettingsWrapper
) -> None:
    """The 0.6 MB file that took a web process from 0.6 to 2.7 GB: refused in milliseconds."""
    assert settings.DATASET_MAX_ROWS == 20_000_000
    path = many_rows_parquet(tmp_path / "huge.parquet", 50_000_000)
    upload = SimpleUploadedFile("huge.parquet", path.read_bytes(), content_type="application/octet-stream")
    response = client_for(alice).post(reverse("datasets:upload"), {"name": "huge", "file": upload})
    assert response.status_code == 400
    assert response.context["form"].non_field_errors() == [
        "huge.parquet: the file has 50,000,000 rows, over the limit of 20,000,000 rows; upload a sample or a part of it"
    ]
    assert not StagedUpload.objects.exists()
    assert not dataset_storage.exists() or not any(p.is_file() for p in dataset_storage.rglob("*"))
