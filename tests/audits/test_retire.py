"""A prediction audit is never deleted; it can be retired, once, with a reason and an event."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse

from auditportal.accounts.models import Role, User
from auditportal.activity.models import Event
from auditportal.audits import services
from auditportal.audits.models import PredictionAudit
from auditportal.fairness.errors import UserError
from tests.factories import PredictionAuditFactory, client_for, make_user

REFUSED = "Only the audit's author, a reviewer or an administrator can retire a prediction audit."


@pytest.fixture
def audit(bob: User, dataset_storage: Path) -> PredictionAudit:
    return PredictionAuditFactory.create(created_by=bob)


@pytest.fixture
def frank(db: None) -> User:
    """Another ML engineer, who did not run the audit."""
    return make_user("frank", [Role.ML_ENGINEER])


# --------------------------------------------------------------------------- service


@pytest.mark.parametrize("fixture_name", ["bob", "carol", "erin"])
def test_the_author_a_reviewer_or_an_administrator_retires_an_audit(
    fixture_name: str, audit: PredictionAudit, request: pytest.FixtureRequest
) -> None:
    user: User = request.getfixturevalue(fixture_name)
    services.prediction_audit_retire(user=user, audit=audit, reason="  Labels were shifted by one row.  ")
    audit.refresh_from_db()
    assert audit.is_retired
    assert audit.retired_by == user
    assert audit.retired_reason == "Labels were shifted by one row."
    assert audit.result["rows"] == 12  # the evidence itself stays as it was
    event = Event.objects.get(verb="prediction_audit.retired")
    assert (event.actor, event.target_type, event.target_id) == (user, "audits.predictionaudit", str(audit.pk))
    assert event.data == {"reason": "Labels were shifted by one row."}


@pytest.mark.parametrize("fixture_name", ["frank", "alice", "dave", "oscar"])
def test_anyone_else_is_refused(fixture_name: str, audit: PredictionAudit, request: pytest.FixtureRequest) -> None:
    user: User = request.getfixturevalue(fixture_name)
    with pytest.raises(PermissionDenied, match=f"^{REFUSED}$"):
        services.prediction_audit_retire(user=user, audit=audit, reason="wrong")
    audit.refresh_from_db()
    assert not audit.is_retired
    assert not Event.objects.filter(verb="prediction_audit.retired").exists()


@pytest.mark.parametrize("reason", ["", "   \n"])
def test_a_reason_is_required(reason: str, audit: PredictionAudit, bob: User) -> None:
    with pytest.raises(UserError) as caught:
        services.prediction_audit_retire(user=bob, audit=audit, reason=reason)
    assert (str(caught.value), caught.value.field) == ("Say why this audit is retired.", "reason")
    audit.refresh_from_db()
    assert not audit.is_retired


def test_an_audit_is_retired_only_once(audit: PredictionAudit, bob: User, carol: User) -> None:
    services.prediction_audit_retire(user=bob, audit=audit, reason="first")
    stale = PredictionAudit.objects.get(pk=audit.pk)
    stale.retired_at = None  # a copy loaded before the first retirement
    with pytest.raises(UserError, match=r"^This audit was already retired on \d{4}-\d\d-\d\d \d\d:\d\d UTC by bob\.$"):
        services.prediction_audit_retire(user=carol, audit=stale, reason="second")
    audit.refresh_from_db()
    assert (audit.retired_by, audit.retired_reason) == (bob, "first")
    assert Event.objects.filter(verb="prediction_audit.retired").count() == 1


def test_the_retirement_and_its_event_commit_together(
    audit: PredictionAudit, bob: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(**kwargs: object) -> None:
        raise RuntimeError("the log is down")

    monkeypatch.setattr(services, "event_record", fail)
    with pytest.raises(RuntimeError):
        services.prediction_audit_retire(user=bob, audit=audit, reason="bad file")
    audit.refresh_from_db()
    assert not audit.is_retired


# --------------------------------------------------------------------------- pages


def test_the_author_sees_the_retire_form_and_others_do_not(audit: PredictionAudit, bob: User, frank: User) -> None:
    url = reverse("audits:prediction", args=[audit.pk])
    assert b"Retire this audit" in client_for(bob).get(url).content
    assert b"Retire this audit" not in client_for(frank).get(url).content


def test_retiring_on_the_page_shows_a_banner_and_hides_the_form(audit: PredictionAudit, carol: User) -> None:
    client = client_for(carol)
    response = client.post(
        reverse("audits:prediction-retire", args=[audit.pk]), {"reason": "Scores came from the wrong model."}
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("audits:prediction", args=[audit.pk])
    page = client.get(response["Location"]).content.decode()
    audit.refresh_from_db()
    assert audit.retired_at is not None
    when = audit.retired_at.strftime("%Y-%m-%d %H:%M")
    assert f"<strong>Retired</strong> on {when} UTC by carol: Scores came from the wrong model." in page
    assert f"Prediction audit #{audit.pk} is retired." in page
    assert "Retire this audit" not in page


def test_the_page_says_why_an_empty_reason_is_refused(audit: PredictionAudit, bob: User) -> None:
    page = reverse("audits:prediction", args=[audit.pk])
    response = client_for(bob).post(reverse("audits:prediction-retire", args=[audit.pk]), {"reason": " "}, follow=True)
    # Back on the audit's page (303, then 200), not on the POST-only retire URL.
    assert response.redirect_chain == [(page + "#retire", 303)]
    assert response.status_code == 200
    assert b"Say why this audit is retired." in response.content
    audit.refresh_from_db()
    assert not audit.is_retired


def test_a_refused_retirement_leaves_the_address_bar_on_the_page_and_shows_its_error_once(
    audit: PredictionAudit, bob: User
) -> None:
    client = client_for(bob)
    page = reverse("audits:prediction", args=[audit.pk])
    response = client.post(reverse("audits:prediction-retire", args=[audit.pk]), {"reason": ""})
    assert (response.status_code, response["Location"]) == (303, page + "#retire")
    shown = client.get(page).content.decode()
    assert '<details class="card retire" id="retire" open>' in shown
    assert "Say why this audit is retired." in shown
    # A reload does not post again, and the error was for that one visit.
    again = client.get(page)
    assert again.status_code == 200
    assert "Say why this audit is retired." not in again.content.decode()
    audit.refresh_from_db()
    assert not audit.is_retired


def test_the_page_refuses_others_and_hides_the_audit_from_outsiders(
    audit: PredictionAudit, frank: User, oscar: User
) -> None:
    url = reverse("audits:prediction-retire", args=[audit.pk])
    assert client_for(frank).post(url, {"reason": "x"}).status_code == 403
    assert client_for(oscar).post(url, {"reason": "x"}).status_code == 404
    assert client_for(frank).get(url).status_code == 405
    audit.refresh_from_db()
    assert not audit.is_retired


def test_the_list_marks_retired_audits(audit: PredictionAudit, bob: User, dataset_storage: Path) -> None:
    kept = PredictionAuditFactory.create(created_by=bob)
    services.prediction_audit_retire(user=bob, audit=audit, reason="duplicate upload")
    page = client_for(bob).get(reverse("audits:predictions")).content.decode()
    assert page.count('<span class="badge retired"') == 1
    assert f'<tr class="retired">\n    <td><a href="{reverse("audits:prediction", args=[audit.pk])}">' in page
    assert f'<tr>\n    <td><a href="{reverse("audits:prediction", args=[kept.pk])}">' in page


# --------------------------------------------------------------------------- API


def test_the_api_retires_and_returns_the_document_with_its_retirement(audit: PredictionAudit, carol: User) -> None:
    client = client_for(carol)
    response = client.post(
        f"/api/v1/audits/predictions/{audit.pk}/retire/", {"reason": "Wrong file."}, content_type="application/json"
    )
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == audit.pk
    assert body["retired"]["by"] == "carol"
    assert body["retired"]["reason"] == "Wrong file."
    assert body["rows"] == 12
    assert client.get(f"/api/v1/audits/predictions/{audit.pk}/").json()["retired"] == body["retired"]
    listed = client.get("/api/v1/audits/predictions/").json()["results"]
    assert listed[0]["retired_at"] == body["retired"]["at"].replace("+00:00", "Z")


def test_the_api_answers_400_403_and_404(audit: PredictionAudit, bob: User, frank: User, oscar: User) -> None:
    url = f"/api/v1/audits/predictions/{audit.pk}/retire/"
    empty = client_for(bob).post(url, {"reason": ""}, content_type="application/json")
    assert (empty.status_code, empty.json()) == (400, {"detail": "Say why this audit is retired.", "field": "reason"})
    missing = client_for(bob).post(url, {}, content_type="application/json")
    assert missing.status_code == 400
    assert client_for(frank).post(url, {"reason": "x"}, content_type="application/json").status_code == 403
    assert client_for(oscar).post(url, {"reason": "x"}, content_type="application/json").status_code == 404
    assert client_for(bob).get(f"/api/v1/audits/predictions/{audit.pk}/").json()["retired"] is None
    client_for(bob).post(url, {"reason": "first"}, content_type="application/json")
    again = client_for(bob).post(url, {"reason": "second"}, content_type="application/json")
    assert again.status_code == 400
    assert again.json()["detail"].startswith("This audit was already retired on ")
