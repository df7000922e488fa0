"""Changing a dataset's stewards on its page: a refusal goes back to the page (303) with its error,
never leaving the address bar on the POST-only stewards URL."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse
from django.utils.html import escape

from auditportal.accounts.models import User
from auditportal.datasets.models import Dataset, DatasetVersion
from tests.factories import DatasetVersionFactory, client_for


@pytest.fixture
def version(alice: User, dataset_storage: Path) -> DatasetVersion:
    return DatasetVersionFactory.create(created_by=alice, name="loans")


def test_a_refused_steward_change_goes_back_to_the_page_with_its_error_once(
    erin: User, version: DatasetVersion
) -> None:
    client = client_for(erin)
    page = reverse("datasets:version", args=[version.pk])
    response = client.post(
        reverse("datasets:stewards", args=[version.dataset_id]), {"action": "add", "username": "ghost"}
    )
    assert (response.status_code, response["Location"]) == (303, page + "#steward-add")
    shown = client.get(page)
    assert shown.status_code == 200
    error = escape("No user named 'ghost'.")
    assert f'<div class="error" role="alert" id="steward-errors"><p>{error}</p></div>' in shown.content.decode()
    # A reload does not post again, and the error was for that one visit.
    assert "steward-errors" not in client.get(page).content.decode()
    assert version.dataset.steward_names() == ["alice"]


def test_a_refusal_for_a_dataset_without_a_version_shows_on_the_dataset_page(erin: User, db: None) -> None:
    dataset = Dataset.objects.create(name="empty", created_by=erin)
    client = client_for(erin)
    page = reverse("datasets:detail", args=[dataset.pk])
    response = client.post(
        reverse("datasets:stewards", args=[dataset.pk]), {"action": "add", "username": "ghost"}, follow=True
    )
    assert (response.redirect_chain, response.status_code) == ([(page, 303)], 200)
    assert escape("No user named 'ghost'.") in response.content.decode()
