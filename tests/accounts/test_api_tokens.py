"""API tokens for machine accounts: an API token acts on /api/v1/ with its account's roles (a CI
pipeline auditing predictions), a gate token only on the gate; neither opens the other's API, nor
a page, and a revoked or expired one is refused."""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from auditportal.accounts import services
from auditportal.accounts.models import ApiToken, Role, TokenScope, User
from auditportal.accounts.services import role_grant
from auditportal.activity.models import Event, Verb
from auditportal.audits.models import PredictionAudit
from tests.realworld import recidivism_csv

AUDITS = "/api/v1/audits/predictions/"
EXPERIMENTS = "/api/v1/experiments/"
GATE = "/api/v1/gate/"


def _token(admin: User, scope: TokenScope, account: str = "ci-bot") -> str:
    return services.api_token_create(user=admin, account=account, name="nightly audit", days=30, scope=scope).secret


def _client(token: str) -> Client:
    # CSRF checks on, as for any client that is not Django's test client: a token needs none.
    return Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Token {token}")


def test_an_api_token_acts_with_its_accounts_roles_and_posts_an_audit_without_csrf(
    erin: User, dataset_storage: Path, tmp_path: Path
) -> None:
    client = _client(_token(erin, TokenScope.API))
    machine = User.objects.get(username="ci-bot")
    assert (machine.has_usable_password(), machine.is_member) == (False, False)

    path = recidivism_csv(tmp_path / "compas.csv")

    def post() -> Any:  # the test client's response
        upload = SimpleUploadedFile(path.name, path.read_bytes(), content_type="text/csv")
        data = {"file": upload, "label": "two_year_recid", "prediction": "high_risk", "attributes": ["sex"]}
        return client.post(AUDITS, data)

    refused = post()  # the account is known, but holds no role yet
    assert refused.status_code == 403, refused.content.decode()
    assert refused.json()["detail"] == "Only an ML engineer or a reviewer can run prediction audits."
    assert not PredictionAudit.objects.exists()

    role_grant(user=machine, role=Role.ML_ENGINEER, granted_by=erin)
    response = post()
    assert response.status_code == 201, response.content.decode()
    audit = PredictionAudit.objects.get()
    assert audit.created_by == machine
    assert Event.objects.filter(verb=Verb.PREDICTION_AUDIT_CREATED, actor=machine).count() == 1


def test_a_gate_token_opens_only_the_gate_and_an_api_token_not_the_gate(erin: User) -> None:
    gate = _client(_token(erin, TokenScope.GATE, account="deploy-bot"))
    api = _client(_token(erin, TokenScope.API))
    role_grant(user=User.objects.get(username="ci-bot"), role=Role.REVIEWER, granted_by=erin)

    response = gate.get(EXPERIMENTS)
    assert response.status_code == 401
    assert "scope is 'gate'" in response.json()["detail"]
    assert "not 'api'" in response.json()["detail"]
    assert gate.get(GATE, {"model": "none"}).status_code == 404  # the gate itself answers

    response = api.get(GATE, {"model": "none"})
    assert response.status_code == 401
    assert "scope is 'api'" in response.json()["detail"]
    assert api.get(EXPERIMENTS).status_code == 200


def test_a_token_opens_no_page(erin: User) -> None:
    token = _token(erin, TokenScope.API)
    role_grant(user=User.objects.get(username="ci-bot"), role=Role.ML_ENGINEER, granted_by=erin)
    response = _client(token).get("/experiments/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


@pytest.mark.parametrize("how", ["revoked", "expired", "garbled"])
def test_a_revoked_expired_or_garbled_api_token_is_refused(erin: User, how: str) -> None:
    token = _token(erin, TokenScope.API)
    role_grant(user=User.objects.get(username="ci-bot"), role=Role.ML_ENGINEER, granted_by=erin)
    stored = ApiToken.objects.get()
    if how == "revoked":
        services.api_token_revoke(user=erin, token=stored)
    elif how == "expired":
        ApiToken.objects.filter(pk=stored.pk).update(expiry=timezone.now() - timedelta(seconds=1))
    else:
        token = token[:-4] + "zzzz"
    response = _client(token).get(EXPERIMENTS)
    assert response.status_code == 401
    assert (
        response.json()["detail"]
        == {
            "revoked": "This token was revoked.",
            "expired": response.json()["detail"],  # names the time: checked below
            "garbled": "Invalid token.",
        }[how]
    )
    if how == "expired":
        assert response.json()["detail"].startswith("This token expired at ")


def test_an_api_token_may_go_to_a_machine_account_with_roles_a_gate_token_may_not(erin: User, bob: User) -> None:
    _token(erin, TokenScope.API)
    machine = User.objects.get(username="ci-bot")
    role_grant(user=machine, role=Role.ML_ENGINEER, granted_by=erin)
    _token(erin, TokenScope.API)  # a second token for the same account, now with a role
    with pytest.raises(services.TokenError, match="holds a role") as refused:
        _token(erin, TokenScope.GATE)
    assert refused.value.field == "account"
    with pytest.raises(services.TokenError, match="is a person's account"):
        _token(erin, TokenScope.API, account=bob.username)
    with pytest.raises(services.TokenError, match="Unknown token scope 'admin'") as unknown:
        services.api_token_create(user=erin, account="x-bot", name="x", days=1, scope="admin")
    assert unknown.value.field == "scope"
    assert list(ApiToken.objects.values_list("scope", flat=True)) == [TokenScope.API, TokenScope.API]
    created = Event.objects.filter(verb=Verb.API_TOKEN_CREATED).order_by("id")
    assert [event.data["scope"] for event in created] == ["api", "api"]


def test_the_command_makes_an_api_token_and_says_the_account_needs_a_role(erin: User) -> None:
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "api_token", "create", "--account", "ci-bot", "--name", "nightly", "--scope", "api", "--user", "erin",
        stdout=out, stderr=err,
    )  # fmt: skip
    secret = out.getvalue().strip()
    assert ApiToken.objects.get().scope == TokenScope.API
    assert "scope api" in err.getvalue()
    assert "grant_role ci-bot" in err.getvalue()
    response = _client(secret).get(EXPERIMENTS)
    assert (response.status_code, response.json()["results"]) == (200, [])  # no role: sees nothing
    with pytest.raises(CommandError, match="invalid choice: 'root'"):
        call_command("api_token", "create", "--account", "x", "--name", "y", "--scope", "root", "--user", "erin")
