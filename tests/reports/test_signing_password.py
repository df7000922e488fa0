"""Signing a report asks for the member's password through the one re-authentication service: each
wrong one is recorded, and five within 15 minutes (votes' included) lock the form."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from auditportal.accounts import services as account_services
from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.audits.models import PredictionAudit
from auditportal.reports import services
from tests.factories import PASSWORD, client_for
from tests.reports.helpers import decided_context

pytestmark = pytest.mark.django_db


def test_the_sign_form_locks_after_five_wrong_passwords_votes_included(
    audit: PredictionAudit, member_dave: User
) -> None:
    report = services.report_generate(context=decided_context(audit, None, [member_dave]))
    client = client_for(member_dave)
    sign = reverse("reports:sign", args=[report.pk])
    # One wrong password at a vote counts with the form's.
    with pytest.raises(account_services.ReauthenticationFailed):
        account_services.user_reauthenticate(user=member_dave, password="guess", purpose="vote", target=report)
    for _ in range(account_services.PASSWORD_FAILURES_ALLOWED - 1):
        wrong = client.post(sign, {"password": "guess"}, follow=True)
        assert wrong.redirect_chain[-1][1] == 303
        assert "That password is not correct; the report was not signed." in wrong.content.decode()
    refused = client.post(sign, {"password": PASSWORD}, follow=True)
    assert refused.redirect_chain[-1][1] == 303
    page = refused.content.decode()
    assert "5 wrong passwords in 15 minutes: your report signatures are locked until" in page
    assert report.revisions.count() == 1
    failures = Event.objects.filter(verb=Verb.REPORT_SIGN_REAUTH_FAILED, actor=member_dave)
    assert failures.count() == account_services.PASSWORD_FAILURES_ALLOWED - 1
    assert {event.target_id for event in failures} == {str(report.pk)}
    later = timezone.now() + account_services.PASSWORD_FAILURE_WINDOW + timedelta(seconds=1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(timezone, "now", lambda: later)
        assert client.post(sign, {"password": PASSWORD}).status_code == 302
    assert report.revisions.count() == 2


def test_the_service_asks_for_the_password(audit: PredictionAudit, member_dave: User) -> None:
    report = services.report_generate(context=decided_context(audit, None, [member_dave]))
    with pytest.raises(account_services.ReauthenticationFailed, match="Enter your password: a report is signed"):
        services.report_sign_member(report=report, member=member_dave, password="")
    assert Event.objects.filter(verb=Verb.REPORT_SIGN_REAUTH_FAILED, actor=member_dave).get().data == {"empty": True}
    assert report.revisions.count() == 1
