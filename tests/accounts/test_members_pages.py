"""The members pages (/account/members/): administrators list, create and manage accounts in the portal,
each change through accounts.services with its event; everyone else is refused."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from auditportal.accounts import services
from auditportal.accounts.models import Role, RoleGrantProposal, RoleProposalOutcome, User
from auditportal.activity.models import Event, Verb
from auditportal.outbox.models import OutboxMessage
from tests.accounts.test_passwords import mailed_links, path_of
from tests.factories import PASSWORD, client_for, make_user

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a passphrase only newbie knows"


def post(client: Client, path: str, data: dict[str, Any] | None = None) -> Any:
    """As a browser posts a form without a file (the test client's response, with its request)."""
    return client.post(path, urlencode(data or {}, doseq=True), content_type="application/x-www-form-urlencoded")


def page(client: Client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def messages_of(client: Client, path: str) -> list[str]:
    return re.findall(r'<li class="(?:success|error)">(.*?)</li>', page(client, path), flags=re.S)


def member_url(user: User, action: str = "") -> str:
    return f"/account/members/{user.pk}/{action}"


@pytest.fixture
def iris(db: None) -> User:
    """A second administrator."""
    return make_user("iris", [Role.ADMIN])


# Who may open the pages: administrators only.

PAGES = ["/account/members/", "/account/members/new/"]


@pytest.mark.parametrize("path", PAGES)
def test_a_visitor_is_sent_to_log_in(path: str, db: None) -> None:
    response = Client().get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next={path}"


@pytest.mark.parametrize("role", [role for role in Role if role != Role.ADMIN])
def test_members_who_are_not_administrators_are_refused_every_page_and_action(role: Role, dave: User) -> None:
    member = make_user(f"holds-{role.value}", [role])
    client = client_for(member)
    for path in [*PAGES, member_url(dave)]:
        response = client.get(path)
        assert response.status_code == 403, path
        assert "Only an administrator can" in response.content.decode()
    for action, data in (
        ("roles/grant/", {"role": "reviewer"}),
        ("roles/revoke/", {"role": "ethics_committee"}),
        ("active/", {"active": "no"}),
        ("password-reset/", {}),
        ("email/", {"email": "x@example.org"}),
    ):
        assert post(client, member_url(dave, action), data).status_code == 403, action
    assert post(client, "/account/members/new/", {"username": "x", "email": "x@example.org"}).status_code == 403
    assert set(User.objects.get(pk=dave.pk).roles) == {Role.ETHICS_COMMITTEE.value}
    assert not User.objects.filter(username="x").exists()


def test_an_account_without_a_role_and_a_superuser_without_one_are_refused(oscar: User, dave: User) -> None:
    root = make_user("root", [])
    root.is_staff = root.is_superuser = True
    root.save()
    for user in (oscar, root):
        assert client_for(user).get("/account/members/").status_code == 403
        assert client_for(user).get(member_url(dave)).status_code == 403


def test_the_members_link_is_in_the_navigation_of_administrators_only(erin: User, dave: User) -> None:
    assert 'href="/account/members/"' in page(client_for(erin), "/")
    assert 'href="/account/members/"' not in page(client_for(dave), "/")


def test_an_unknown_account_is_404_to_an_administrator(erin: User) -> None:
    assert client_for(erin).get("/account/members/999999/").status_code == 404
    assert post(client_for(erin), "/account/role-proposals/999999/confirm/").status_code == 404


# The list.


def test_the_list_shows_each_account_with_its_roles_status_and_last_login(erin: User, dave: User, carol: User) -> None:
    dave.first_name, dave.last_name, dave.last_login = "Dave", "Okafor", timezone.now()
    dave.save()
    carol.is_active = False
    carol.save()
    body = page(client_for(erin), "/account/members/")
    row = re.search(r'<tr data-member="dave">(.*?)</tr>', body, flags=re.S)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), flags=re.S)
    assert f'href="{member_url(dave)}"' in cells[0]
    assert cells[1] == "Dave Okafor"
    assert cells[2] == "dave@example.org"
    assert "Ethics-committee member" in cells[3]
    assert cells[4] == "yes"
    assert dave.last_login.strftime("%Y-%m-%d") in cells[5]
    assert '<tr data-member="carol" class="inactive">' in body
    assert "never" in re.search(r'<tr data-member="carol".*?</tr>', body, flags=re.S).group(0)  # type: ignore[union-attr]


