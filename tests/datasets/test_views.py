from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.datasets import services
from auditportal.datasets.models import DatasetVersion, StagedUpload
from tests.datasets.conftest import SMALL_CSV
from tests.factories import DatasetVersionFactory, client_for


@pytest.fixture
def version(alice: User, dataset_storage: Path) -> DatasetVersion:
    return DatasetVersionFactory.create(created_by=alice, name="loans")


@pytest.fixture
def staged(alice: User, dataset_storage: Path) -> StagedUpload:
    """Step 1 done: alice's upload of SMALL_CSV, waiting for its declaration."""
    return services.staged_upload_create(
        user=alice,
        source=_write(dataset_storage.parent / "in.csv", SMALL_CSV),
        original_name="loans.csv",
        dataset_name="loans",
    )


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


def test_a_steward_registers_through_upload_and_declaration(alice: User, dataset_storage: Path) -> None:
    client = client_for(alice)
    upload = SimpleUploadedFile("loans.csv", SMALL_CSV.encode(), content_type="text/csv")
    response = client.post(reverse("datasets:upload"), {"name": "loans", "file": upload})
    assert response.status_code == 302, response.content.decode()
    staged = StagedUpload.objects.get()
    assert response["Location"] == reverse("datasets:declare", args=[staged.pk])

    page = client.get(response["Location"])
    assert page.status_code == 200
    assert b"female" in page.content  # inferred groups are shown for confirmation

    response = client.post(
        reverse("datasets:declare", args=[staged.pk]),
        {
            "label": "approved",
            "positive": "1",
            "attributes": ["gender", "age_group"],
            "unknown_tokens": "nan, -1, unknown",
            "confirm_groups": "on",
        },
    )
    version = DatasetVersion.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("datasets:version", args=[version.pk])
    assert version.attributes.get(name="gender").unknown_count == 2
    assert not StagedUpload.objects.exists()


def test_a_declaration_error_is_shown_on_the_form_and_keeps_the_upload(alice: User, staged: StagedUpload) -> None:
    response = client_for(alice).post(
        reverse("datasets:declare", args=[staged.pk]),
        {"label": "approved", "positive": "maybe", "attributes": ["gender"], "confirm_groups": "on"},
    )
    assert response.status_code == 400
    assert "loans.csv" in response.content.decode()
    assert "maybe" in response.content.decode()
    assert StagedUpload.objects.filter(pk=staged.pk).exists()
    assert not DatasetVersion.objects.exists()


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
