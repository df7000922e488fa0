"""The gate: its answers before and after approval and after revocation, its tokens (hashed, expiring,
revocable, good for the gate only) and the `gate` and `api_token` commands."""

from __future__ import annotations

import hashlib
import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from auditportal.accounts import services as account_services
from auditportal.accounts.models import ApiToken, User
from auditportal.activity.models import Event, Verb
from auditportal.approvals import services
from auditportal.approvals.models import ReviewRequest
from auditportal.fairness.documents.findings import FAIL
from tests.approvals.conftest import approved, hashes, in_review, keys, waive_all
from tests.factories import client_for

GATE = "/api/v1/gate/"


@pytest.fixture
def token(erin: User) -> str:
    return account_services.api_token_create(user=erin, account="deploy-bot", name="release pipeline", days=30).secret


def _ask(token: str, model: str) -> tuple[int, dict[str, object]]:
    response = Client().get(GATE, {"model": model}, HTTP_AUTHORIZATION=f"Token {token}")
    return response.status_code, response.json()


def test_a_token_is_stored_hashed_with_its_expiry_for_a_machine_account_that_cannot_log_in(
    erin: User, token: str
) -> None:
    stored = ApiToken.objects.get()
    assert token not in {stored.digest, stored.token_key}
    assert stored.digest == hashlib.sha512(token.encode()).hexdigest()
    assert token.startswith(stored.token_key)
    assert timedelta(days=29) < stored.expiry - timezone.now() <= timedelta(days=30)
    machine = stored.user
    assert (machine.username, machine.has_usable_password(), machine.is_member) == ("deploy-bot", False, False)
    event = Event.objects.get(verb=Verb.API_TOKEN_CREATED)
    assert event.data["token_key"] == stored.token_key
    assert token not in json.dumps(event.data)


def test_only_administrators_make_tokens_and_never_for_a_persons_account(erin: User, bob: User, dave: User) -> None:
    from django.core.exceptions import PermissionDenied

    with pytest.raises(PermissionDenied, match="Only an administrator"):
        account_services.api_token_create(user=dave, account="bot", name="x", days=1)
    with pytest.raises(account_services.TokenError, match="is a person's account") as refused:
        account_services.api_token_create(user=erin, account=bob.username, name="x", days=1)
    assert refused.value.field == "account"
    with pytest.raises(account_services.TokenError, match="valid for 1 to 365 days"):
        account_services.api_token_create(user=erin, account="bot", name="x", days=0)


def test_the_gate_answers_404_for_unknown_models_false_before_approval_true_after_and_false_after_revocation(
    fair_trial_request: ReviewRequest, token: str, carol: User, dave: User, frank: User
) -> None:
    model = fair_trial_request.model_identifier
    status, body = _ask(token, "no-such-model")
    assert status == 404
    status, body = _ask(token, model)
    assert (status, body["approved"], body["state"], body["request"]) == (200, False, "draft", fair_trial_request.pk)
    request = approved(fair_trial_request, carol, [dave, frank])
    status, body = _ask(token, model)
    assert status == 200
    assert body == {
        "approved": True,
        "request": request.pk,
        "state": "approved",
        "decided_at": request.decided_at.isoformat() if request.decided_at else None,
        "document_sha256": hashes(request),
        "policy_version": request.policy.version,
        "expires": None,
        "revoked_at": None,
        "suspension": None,
    }
    services.review_request_revoke(user=dave, request=request, reason="retracted by the vendor")
    status, body = _ask(token, model)
    assert (status, body["approved"], body["state"]) == (200, False, "revoked")
    assert body["revoked_at"] is not None


