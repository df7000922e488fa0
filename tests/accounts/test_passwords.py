"""Nobody sets another person's password: an administrator forces a reset, and the member sets the new
password from a one-time link mailed to them; their next vote follows that password alone."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse

from auditportal.accounts import services, tasks
from auditportal.accounts.models import Role, User
from auditportal.activity.models import Event, Verb
from auditportal.approvals.models import RequestState, ReviewRequest
from auditportal.approvals.services import ReauthenticationFailed
from auditportal.fairness.errors import UserError
from auditportal.outbox.models import OutboxMessage
from tests.approvals.conftest import fair_trial_request, in_review, runs, vote
from tests.experiments.conftest import demo_version, fake_trainer
from tests.factories import PASSWORD, client_for, make_user

__all__ = ["demo_version", "fair_trial_request", "fake_trainer", "runs"]

NEW_PASSWORD = "my own new passphrase 42"


def mailed_links() -> list[str]:
    """Run the password-link mails queued so far (as a worker would) and return the links they carried."""
    for row in OutboxMessage.objects.filter(name=services.MAIL_ACCOUNT_LINK_TASK).order_by("pk"):
        tasks.password_link_mail_task.apply(kwargs=row.kwargs).get()
        row.delete()
    links = [re.search(r"https?://\S+/account/password/set/\S+/", str(m.body)) for m in mail.outbox]
    return [link.group(0) for link in links if link is not None]


def post_form(client: Client, path: str, data: dict[str, str]) -> int:
    """The status of posting ``data`` as a browser posts a form without a file (a multipart body is
    refused before login)."""
    response = client.post(path, urlencode(data), content_type="application/x-www-form-urlencoded")
    return response.status_code


def path_of(link: str) -> str:
    return link[link.index("/account/") :]


def test_a_forced_reset_takes_the_password_away_and_mails_the_owner_a_link(erin: User, dave: User) -> None:
    services.user_password_reset_force(user=dave, reset_by=erin)
    dave.refresh_from_db()
    assert not dave.check_password(PASSWORD)
    assert not dave.has_usable_password()
    event = Event.objects.get(verb=Verb.USER_PASSWORD_RESET_FORCED)
    assert (event.actor, event.target_id, event.data) == (erin, str(dave.pk), {"email": "dave@example.org"})
    [link] = mailed_links()
    assert mail.outbox[0].to == ["dave@example.org"]
    assert "Your old password no longer works" in mail.outbox[0].body
    # The administrator's own mail, the event and the outbox row hold no link.
    assert path_of(link).split("/")[-2] not in str(event.data)
    assert not OutboxMessage.objects.filter(kwargs__icontains=path_of(link).split("/")[-2]).exists()


def test_after_a_forced_reset_the_old_password_no_longer_signs_a_vote_and_the_members_new_one_does(
    erin: User, carol: User, dave: User, fair_trial_request: ReviewRequest
) -> None:
    request = in_review(fair_trial_request, carol)
    services.user_password_reset_force(user=dave, reset_by=erin)
    with pytest.raises(ReauthenticationFailed):
        vote(request, User.objects.get(pk=dave.pk))  # the old password: refused (and recorded)
    [link] = mailed_links()
    anonymous = Client()
    assert anonymous.get(path_of(link)).status_code == 200
    assert (
        post_form(anonymous, path_of(link), {"new_password": NEW_PASSWORD, "new_password_again": NEW_PASSWORD}) == 302
    )
    dave.refresh_from_db()
    assert dave.check_password(NEW_PASSWORD)
    set_event = Event.objects.get(verb=Verb.USER_PASSWORD_CHANGED)
    assert (set_event.actor, set_event.data) == (dave, {"how": "password link"})
    # The link is spent.
    assert anonymous.get(path_of(link)).status_code == 404
    assert post_form(anonymous, path_of(link), {"new_password": "x" * 20, "new_password_again": "x" * 20}) == 404
    dave.refresh_from_db()
    assert dave.check_password(NEW_PASSWORD)
    # The member's own new password signs.
    from auditportal.approvals import services as approvals

    approvals.review_vote_cast(
        user=dave,
        request=request,
        choice="approve",
        reason="fit",
        password=NEW_PASSWORD,
        document_sha256=sorted(request.documents.values_list("sha256", flat=True)),
    )
    assert Event.objects.filter(verb=Verb.REVIEW_VOTE_CAST, actor=dave).count() == 1
    request.refresh_from_db()
    assert request.state == RequestState.IN_REVIEW  # one vote of two


def test_a_forced_reset_ends_the_members_sessions(erin: User, dave: User) -> None:
    client = client_for(dave)
    assert client.get(reverse("approvals:queue")).status_code == 200
    services.user_password_reset_force(user=dave, reset_by=erin)
    assert client.get(reverse("approvals:queue")).status_code == 302  # to the login page


@pytest.mark.parametrize("name", ["dave", "oscar"])
def test_only_an_administrator_forces_a_reset(name: str, dave: User, request: pytest.FixtureRequest) -> None:
    acting = request.getfixturevalue(name)
    with pytest.raises(Exception, match="Only an administrator can force a password reset"):
        services.user_password_reset_force(user=dave, reset_by=acting)
    dave.refresh_from_db()
    assert dave.check_password(PASSWORD)


def test_an_administrator_creates_an_account_without_a_password(erin: User) -> None:
    zoe = services.user_create(username="zoe", email="zoe@example.org", roles=[Role.REVIEWER], created_by=erin)
    assert not zoe.has_usable_password()
    assert zoe.has_role(Role.REVIEWER)
    created = Event.objects.get(verb=Verb.USER_CREATED)
    assert (created.actor, created.data) == (erin, {"username": "zoe", "email": "zoe@example.org"})
    [link] = mailed_links()
    assert "An account named zoe was made for you" in mail.outbox[0].body
    assert post_form(Client(), path_of(link), {"new_password": NEW_PASSWORD, "new_password_again": NEW_PASSWORD}) == 302
    zoe.refresh_from_db()
    assert zoe.check_password(NEW_PASSWORD)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"username": "zoe", "email": ""}, "The e-mail address is required"),
        ({"username": "zoe", "email": "not-an-address"}, "'not-an-address' is not an e-mail address."),
        ({"username": "dave", "email": "d@example.org"}, "There is already an account named 'dave'."),
        ({"username": "", "email": "d@example.org"}, "The username is required."),
    ],
)
def test_account_creation_refuses_bad_input(erin: User, dave: User, fields: dict[str, str], message: str) -> None:
    with pytest.raises(UserError, match=re.escape(message)):
        services.user_create(created_by=erin, username=fields["username"], email=fields["email"])
    assert not Event.objects.filter(verb=Verb.USER_CREATED).exists()


def test_a_member_changes_their_own_password_with_the_current_one(dave: User) -> None:
    client = client_for(dave)
    url = reverse("accounts:password-change")
    assert client.get(url).status_code == 200
    wrong = client.post(
        url, {"old_password": "guess", "new_password": NEW_PASSWORD, "new_password_again": NEW_PASSWORD}
    )
    assert wrong.status_code == 400
    assert b"The current password is not right." in wrong.content
    response = client.post(
        url, {"old_password": PASSWORD, "new_password": NEW_PASSWORD, "new_password_again": NEW_PASSWORD}
    )
    assert response.status_code == 302
    dave.refresh_from_db()
    assert dave.check_password(NEW_PASSWORD)
    assert client.get(reverse("approvals:queue")).status_code == 200  # this session goes on
    event = Event.objects.get(verb=Verb.USER_PASSWORD_CHANGED)
    assert (event.actor, event.target_id, event.data) == (dave, str(dave.pk), {"how": "current password"})


def test_activation_flags_and_email_are_services_with_events(erin: User, dave: User, oscar: User) -> None:
    client = client_for(dave)
    assert services.user_deactivate(user=dave, by=erin)
    assert client.get(reverse("approvals:queue")).status_code == 302  # the session ended with it
    assert not services.user_deactivate(user=dave, by=erin)
    assert services.user_activate(user=dave, by=erin)
    with pytest.raises(UserError, match="You cannot deactivate your own account"):
        services.user_deactivate(user=erin, by=erin)
    assert services.user_flags_set(user=oscar, by=erin, is_staff=True)
    flags = Event.objects.get(verb=Verb.USER_FLAGS_CHANGED)
    assert (flags.actor, flags.data) == (erin, {"is_staff": [False, True]})
    assert [e.verb for e in Event.objects.filter(actor=erin).order_by("seq")] == [
        Verb.USER_DEACTIVATED,
        Verb.USER_ACTIVATED,
        Verb.USER_FLAGS_CHANGED,
    ]
    with pytest.raises(Exception, match="Only an administrator can change admin-site access"):
        services.user_flags_set(user=oscar, by=dave, is_superuser=True)


def test_an_administrator_cannot_point_a_used_account_at_another_mailbox(erin: User, dave: User) -> None:
    # Otherwise: change dave's address to one's own, force a reset, set dave's password, sign as dave.
    with pytest.raises(UserError, match=r"dave has used their account: only they can change its e-mail address\."):
        services.user_email_change(user=dave, by=erin, email="erin-private@example.org")
    with pytest.raises(UserError, match=r"The password is not right\."):
        services.user_email_change(user=dave, by=dave, email="dave@new.example", password="guess")
    services.user_email_change(user=dave, by=dave, email="dave@new.example", password=PASSWORD)
    event = Event.objects.get(verb=Verb.USER_EMAIL_CHANGED)
    assert (event.actor, event.data) == (dave, {"from": "dave@example.org", "to": "dave@new.example"})
    fresh = services.user_create(username="zoe", email="zoe@exmaple.org", created_by=erin)
    services.user_email_change(user=fresh, by=erin, email="zoe@example.org")  # a typo, before first use
    assert User.objects.get(pk=fresh.pk).email == "zoe@example.org"


def test_a_bad_or_forged_link_is_refused(dave: User) -> None:
    assert Client().get("/account/password/set/MQ/forged-token/").status_code == 404
    assert Client().get("/account/password/set/%%%/x/").status_code == 404
    assert make_user("zed").check_password(PASSWORD)
