"""Evidence has no add, change or delete path through the Django admin, even for a superuser."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from django.contrib import admin
from django.db import models
from django.test import Client, RequestFactory
from django.urls import reverse

from auditportal.accounts.models import User
from auditportal.attributions.models import TrialAttribution
from auditportal.audits.models import PredictionAudit
from auditportal.experiments.models import Experiment, Trial
from tests.attributions.conftest import done_attribution
from tests.factories import ExperimentFactory, PredictionAuditFactory, TrialFactory, make_user

EVIDENCE: dict[str, Callable[[], models.Model]] = {
    "predictionaudit": lambda: PredictionAuditFactory.create(),
    "experiment": lambda: ExperimentFactory.create(),
    "trial": lambda: TrialFactory.create(),
    "trialattribution": lambda: done_attribution(TrialFactory.create(checkpoint="/runs/ckpt-1"), make_user("ana")),
}
MODELS: dict[str, type[models.Model]] = {
    "predictionaudit": PredictionAudit,
    "experiment": Experiment,
    "trial": Trial,
    "trialattribution": TrialAttribution,
}


@pytest.fixture
def root(db: None) -> User:
    """A superuser with staff access (and, as from createsuperuser, no portal role)."""
    user = make_user("root")
    user.is_staff = user.is_superuser = True
    user.save(update_fields=["is_staff", "is_superuser"])
    return user


@pytest.fixture
def admin_client(root: User) -> Client:
    client = Client()
    client.force_login(root)
    return client


def _snapshot(obj: models.Model) -> dict[str, object]:
    obj.refresh_from_db()
    return {field.attname: getattr(obj, field.attname) for field in obj._meta.concrete_fields}


def _url(model: str, view: str, *args: object) -> str:
    app = MODELS[model]._meta.app_label
    return reverse(f"admin:{app}_{model}_{view}", args=args)


@pytest.mark.parametrize("model", list(EVIDENCE))
def test_the_add_page_answers_403_and_adds_nothing(model: str, admin_client: Client, dataset_storage: Path) -> None:
    EVIDENCE[model]()
    before = MODELS[model]._default_manager.count()
    assert admin_client.get(_url(model, "add")).status_code == 403
    # The old add page stored whatever was posted and failed with an IntegrityError.
    assert admin_client.post(_url(model, "add"), {"name": "forged", "original_name": "x.csv"}).status_code == 403
    assert MODELS[model]._default_manager.count() == before


@pytest.mark.parametrize("model", list(EVIDENCE))
def test_the_change_page_shows_the_row_but_a_post_answers_403_and_changes_nothing(
    model: str, admin_client: Client, dataset_storage: Path
) -> None:
    obj = EVIDENCE[model]()
    before = _snapshot(obj)
    page = admin_client.get(_url(model, "change", obj.pk))
    assert page.status_code == 200  # view permission stays: the row can be read
    assert b'name="_save"' not in page.content
    post = admin_client.post(_url(model, "change", obj.pk), {"name": "forged", "status": "COMPLETED", "state": "X"})
    assert post.status_code == 403
    assert _snapshot(obj) == before


@pytest.mark.parametrize("model", list(EVIDENCE))
def test_the_delete_page_answers_403_and_deletes_nothing(
    model: str, admin_client: Client, dataset_storage: Path
) -> None:
    obj = EVIDENCE[model]()
    assert admin_client.get(_url(model, "delete", obj.pk)).status_code == 403
    assert admin_client.post(_url(model, "delete", obj.pk), {"post": "yes"}).status_code == 403
    assert MODELS[model]._default_manager.filter(pk=obj.pk).exists()


@pytest.mark.parametrize("model", list(EVIDENCE))
def test_the_list_offers_no_bulk_delete_and_ignores_one_posted(
    model: str, admin_client: Client, dataset_storage: Path
) -> None:
    obj = EVIDENCE[model]()
    page = admin_client.get(_url(model, "changelist"))
    assert page.status_code == 200
    assert b"delete_selected" not in page.content
    assert _url(model, "add").encode() not in page.content
    admin_client.post(
        _url(model, "changelist"), {"action": "delete_selected", "_selected_action": [obj.pk], "post": "yes"}
    )
    assert MODELS[model]._default_manager.filter(pk=obj.pk).exists()


def test_every_registered_model_but_the_users_is_view_only(admin_client: Client, root: User) -> None:
    """A model registered later is evidence unless it says otherwise (the user admin: tests/accounts).
    API tokens are listed and revoked through an action, never added, changed or deleted."""
    request = RequestFactory().get("/admin/")
    request.user = root
    for model, model_admin in admin.site._registry.items():
        if model is User or model._meta.app_label == "auth":
            continue
        assert not model_admin.has_add_permission(request), model
        assert not model_admin.has_change_permission(request), model
        assert not model_admin.has_delete_permission(request), model


def test_the_api_token_admin_revokes_through_the_service(admin_client: Client, root: User) -> None:
    from auditportal.accounts.models import Role
    from auditportal.accounts.services import api_token_create, role_grant

    role_grant(user=root, role=Role.ADMIN, granted_by=None)
    root.forget_roles()
    token = api_token_create(user=root, account="bot", name="ci", days=1).token
    url = reverse("admin:accounts_apitoken_changelist")
    page = admin_client.get(url)
    assert page.status_code == 200
    assert token.digest.encode() not in page.content
    admin_client.post(url, {"action": "revoke", "_selected_action": [token.pk]})
    token.refresh_from_db()
    assert token.revoked_by == root