def _listed(client: Client, query: str) -> list[str]:
    return re.findall(r'<tr data-member="([^"]+)"', page(client, "/account/members/" + query))


def test_the_list_filters_by_role_by_activity_and_by_name(
    erin: User, dave: User, carol: User, oscar: User, iris: User
) -> None:
    dave.first_name = "Davina"
    dave.save()
    carol.is_active = False
    carol.save()
    client = client_for(erin)
    assert _listed(client, "?role=admin") == ["erin", "iris"]
    assert _listed(client, "?role=none") == ["oscar"]
    assert _listed(client, "?active=no") == ["carol"]
    assert "carol" not in _listed(client, "?active=yes")
    assert _listed(client, "?q=davi") == ["dave"]
    assert _listed(client, "?q=ERIN%40example") == ["erin"]
    assert _listed(client, "?q=davi&role=reviewer") == []


def test_a_bad_filter_is_named_and_the_others_still_apply(erin: User, dave: User) -> None:
    response = client_for(erin).get("/account/members/?role=overlord&q=dave")
    assert response.status_code == 400
    body = response.content.decode()
    assert "Select a valid choice. overlord is not one of the available choices." in body
    assert re.findall(r'<tr data-member="([^"]+)"', body) == ["dave"]


def test_the_list_shows_pending_proposals_for_another_administrator_to_confirm(
    erin: User, iris: User, carol: User
) -> None:
    proposal = services.role_grant_propose(user=carol, role=Role.ETHICS_COMMITTEE, by=erin)
    assert isinstance(proposal, RoleGrantProposal)
    mine = page(client_for(erin), "/account/members/")
    assert "Ethics-committee member (proposed)" in mine
    assert "Waiting for iris to confirm." in mine
    assert f'action="/account/role-proposals/{proposal.pk}/confirm/"' not in mine
    assert f'action="/account/role-proposals/{proposal.pk}/withdraw/"' in mine
    theirs = page(client_for(iris), "/account/members/")
    assert f'action="/account/role-proposals/{proposal.pk}/confirm/"' in theirs


# Creating a member.


def test_an_administrator_creates_a_member_who_sets_their_own_password_from_the_mailed_link(erin: User) -> None:
    client = client_for(erin)
    response = post(
        client,
        "/account/members/new/",
        {"username": "newbie", "email": "newbie@example.org", "first_name": "New", "roles": ["reviewer"]},
    )
    newbie = User.objects.get(username="newbie")
    assert response.status_code == 303
    assert response["Location"] == member_url(newbie)
    assert not newbie.has_usable_password()
    assert newbie.roles == {Role.REVIEWER.value}
    [told] = messages_of(client, member_url(newbie))
    assert "A one-time link to set their password is being mailed to newbie@example.org" in told
    assert Event.objects.get(verb=Verb.USER_CREATED, target_id=str(newbie.pk)).actor == erin
    assert Event.objects.get(verb=Verb.ROLE_GRANTED, target_id=str(newbie.pk)).actor == erin
    [link] = mailed_links()
    assert mail.outbox[0].to == ["newbie@example.org"]
    assert (
        post(Client(), path_of(link), {"new_password": NEW_PASSWORD, "new_password_again": NEW_PASSWORD}).status_code
        == 302
    )
    newbie.refresh_from_db()
    assert newbie.check_password(NEW_PASSWORD)