def test_an_approval_resting_on_a_waiver_lapses_when_the_waiver_expires(
    unfair_trial_request: ReviewRequest, token: str, carol: User, dave: User, frank: User
) -> None:
    request = in_review(unfair_trial_request, carol)
    waive_all(request, carol, [dave, frank], days=10)
    from tests.approvals.conftest import vote

    vote(request, dave)
    vote(request, frank)
    status, body = _ask(token, request.model_identifier)
    assert body["approved"] is True
    expires = request.waivers.order_by("expires_at").first()
    assert expires is not None
    assert body["expires"] == expires.expires_at.isoformat()
    assert len(keys(request, FAIL)) == request.waivers.count()
    later = expires.expires_at + timedelta(seconds=1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(timezone, "now", lambda: later)
        status, body = _ask(token, request.model_identifier)
    assert (status, body["approved"], body["state"]) == (200, False, "approved")


def test_an_expired_token_is_refused_and_kept(fair_trial_request: ReviewRequest, token: str) -> None:
    ApiToken.objects.update(expiry=timezone.now() - timedelta(seconds=1))
    response = Client().get(GATE, {"model": fair_trial_request.model_identifier}, HTTP_AUTHORIZATION=f"Token {token}")
    assert response.status_code == 401
    assert "expired" in response.json()["detail"]
    assert ApiToken.objects.count() == 1


def test_a_revoked_token_is_refused(fair_trial_request: ReviewRequest, token: str, erin: User) -> None:
    model = fair_trial_request.model_identifier
    assert _ask(token, model)[0] == 200
    account_services.api_token_revoke(user=erin, token=ApiToken.objects.get())
    status, body = _ask(token, model)
    assert (status, body["detail"]) == (401, "This token was revoked.")
    assert Event.objects.filter(verb=Verb.API_TOKEN_REVOKED).count() == 1
    with pytest.raises(account_services.TokenError, match="already revoked"):
        account_services.api_token_revoke(user=erin, token=ApiToken.objects.get())


def test_a_wrong_or_missing_token_is_refused(fair_trial_request: ReviewRequest, token: str) -> None:
    assert _ask(token[:-1] + ("0" if token[-1] != "0" else "1"), fair_trial_request.model_identifier)[0] == 401
    response = Client().get(GATE, {"model": fair_trial_request.model_identifier})
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_a_gate_token_opens_no_other_endpoint(fair_trial_request: ReviewRequest, token: str) -> None:
    header = f"Token {token}"
    for url in (
        reverse("api-policy"),
        reverse("api-review-requests"),
        reverse("api-review-request", args=[fair_trial_request.pk]),
    ):
        assert Client().get(url, HTTP_AUTHORIZATION=header).status_code in (401, 403), url
    submit = reverse("api-review-request-submit", args=[fair_trial_request.pk])
    assert Client().post(submit, HTTP_AUTHORIZATION=header).status_code in (401, 403)
    fair_trial_request.refresh_from_db()
    assert fair_trial_request.state == "draft"


def test_members_may_ask_the_gate_and_outsiders_may_not(
    fair_trial_request: ReviewRequest, carol: User, oscar: User
) -> None:
    url = f"{GATE}?model={fair_trial_request.model_identifier}"
    assert client_for(carol).get(url).json()["approved"] is False
    assert client_for(oscar).get(url).status_code == 403
    assert client_for(carol).get(GATE).status_code == 400


def test_the_gate_command_exits_0_only_when_approved(
    fair_trial_request: ReviewRequest, carol: User, dave: User, frank: User
) -> None:
    model = fair_trial_request.model_identifier

    def gate(model: str) -> tuple[int, str]:
        out = io.StringIO()
        try:
            call_command("gate", "--model", model, stdout=out, stderr=io.StringIO())
        except SystemExit as exit:
            return int(exit.code or 0), out.getvalue()
        return 0, out.getvalue()

    assert gate("unknown")[0] == 1
    assert gate(model)[0] == 1
    approved(fair_trial_request, carol, [dave, frank])
    code, out = gate(model)
    assert code == 0
    assert json.loads(out)["approved"] is True
    services.review_request_revoke(user=dave, request=fair_trial_request, reason="recalled")
    assert gate(model)[0] == 1


def test_the_api_token_command_creates_lists_and_revokes(erin: User, fair_trial_request: ReviewRequest) -> None:
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "api_token",
        "create",
        "--account",
        "ci",
        "--name",
        "CI",
        "--days",
        "7",
        "--user",
        "erin",
        stdout=out,
        stderr=err,
    )
    secret = out.getvalue().strip()
    assert "shown once" in err.getvalue()
    assert _ask(secret, fair_trial_request.model_identifier)[0] == 200
    token = ApiToken.objects.get()
    listing = io.StringIO()
    call_command("api_token", "list", stdout=listing)
    assert f"{token.pk}\tci\tCI\tgate" in listing.getvalue()
    assert secret not in listing.getvalue()
    call_command("api_token", "revoke", str(token.pk), "--user", "erin", stdout=io.StringIO())
    assert _ask(secret, fair_trial_request.model_identifier)[0] == 401
    with pytest.raises(CommandError, match="--days: A token is valid for 1 to 365 days"):
        call_command("api_token", "create", "--account", "ci", "--name", "CI", "--days", "0", "--user", "erin")
