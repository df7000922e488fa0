"""A token issued while tokens lived in the approvals app still opens after the migrations that move the
model to accounts (accounts/0002, approvals/0003): same table, same rows, same secret."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.utils import timezone
from knox.models import get_digest_token
from knox.settings import CONSTANTS

from auditportal.accounts.models import ApiToken
from tests.factories import make_user
from tests.migrating import historical_state, migrate, migrate_to_latest

BEFORE = [("accounts", "0001_initial"), ("approvals", "0002_api_token_scope")]
AFTER = [("accounts", "0002_api_token_from_approvals"), ("approvals", "0003_api_token_to_accounts")]


@pytest.mark.slow  # migrates backwards and forwards over every later migration (7-23 s here)
@pytest.mark.django_db(transaction=True)
def test_a_token_made_before_the_move_to_accounts_still_opens_the_gate_and_the_api() -> None:
    machine = make_user("deploy-bot")
    ContentType.objects.filter(app_label="accounts", model="apitoken").delete()
    # As the approvals app had it: its content type, which the admin's permissions point at.
    old_type = ContentType.objects.create(app_label="approvals", model="apitoken")
    migrate(BEFORE)
    try:
        old_apps = historical_state(BEFORE).apps
        assert "apitoken" not in {model._meta.model_name for model in old_apps.get_app_config("accounts").get_models()}
        OldToken = old_apps.get_model("approvals", "ApiToken")
        secrets = {}
        for scope in ("gate", "api"):
            digest, secret = get_digest_token()
            OldToken.objects.create(
                digest=digest,
                token_key=secret[: CONSTANTS.TOKEN_KEY_LENGTH],
                user_id=machine.pk,
                expiry=timezone.now() + timedelta(days=30),
                name=f"issued before the move ({scope})",
                scope=scope,
            )
            secrets[scope] = secret
    finally:
        migrate(AFTER)
        # And on to the newest state, which the rest of this test and the tests after it expect.
        migrate_to_latest()

    assert sorted(ApiToken.objects.values_list("scope", "user__username")) == [
        ("api", "deploy-bot"),
        ("gate", "deploy-bot"),
    ]
    gate = Client().get("/api/v1/gate/", {"model": "credit-v3"}, HTTP_AUTHORIZATION=f"Token {secrets['gate']}")
    # Authenticated: the gate answers the question (no request names this model) instead of a 401.
    assert gate.status_code == 404, gate.content.decode()
    assert gate.json()["detail"] == "No review request names the model 'credit-v3'."
    # The API token authenticates: its account, which holds no role, sees an empty list instead of a 401.
    api = Client().get("/api/v1/audits/predictions/", HTTP_AUTHORIZATION=f"Token {secrets['api']}")
    assert (api.status_code, api.json()["count"]) == (200, 0), api.content.decode()
    wrong = Client().get("/api/v1/gate/", {"model": "credit-v3"}, HTTP_AUTHORIZATION=f"Token {secrets['api']}")
    assert wrong.status_code == 401
    # The content type moved with the model: permissions and admin history keep pointing at tokens.
    old_type.refresh_from_db()
    assert (old_type.app_label, old_type.model) == ("accounts", "apitoken")
