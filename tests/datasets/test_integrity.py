"""A registered file's SHA-256 is checked again before it is used; each check is recorded."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from django.urls import reverse

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.datasets import services
from auditportal.datasets.models import DatasetVersion, IntegrityCheck, IntegrityPurpose
from auditportal.fairness.files import tabular
from tests.datasets.conftest import flip_labels
from tests.factories import DatasetVersionFactory, client_for


@pytest.fixture
def version(alice: User, dataset_storage: Path) -> DatasetVersion:
    return DatasetVersionFactory.create(created_by=alice, name="loans")


def _tampered_message(version: DatasetVersion) -> str:
    return (
        f"Dataset version loans v1 failed its integrity check: the stored file's SHA-256 is "
        f"{tabular.file_sha256(version.path)}, registered {version.sha256}. "
        "The file changed after registration; register the correct file as a new version."
    )


def _failure_events(version: DatasetVersion) -> list[Event]:
    return list(Event.objects.filter(verb=Verb.DATASET_VERSION_INTEGRITY_FAILED, target_id=str(version.pk)))


def test_an_untouched_file_passes_and_the_check_is_recorded(alice: User, version: DatasetVersion) -> None:
    check = services.dataset_version_check_integrity(version=version, actor=alice)
    assert IntegrityCheck.objects.get() == check
    assert (check.ok, check.observed_sha256, check.purpose, check.actor) == (
        True,
        version.sha256,
        IntegrityPurpose.MANUAL,
        alice,
    )
    assert _failure_events(version) == []


def test_flipped_labels_fail_the_check_naming_the_version_and_both_hashes(alice: User, version: DatasetVersion) -> None:
    flip_labels(version)
    observed = tabular.file_sha256(version.path)
    assert observed != version.sha256
    with pytest.raises(services.DatasetIntegrityError) as caught:
        services.dataset_version_check_integrity(version=version, actor=alice, purpose="freeze")
    assert str(caught.value) == _tampered_message(version)
    check = IntegrityCheck.objects.get()
    assert (check.ok, check.observed_sha256, check.purpose) == (False, observed, IntegrityPurpose.FREEZE)
    [event] = _failure_events(version)
    assert event.actor == alice
    assert event.data == {
        "dataset": "loans",
        "number": 1,
        "purpose": "freeze",
        "registered_sha256": version.sha256,
        "observed_sha256": observed,
        "check": check.pk,
    }


def test_a_missing_file_fails_the_check(version: DatasetVersion) -> None:
    version.path.unlink()
    with pytest.raises(services.DatasetIntegrityError) as caught:
        services.dataset_version_check_integrity(version=version, actor=None)
    assert str(caught.value) == (
        f"Dataset version loans v1 failed its integrity check: the stored file loans.csv is missing "
        f"(registered SHA-256 {version.sha256}). Restore it, or register the file again as a new version."
    )
    check = IntegrityCheck.objects.get()
    assert (check.ok, check.file_missing, check.actor) == (False, True, None)
    assert _failure_events(version)[0].data["observed_sha256"] is None


def test_the_check_refuses_to_run_inside_a_transaction(alice: User, version: DatasetVersion) -> None:
    with pytest.raises(RuntimeError, match="must not run inside an atomic block"), transaction.atomic():
        services.dataset_version_check_integrity(version=version, actor=alice)
    assert not IntegrityCheck.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_failed_check_and_its_event_are_committed_although_the_action_is_refused(
    dataset_storage: Path,
) -> None:
    version = DatasetVersionFactory.create(name="loans")
    flip_labels(version)
    with pytest.raises(services.DatasetIntegrityError):
        services.dataset_version_shard(version=version, parts=1)
    # Autocommit: nothing here can roll back what the check committed.
    assert not transaction.get_connection().in_atomic_block
    assert IntegrityCheck.objects.filter(version=version, ok=False, purpose="shard").count() == 1
    assert len(_failure_events(version)) == 1


def test_sharding_a_tampered_file_is_refused_and_writes_nothing(version: DatasetVersion, dataset_storage: Path) -> None:
    flip_labels(version)
    out = dataset_storage.parent / "parts"
    with pytest.raises(services.DatasetIntegrityError) as caught:
        services.dataset_version_shard(version=version, parts=1, out_dir=out)
    assert str(caught.value) == _tampered_message(version)
    assert not out.exists()
    assert IntegrityCheck.objects.get().purpose == IntegrityPurpose.SHARD
    assert len(_failure_events(version)) == 1


def test_the_shard_command_refuses_a_tampered_file_with_the_message(
    version: DatasetVersion, dataset_storage: Path
) -> None:
    flip_labels(version)
    out = dataset_storage.parent / "parts"
    with pytest.raises(CommandError) as caught:
        call_command("shard_dataset", str(version.pk), "--parts", "2", "--out", str(out), stdout=StringIO())
    assert str(caught.value) == _tampered_message(version)
    assert not out.exists()
    assert len(_failure_events(version)) == 1


def test_the_manifest_carries_the_hash_of_the_bytes_that_were_sharded(
    version: DatasetVersion, dataset_storage: Path
) -> None:
    out, manifest = services.dataset_version_shard(version=version, parts=1, out_dir=dataset_storage.parent / "p")
    written = json.loads((out / "manifest.json").read_text())
    assert (
        written["dataset"]
        == manifest["dataset"]
        == {"version_id": version.pk, "name": "loans", "sha256": version.sha256}
    )
    assert services.shards_match_version(out_dir=out, version=version)
    assert IntegrityCheck.objects.get().purpose == IntegrityPurpose.SHARD


def test_a_file_changed_between_the_check_and_the_read_is_refused(
    version: DatasetVersion, dataset_storage: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registered = version.sha256
    flip_labels(version)
    # The check before reading saw the registered bytes; the file changed right after it.
    monkeypatch.setattr(tabular, "file_sha256", lambda path: registered)
    out = dataset_storage.parent / "parts"
    with pytest.raises(services.DatasetIntegrityError):
        services.dataset_version_shard(version=version, parts=1, out_dir=out)
    assert not out.exists()
    assert list(IntegrityCheck.objects.order_by("pk").values_list("ok", flat=True)) == [True, False]
    assert len(_failure_events(version)) == 1


def test_the_version_page_shows_the_latest_check(alice: User, carol: User, version: DatasetVersion) -> None:
    client = client_for(carol)
    page = client.get(reverse("datasets:version", args=[version.pk])).content.decode()
    assert "not checked since registration" in page
    services.dataset_version_check_integrity(version=version, actor=alice, purpose="shard")
    page = client.get(reverse("datasets:version", args=[version.pk])).content.decode()
    assert "✓ intact</span>,\n      last checked" in page
    assert "before sharding by alice" in page
    assert 'id="integrity-failed"' not in page
    assert "Check integrity now" not in page  # a reviewer cannot ask for a check


def test_the_version_page_shows_a_failed_check_prominently(carol: User, version: DatasetVersion) -> None:
    flip_labels(version)
    with pytest.raises(services.DatasetIntegrityError):
        services.dataset_version_shard(version=version, parts=1)
    check = IntegrityCheck.objects.get()
    page = client_for(carol).get(reverse("datasets:version", args=[version.pk])).content.decode()
    assert 'id="integrity-failed"' in page
    assert (
        f"This version failed its integrity check on {check.checked_at:%Y-%m-%d %H:%M} UTC</strong>\n"
        f"  (before sharding):\n  the stored file's SHA-256 is "
        f'<code class="hash">{check.observed_sha256}</code>,\n'
        f'  registered <code class="hash">{version.sha256}</code>.'
    ) in page


def test_a_steward_checks_integrity_from_the_page(alice: User, version: DatasetVersion) -> None:
    client = client_for(alice)
    url = reverse("datasets:check", args=[version.pk])
    assert "Check integrity now" in client.get(reverse("datasets:version", args=[version.pk])).content.decode()
    response = client.post(url, follow=True)
    assert "The stored file of loans v1 still has its registered SHA-256." in response.content.decode()
    flip_labels(version)
    page = client.post(url, follow=True).content.decode()
    assert 'id="integrity-failed"' in page
    assert "The stored file of loans v1 failed its integrity check." in page
    assert list(IntegrityCheck.objects.order_by("pk").values_list("ok", "purpose", "actor")) == [
        (True, "manual", alice.pk),
        (False, "manual", alice.pk),
    ]


def test_an_administrator_may_check_but_an_engineer_may_not(bob: User, erin: User, version: DatasetVersion) -> None:
    url = reverse("datasets:check", args=[version.pk])
    assert client_for(bob).post(url).status_code == 403
    assert client_for(erin).post(url).status_code == 302
    assert list(IntegrityCheck.objects.values_list("actor", flat=True)) == [erin.pk]


def test_an_outsider_gets_404_for_the_check(oscar: User, version: DatasetVersion) -> None:
    assert client_for(oscar).post(reverse("datasets:check", args=[version.pk])).status_code == 404
    assert not IntegrityCheck.objects.exists()


def test_the_api_includes_the_integrity_state(alice: User, bob: User, version: DatasetVersion) -> None:
    url = f"/api/v1/dataset-versions/{version.pk}/"
    assert client_for(bob).get(url).json()["integrity"] is None
    flip_labels(version)
    with pytest.raises(services.DatasetIntegrityError):
        services.dataset_version_check_integrity(version=version, actor=alice)
    check = IntegrityCheck.objects.get()
    integrity = client_for(bob).get(url).json()["integrity"]
    assert integrity["checked_at"].startswith(f"{check.checked_at:%Y-%m-%dT%H:%M:%S}")
    del integrity["checked_at"]
    assert integrity == {
        "ok": False,
        "purpose": "manual",
        "observed_sha256": check.observed_sha256,
        "file_missing": False,
    }