def test_creating_a_member_with_a_deciding_role_proposes_it(erin: User, iris: User) -> None:
    client = client_for(erin)
    post(
        client, "/account/members/new/", {"username": "newbie", "email": "n@example.org", "roles": ["ethics_committee"]}
    )
    newbie = User.objects.get(username="newbie")
    assert newbie.roles == frozenset()
    proposal = RoleGrantProposal.objects.get(user=newbie)
    assert (proposal.role, proposal.proposed_by) == (Role.ETHICS_COMMITTEE.value, erin)
    [told] = messages_of(client, member_url(newbie))
    assert "Proposed, waiting for a second administrator: ethics-committee member." in told


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        (
            {"username": "dave", "email": "d2@example.org"},
            "username",
            "There is already an account named &#x27;dave&#x27;.",
        ),
        (
            {"username": "newbie", "email": "not an address"},
            "email",
            "&#x27;not an address&#x27; is not an e-mail address.",
        ),
        ({"username": "new bie!", "email": "n@example.org"}, "username", "Enter a valid username."),
        ({"username": "newbie", "email": ""}, "email", "This field is required."),
    ],
)
def test_a_refused_member_form_stays_on_its_page_with_the_error_on_its_field(
    erin: User, dave: User, fields: dict[str, str], field: str, message: str
) -> None:
    response = post(client_for(erin), "/account/members/new/", {**fields, "first_name": "Kept"})
    assert response.status_code == 400
    assert response.request["PATH_INFO"] == "/account/members/new/"  # the address bar stays on the form's page
    body = response.content.decode()
    error = re.search(rf'<input[^>]*name="{field}".*?<p class="error" role="alert">(.*?)</p>', body, flags=re.S)
    assert error is not None
    assert message in error.group(1)
    assert 'value="Kept"' in body
    assert User.objects.filter(username__in=["newbie", "new bie!"]).count() == 0
    assert not OutboxMessage.objects.filter(name=services.MAIL_ACCOUNT_LINK_TASK).exists()


# A member's page and its actions.


def test_a_role_that_does_not_decide_is_granted_and_revoked_at_once(erin: User, carol: User) -> None:
    client = client_for(erin)
    response = post(client, member_url(carol, "roles/grant/"), {"role": "data_steward"})
    assert (response.status_code, response["Location"]) == (303, member_url(carol))
    assert User.objects.get(pk=carol.pk).roles == {"reviewer", "data_steward"}
    assert messages_of(client, member_url(carol)) == ["carol now holds the data steward role."]
    post(client, member_url(carol, "roles/revoke/"), {"role": "reviewer"})
    assert User.objects.get(pk=carol.pk).roles == {"data_steward"}
    revoked = Event.objects.get(verb=Verb.ROLE_REVOKED)
    assert (revoked.actor, revoked.target_id, revoked.data) == (erin, str(carol.pk), {"role": "reviewer"})


def test_a_deciding_role_is_proposed_shown_pending_and_confirmed_by_a_second_administrator(
    erin: User, iris: User, carol: User
) -> None:
    post(client_for(erin), member_url(carol, "roles/grant/"), {"role": "ethics_committee"})
    assert User.objects.get(pk=carol.pk).roles == {"reviewer"}
    proposal = RoleGrantProposal.objects.get(user=carol)
    body = page(client_for(erin), member_url(carol))
    assert "carol as ethics-committee member, proposed by erin" in body
    assert "Waiting for iris to confirm." in body
    assert f"/account/role-proposals/{proposal.pk}/confirm/" not in body
    # The proposer cannot confirm their own proposal.
    assert post(client_for(erin), f"/account/role-proposals/{proposal.pk}/confirm/").status_code == 403
    assert f"/account/role-proposals/{proposal.pk}/confirm/" in page(client_for(iris), member_url(carol))
    response = post(client_for(iris), f"/account/role-proposals/{proposal.pk}/confirm/")
    assert (response.status_code, response["Location"]) == (303, member_url(carol))
    assert User.objects.get(pk=carol.pk).roles == {"reviewer", "ethics_committee"}
    assert proposal.closure.outcome == RoleProposalOutcome.CONFIRMED
    assert Event.objects.filter(verb=Verb.ROLE_GRANT_PROPOSAL_CONFIRMED, actor=iris).exists()
    granted = Event.objects.filter(verb=Verb.ROLE_GRANTED, target_id=str(carol.pk)).latest("seq")
    assert (granted.data["proposed_by"], granted.data["confirmed_by"]) == ("erin", "iris")


def test_any_administrator_withdraws_a_proposal(erin: User, iris: User, carol: User) -> None:
    proposal = services.role_grant_propose(user=carol, role=Role.ADMIN, by=iris)
    assert isinstance(proposal, RoleGrantProposal)
    post(client_for(erin), f"/account/role-proposals/{proposal.pk}/withdraw/")
    proposal.refresh_from_db()
    assert proposal.closure.outcome == RoleProposalOutcome.WITHDRAWN
    assert "Role grant proposal" not in page(client_for(erin), "/account/members/")
    iris_client = client_for(iris)
    again = post(iris_client, f"/account/role-proposals/{proposal.pk}/withdraw/")
    assert again.status_code == 303
    [told] = messages_of(iris_client, member_url(carol))
    assert f"Role proposal #{proposal.pk} cannot be withdrawn: it was already withdrawn by erin." in told


