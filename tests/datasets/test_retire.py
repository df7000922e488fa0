"""Retiring a dataset version: a state change with who, when and why, never a deletion."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.datasets import services
from auditportal.datasets.models import DatasetVersion
from auditportal.fairness.errors import UserError
from tests.factories import DatasetVersionFactory, client_for


@pytest.fixture
def version(alice: User, dataset_storage: Path) -> DatasetVersion:
    return DatasetVersionFactory.create(created_by=alice, name="loans")


def test_a_steward_retires_a_version_with_a_reason_and_an_event(alice: User, version: DatasetVersion) -> None:
    services.dataset_version_retire(user=alice, version=version, reason="  Labels were mis-coded in 2025. ")
    version.refresh_from_db()
    assert version.is_retired
    assert (version.retired_by, version.retired_reason) == (alice, "Labels were mis-coded in 2025.")
    [event] = Event.objects.filter(verb=Verb.DATASET_VERSION_RETIRED)
    assert (event.actor, event.target_id) == (alice, str(version.pk))
    assert event.data == {"dataset": "loans", "number": 1, "reason": "Labels were mis-coded in 2025."}


def test_an_administrator_may_retire_a_version(erin: User, version: DatasetVersion) -> None:
    services.dataset_version_retire(user=erin, version=version, reason="superseded")
    version.refresh_from_db()
    assert version.retired_by == erin


def test_an_engineer_may_not_retire_a_version(bob: User, version: DatasetVersion) -> None:
    with pytest.raises(
        PermissionDenied,
        match=r"Only the stewards of dataset .loans. \(alice\) or an administrator can retire its versions\.",
    ):
        services.dataset_version_retire(user=bob, version=version, reason="no")
    version.refresh_from_db()
    assert not version.is_retired
    assert not Event.objects.filter(verb=Verb.DATASET_VERSION_RETIRED).exists()


def test_a_reason_is_required(alice: User, version: DatasetVersion) -> None:
    with pytest.raises(UserError) as caught:
        services.dataset_version_retire(user=alice, version=version, reason="   ")
    assert (str(caught.value), caught.value.field) == ("Say why this version is retired.", "reason")
    version.refresh_from_db()
    assert not version.is_retired


def test_a_version_is_retired_only_once(alice: User, erin: User, version: DatasetVersion) -> None:
    services.dataset_version_retire(user=alice, version=version, reason="first")
    stale = DatasetVersion.objects.get(pk=version.pk)
    stale.retired_at = None  # an out-of-date copy must not let it through either
    with pytest.raises(UserError) as caught:
        services.dataset_version_retire(user=erin, version=stale, reason="second")
    version.refresh_from_db()
    assert version.retired_at is not None
    assert str(caught.value) == f"loans v1 was already retired on {version.retired_at:%Y-%m-%d %H:%M} UTC by alice."
    assert (version.retired_by, version.retired_reason) == (alice, "first")
    assert Event.objects.filter(verb=Verb.DATASET_VERSION_RETIRED).count() == 1


def test_the_page_shows_the_retirement_and_offers_the_form_to_stewards_only(
    alice: User, bob: User, version: DatasetVersion
) -> None:
    url = reverse("datasets:version", args=[version.pk])
    assert "Retire this version" in client_for(alice).get(url).content.decode()
    assert "Retire this version" not in client_for(bob).get(url).content.decode()
    response = client_for(alice).post(reverse("datasets:retire", args=[version.pk]), {"reason": "superseded by v2"})
    assert response.status_code == 302
    version.refresh_from_db()
    page = client_for(bob).get(url).content.decode()
    assert f"<strong>Retired on {version.retired_at:%Y-%m-%d %H:%M} UTC by alice</strong>: superseded by v2" in page
    assert "Retire this version" not in client_for(alice).get(url).content.decode()


def test_the_form_shows_a_missing_reason_on_its_field(alice: User, version: DatasetVersion) -> None:
    page = reverse("datasets:version", args=[version.pk])
    response = client_for(alice).post(reverse("datasets:retire", args=[version.pk]), {"reason": ""}, follow=True)
    # Back on the version's page (303, then 200), not on the POST-only retire URL.
    assert response.redirect_chain == [(page + "#retire", 303)]
    assert response.status_code == 200
    assert '<p class="error" role="alert">Say why this version is retired.</p>' in response.content.decode()
    version.refresh_from_db()
    assert not version.is_retired


def test_a_refused_retirement_leaves_the_address_bar_on_the_page_and_shows_its_error_once(
    alice: User, version: DatasetVersion
) -> None:
    client = client_for(alice)
    page = reverse("datasets:version", args=[version.pk])
    response = client.post(reverse("datasets:retire", args=[version.pk]), {"reason": "   "})
    assert (response.status_code, response["Location"]) == (303, page + "#retire")
    shown = client.get(page).content.decode()
    assert '<details class="card retire" id="retire" open>' in shown
    assert "Say why this version is retired." in shown
    # A reload does not post again, and the error was for that one visit.
    again = client.get(page)
    assert again.status_code == 200
    assert "Say why this version is retired." not in again.content.decode()
    version.refresh_from_db()
    assert not version.is_retired


def test_a_version_retired_meanwhile_says_so_above_its_page(alice: User, erin: User, version: DatasetVersion) -> None:
    client = client_for(alice)
    page = reverse("datasets:version", args=[version.pk])
    assert "Retire this version" in client.get(page).content.decode()
    services.dataset_version_retire(user=erin, version=version, reason="first")
    response = client.post(reverse("datasets:retire", args=[version.pk]), {"reason": "second"}, follow=True)
    assert response.redirect_chain == [(page + "#retire", 303)]
    version.refresh_from_db()
    assert f"loans v1 was already retired on {version.retired_at:%Y-%m-%d %H:%M} UTC by erin." in (
        response.content.decode()
    )
    assert version.retired_reason == "first"


def test_an_engineer_posting_the_form_gets_403(bob: User, version: DatasetVersion) -> None:
    assert client_for(bob).post(reverse("datasets:retire", args=[version.pk]), {"reason": "x"}).status_code == 403


def test_the_api_includes_the_retirement(alice: User, bob: User, version: DatasetVersion) -> None:
    url = f"/api/v1/dataset-versions/{version.pk}/"
    assert client_for(bob).get(url).json()["retired"] is None
    services.dataset_version_retire(user=alice, version=version, reason="superseded")
    retired = client_for(bob).get(url).json()["retired"]
    assert (retired["by"], retired["reason"]) == ("alice", "superseded")
