"""/datasets/, the folder of every dataset page, is a page: the datasets list (the home page)."""

from __future__ import annotations

from pathlib import Path

from django.test import Client

from auditportal.accounts.models import User
from tests.factories import DatasetVersionFactory, client_for


def test_datasets_leads_a_member_to_the_datasets_list(alice: User, carol: User, dataset_storage: Path) -> None:
    DatasetVersionFactory.create(created_by=alice, name="loans")
    response = client_for(carol).get("/datasets/", follow=True)
    assert response.redirect_chain == [("/", 302)]
    assert response.status_code == 200
    assert "loans" in response.content.decode()


def test_datasets_asks_a_visitor_to_log_in_and_comes_back_there(db: None) -> None:
    response = Client().get("/datasets/")
    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/datasets/"