def test_a_refused_action_comes_back_to_the_members_page_with_the_reason(erin: User, carol: User) -> None:
    client = client_for(erin)
    for action, data, reason in (
        ("roles/grant/", {"role": "reviewer"}, "carol already holds the reviewer role."),
        (
            "roles/grant/",
            {"role": "overlord"},
            "Role: Select a valid choice. overlord is not one of the available choices.",
        ),
        ("roles/revoke/", {"role": "admin"}, "carol does not hold the administrator role."),
        ("email/", {"email": "elsewhere@example.org"}, "carol has used their account: only they can change"),
    ):
        response = post(client, member_url(carol, action), data)
        assert (response.status_code, response["Location"]) == (303, member_url(carol)), action
        [told] = messages_of(client, member_url(carol))
        assert reason in told, action
    assert User.objects.get(pk=carol.pk).email == "carol@example.org"


def test_an_administrator_deactivates_and_activates_a_member_but_not_themselves(erin: User, carol: User) -> None:
    client = client_for(erin)
    carol_client = client_for(carol)
    post(client, member_url(carol, "active/"), {"active": "no"})
    assert not User.objects.get(pk=carol.pk).is_active
    assert carol_client.get("/").status_code == 302  # their session ended
    assert "Deactivate" not in page(client, member_url(carol))
    post(client, member_url(carol, "active/"), {"active": "yes"})
    assert User.objects.get(pk=carol.pk).is_active
    assert messages_of(client, member_url(carol)) == ["carol can log in again."]
    verbs = list(Event.objects.filter(target_id=str(carol.pk)).order_by("seq").values_list("verb", flat=True))
    assert verbs[-2:] == [Verb.USER_DEACTIVATED, Verb.USER_ACTIVATED]
    post(client, member_url(erin, "active/"), {"active": "no"})
    assert User.objects.get(pk=erin.pk).is_active
    assert messages_of(client, member_url(erin)) == [
        "You cannot deactivate your own account; another administrator can."
    ]


def test_an_administrator_forces_a_password_reset_and_the_page_names_the_address(erin: User, carol: User) -> None:
    client = client_for(erin)
    response = post(client, member_url(carol, "password-reset/"))
    assert response.status_code == 303
    carol.refresh_from_db()
    assert not carol.has_usable_password()
    assert Event.objects.get(verb=Verb.USER_PASSWORD_RESET_FORCED).actor == erin
    [told] = messages_of(client, member_url(carol))
    assert "A one-time link to set a new one is being mailed to carol@example.org" in told
    assert len(mailed_links()) == 1


def test_an_address_is_corrected_only_on_an_account_no_one_has_used(erin: User) -> None:
    newbie = services.user_create(username="newbie", email="typo@exmaple.org", created_by=erin)
    client = client_for(erin)
    assert 'id="email-fix"' in page(client, member_url(newbie))
    post(client, member_url(newbie, "email/"), {"email": "newbie@example.org"})
    assert User.objects.get(pk=newbie.pk).email == "newbie@example.org"
    changed = Event.objects.get(verb=Verb.USER_EMAIL_CHANGED)
    assert changed.data == {"from": "typo@exmaple.org", "to": "newbie@example.org"}
    newbie.set_password(PASSWORD)
    newbie.save()
    assert 'id="email-fix"' not in page(client, member_url(newbie))


def test_the_members_page_lists_their_recent_events(erin: User, carol: User) -> None:
    services.role_grant_propose(user=carol, role=Role.DATA_STEWARD, by=erin)
    body = page(client_for(erin), member_url(carol))
    events = re.search(r'id="member-events">(.*?)</section>', body, flags=re.S)
    assert events is not None
    assert 'data-verb="role.granted"' in events.group(1)
    assert "data_steward" in events.group(1)
    assert 'href="/activity/?actor=carol"' in events.group(1)


def test_what_an_account_holds_is_shown_as_text(erin: User) -> None:
    hostile = make_user("mallory", [])
    hostile.first_name = "<script>alert(1)</script>"
    hostile.save()
    for path in ("/account/members/", member_url(hostile)):
        body = page(client_for(erin), path)
        assert "<script>alert(1)</script>" not in body
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
