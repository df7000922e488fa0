"""The one re-authentication service (accounts.services.user_reauthenticate): every password asked
for to sign something is checked there, each wrong one recorded, and five within 15 minutes, whatever
they were for, lock the member's signing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from auditportal.accounts import services
from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from tests.factories import PASSWORD


def test_a_wrong_password_is_refused_and_recorded_for_its_purpose(dave: User, erin: User) -> None:
    with pytest.raises(services.ReauthenticationFailed, match="the report was not signed") as refused:
        services.user_reauthenticate(user=dave, password="guess", purpose="report_signature", target=erin)
    assert refused.value.field == "password"
    with pytest.raises(services.ReauthenticationFailed, match="Enter your password: a vote is signed"):
        services.user_reauthenticate(user=dave, password="", purpose="vote", target=erin, data={"round": 2})
    events = Event.objects.filter(actor=dave).order_by("seq")
    assert [(event.verb, event.data) for event in events] == [
        (Verb.REPORT_SIGN_REAUTH_FAILED, {"empty": False}),
        (Verb.REVIEW_VOTE_REAUTH_FAILED, {"round": 2, "empty": True}),
    ]
    services.user_reauthenticate(user=dave, password=PASSWORD, purpose="vote", target=erin)


def test_votes_and_report_signatures_share_one_count_of_failures(dave: User, erin: User, carol: User) -> None:
    for purpose in ("report_signature", "vote", "report_signature", "vote", "report_signature"):
        with pytest.raises(services.ReauthenticationFailed, match="not"):
            services.user_reauthenticate(user=dave, password="guess", purpose=purpose, target=erin)  # type: ignore[arg-type]
    recorded = Event.objects.filter(actor=dave).count()
    assert recorded == services.PASSWORD_FAILURES_ALLOWED
    # Locked for both, the right password included; the refusals while locked are not recorded.
    with pytest.raises(services.ReauthenticationFailed, match="5 wrong passwords in 15 minutes: your votes are locked"):
        services.user_reauthenticate(user=dave, password=PASSWORD, purpose="vote", target=erin)
    with pytest.raises(services.ReauthenticationFailed, match="your report signatures are locked until"):
        services.user_reauthenticate(user=dave, password=PASSWORD, purpose="report_signature", target=erin)
    assert Event.objects.filter(actor=dave).count() == recorded
    # Another member is not locked by dave's failures.
    services.user_reauthenticate(user=carol, password=PASSWORD, purpose="vote", target=erin)
    later = timezone.now() + services.PASSWORD_FAILURE_WINDOW + timedelta(seconds=1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(timezone, "now", lambda: later)
        services.user_reauthenticate(user=dave, password=PASSWORD, purpose="report_signature", target=erin)


def test_it_refuses_to_run_inside_a_transaction(dave: User, erin: User) -> None:
    from django.db import transaction

    with transaction.atomic(), pytest.raises(RuntimeError, match="outside any atomic block"):
        services.user_reauthenticate(user=dave, password=PASSWORD, purpose="vote", target=erin)


@pytest.mark.parametrize("purpose", ["vote", "report_signature"])
def test_a_wrong_password_is_called_not_correct_and_says_nothing_of_whose_it_is(
    dave: User, erin: User, purpose: str
) -> None:
    # Another member's password is refused in the very same words as a guess: the message must not
    # tell the one from the other ("The password is not yours" did).
    erin_password = "erins-own-password-1"
    erin.set_password(erin_password)
    erin.save()
    messages = []
    for attempt in ("guess", erin_password):
        with pytest.raises(services.ReauthenticationFailed) as refused:
            services.user_reauthenticate(user=dave, password=attempt, purpose=purpose, target=erin)  # type: ignore[arg-type]
        messages.append(str(refused.value))
    assert messages[0] == messages[1]
    assert messages[0].startswith("That password is not correct")
    assert "yours" not in messages[0]
