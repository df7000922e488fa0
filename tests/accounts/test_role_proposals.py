"""The two-person rule for the roles that decide (docs/governance.md, "Roles that decide: the two-person
rule"): one administrator cannot make a second committee voter or administrator alone."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.messages import get_messages
from django.core.exceptions import PermissionDenied
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from auditportal.accounts import services
from auditportal.accounts.models import Role, RoleGrant, RoleGrantProposal, User
from auditportal.accounts.rules import DECIDING_ROLES
from auditportal.activity.models import Event, Verb
from auditportal.activity.selectors import chain_verify
from tests.factories import make_user


@pytest.fixture
def frank(db: None) -> User:
    """A second administrator."""
    return make_user("frank", [Role.ADMIN])


def _propose(user: User, role: Role, by: User) -> RoleGrantProposal:
    proposal = services.role_grant_propose(user=user, role=role, by=by)
    assert isinstance(proposal, RoleGrantProposal)
    return proposal


def test_the_deciding_roles_are_the_committee_and_the_administrators() -> None:
    assert {Role.ETHICS_COMMITTEE, Role.ADMIN} == DECIDING_ROLES


def test_one_administrator_cannot_give_another_account_the_committee_role_alone(erin: User, oscar: User) -> None:
    result = services.role_grant_propose(user=oscar, role=Role.ETHICS_COMMITTEE, by=erin)
    assert isinstance(result, RoleGrantProposal)
    oscar.forget_roles()
    assert not oscar.has_role(Role.ETHICS_COMMITTEE)
    assert not RoleGrant.objects.filter(user=oscar).exists()
    # Nor themselves: a second committee vote from the same person.
    _propose(erin, Role.ETHICS_COMMITTEE, erin)
    assert not RoleGrant.objects.filter(user=erin, role=Role.ETHICS_COMMITTEE).exists()
    # And account create --role ethics_committee proposes too.
    zoe = services.user_create(username="zoe", email="zoe@example.org", created_by=erin, roles=[Role.ETHICS_COMMITTEE])
    assert not zoe.role_grants.exists()
    assert RoleGrantProposal.objects.filter(user=zoe, role=Role.ETHICS_COMMITTEE, proposed_by=erin).exists()


def test_a_second_administrators_confirmation_grants_it(erin: User, frank: User, oscar: User) -> None:
    proposal = _propose(oscar, Role.ETHICS_COMMITTEE, erin)
    grant = services.role_grant_confirm(proposal=proposal, by=frank)
    assert grant.granted_by == frank
    assert grant.proposal == proposal
    assert grant.proposal.proposed_by == erin
    oscar.forget_roles()
    assert oscar.has_role(Role.ETHICS_COMMITTEE)
    assert proposal.closure.outcome == "confirmed"
    assert proposal.closure.closed_by == frank
    people = {"proposal": proposal.pk, "proposed_by": "erin", "confirmed_by": "frank"}
    granted = Event.objects.get(verb=Verb.ROLE_GRANTED, target_id=str(oscar.pk))
    assert granted.actor == frank
    assert granted.data == {"role": "ethics_committee", **people}
    confirmed = Event.objects.get(verb=Verb.ROLE_GRANT_PROPOSAL_CONFIRMED)
    assert confirmed.data == {"user": "oscar", "user_id": oscar.pk, "role": "ethics_committee", **people}
    proposed = Event.objects.get(verb=Verb.ROLE_GRANT_PROPOSED)
    assert (proposed.actor, proposed.target_id) == (erin, str(proposal.pk))
    assert chain_verify().ok
    # Closed: neither a second confirmation nor a withdrawal.
    with pytest.raises(services.RoleProposalError, match=rf"^Role proposal #{proposal.pk} cannot be withdrawn: it"):
        services.role_grant_withdraw(proposal=proposal, by=erin)


def test_neither_the_proposer_nor_the_grantee_can_confirm(erin: User, frank: User, oscar: User) -> None:
    proposal = _propose(oscar, Role.ETHICS_COMMITTEE, erin)
    with pytest.raises(PermissionDenied, match=f"You proposed role proposal #{proposal.pk}"):
        services.role_grant_confirm(proposal=proposal, by=erin)
    # The grantee of an administrator proposal is no confirmer either.
    own = _propose(frank, Role.ETHICS_COMMITTEE, erin)
    with pytest.raises(PermissionDenied, match=f"You are the grantee of role proposal #{own.pk}"):
        services.role_grant_confirm(proposal=own, by=frank)
    # Nor a member who is not an administrator.
    with pytest.raises(PermissionDenied, match="Only an administrator can grant or revoke roles"):
        services.role_grant_confirm(proposal=proposal, by=make_user("dora", [Role.ETHICS_COMMITTEE]))
    assert not RoleGrant.objects.filter(role=Role.ETHICS_COMMITTEE).exclude(user__username="dora").exists()
    assert not Event.objects.filter(verb=Verb.ROLE_GRANT_PROPOSAL_CONFIRMED).exists()


def test_a_proposal_waits_once_and_is_withdrawn_by_any_administrator(erin: User, frank: User, oscar: User) -> None:
    proposal = _propose(oscar, Role.ETHICS_COMMITTEE, erin)
    with pytest.raises(services.RoleProposalError, match=rf"Role proposal #{proposal.pk} .* already waits"):
        services.role_grant_propose(user=oscar, role=Role.ETHICS_COMMITTEE, by=frank)
    services.role_grant_withdraw(proposal=proposal, by=erin)
    assert proposal.closure.outcome == "withdrawn"
    event = Event.objects.get(verb=Verb.ROLE_GRANT_PROPOSAL_WITHDRAWN)
    assert event.actor == erin
    assert event.data == {"user": "oscar", "role": "ethics_committee", "proposed_by": "erin"}
    with pytest.raises(services.RoleProposalError, match="cannot be confirmed: it was already withdrawn by erin"):
        services.role_grant_confirm(proposal=proposal, by=frank)
    assert not RoleGrant.objects.filter(user=oscar).exists()


def test_a_proposal_whose_proposer_lost_the_administrator_role_is_stale(erin: User, frank: User, oscar: User) -> None:
    proposal = _propose(oscar, Role.ETHICS_COMMITTEE, erin)
    services.role_revoke(user=erin, role=Role.ADMIN, revoked_by=frank)
    with pytest.raises(services.RoleProposalError, match="is stale: its proposer erin is no longer"):
        services.role_grant_confirm(proposal=proposal, by=frank)


def test_revoking_and_the_other_roles_apply_at_once(erin: User, dave: User, oscar: User) -> None:
    assert services.role_revoke(user=dave, role=Role.ETHICS_COMMITTEE, revoked_by=erin)
    assert not RoleGrant.objects.filter(user=dave).exists()
    for role in (Role.DATA_STEWARD, Role.ML_ENGINEER, Role.REVIEWER):
        grant = services.role_grant_propose(user=oscar, role=role, by=erin)
        assert isinstance(grant, RoleGrant)
        assert grant.granted_by == erin
    assert not RoleGrantProposal.objects.exists()


def test_the_sole_administrator_makes_the_second_administrator_once(erin: User, oscar: User, bob: User) -> None:
    grant = services.role_grant_propose(user=oscar, role=Role.ADMIN, by=erin)
    assert isinstance(grant, RoleGrant)
    event = Event.objects.get(verb=Verb.ROLE_GRANTED, target_id=str(oscar.pk))
    assert event.data == {"role": "admin", "bootstrap": "second administrator"}
    # Never the committee role alone, even then; and once a second administrator existed, going back
    # to one (a revocation) does not reopen the window.
    services.role_revoke(user=oscar, role=Role.ADMIN, revoked_by=erin)
    assert isinstance(services.role_grant_propose(user=bob, role=Role.ADMIN, by=erin), RoleGrantProposal)
    assert not RoleGrant.objects.filter(user=bob, role=Role.ADMIN).exists()


def test_the_bootstrap_window_is_closed_with_two_administrators(erin: User, frank: User, oscar: User) -> None:
    assert isinstance(services.role_grant_propose(user=oscar, role=Role.ADMIN, by=erin), RoleGrantProposal)


def test_only_the_listed_callers_grant_without_the_rule() -> None:
    """role_grant checks nobody: a new caller in the portal would bypass the two-person rule."""
    root = Path(__file__).resolve().parents[2] / "auditportal"
    callers = {
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if re.search(r"\brole_grant\(", path.read_text(encoding="utf-8"))
    }
    assert callers == {
        "accounts/services.py",  # role_grant itself, the proposal's confirmation, the bootstrap, the demo
        "accounts/cli.py",  # portal-cli's non-deciding role
        "accounts/management/commands/grant_role.py",  # the first administrator, while none exists
    }


# The command line.


def _cmd(*args: str) -> str:
    out = StringIO()
    call_command("grant_role", *args, stdout=out)
    return out.getvalue()


def test_grant_role_proposes_and_a_second_administrator_confirms(erin: User, frank: User, oscar: User) -> None:
    out = _cmd("oscar", "ethics_committee", "--by", "erin")
    proposal = RoleGrantProposal.objects.get()
    assert out.startswith(f"Proposed the ethics-committee member role for oscar: role proposal #{proposal.pk}.")
    with pytest.raises(CommandError, match=f"You proposed role proposal #{proposal.pk}"):
        _cmd("--confirm", str(proposal.pk), "--by", "erin")
    with pytest.raises(CommandError, match="--by is required"):
        _cmd("--confirm", str(proposal.pk))
    assert _cmd("--confirm", str(proposal.pk), "--by", "frank") == (
        f"Confirmed role proposal #{proposal.pk}: granted the ethics-committee member role to oscar "
        "(proposed by erin, confirmed by frank).\n"
    )
    assert RoleGrant.objects.get(user=oscar, role=Role.ETHICS_COMMITTEE).granted_by == frank
    assert Event.objects.get(verb=Verb.ROLE_GRANT_PROPOSAL_CONFIRMED).data["cli"]["command"] == "grant_role"


def test_grant_role_withdraws_and_refuses_unknown_ids(erin: User, frank: User, oscar: User) -> None:
    _cmd("oscar", "admin", "--by", "erin")
    proposal = RoleGrantProposal.objects.get()
    assert _cmd("--withdraw", str(proposal.pk), "--by", "erin") == (
        f"Withdrew role proposal #{proposal.pk} (oscar as administrator).\n"
    )
    with pytest.raises(CommandError, match=r"^--confirm 999: no role proposal with that id$"):
        _cmd("--confirm", "999", "--by", "frank")
    with pytest.raises(CommandError, match="already withdrawn by erin"):
        _cmd("--confirm", str(proposal.pk), "--by", "frank")
    assert not RoleGrant.objects.filter(user=oscar).exists()


# The admin site.


def _admin_client(user: User) -> Client:
    user.is_staff = user.is_superuser = True
    user.save(update_fields=["is_staff", "is_superuser"])
    client = Client()
    client.force_login(user)
    return client


def _post(client: Client, url: str, action: str, *pks: int) -> list[str]:
    response = client.post(reverse(url), {"action": action, "_selected_action": list(pks)}, follow=True)
    assert response.status_code == 200
    return [str(message) for message in get_messages(response.wsgi_request)]


def test_the_admin_action_proposes_and_another_administrator_confirms(erin: User, frank: User, oscar: User) -> None:
    messages = _post(_admin_client(erin), "admin:accounts_user_changelist", "grant_ethics_committee", oscar.pk)
    proposal = RoleGrantProposal.objects.get()
    assert messages == [
        f"Proposed ethics-committee member role: oscar (#{proposal.pk}). Another administrator, not the grantee, "
        "confirms it under Role grant proposals."
    ]
    assert not RoleGrant.objects.filter(user=oscar).exists()
    changelist = "admin:accounts_rolegrantproposal_changelist"
    assert _admin_client(erin).get(reverse(changelist)).status_code == 200
    refused = _post(_admin_client(erin), changelist, "confirm", proposal.pk)
    assert refused == [
        f"#{proposal.pk}: You proposed role proposal #{proposal.pk}: an administrator who is neither "
        "its proposer nor its grantee must confirm it (two-person rule)."
    ]
    assert _post(_admin_client(frank), changelist, "confirm", proposal.pk) == [f"Confirmed #{proposal.pk}."]
    assert RoleGrant.objects.get(user=oscar, role=Role.ETHICS_COMMITTEE).granted_by == frank


def test_the_admin_withdraw_action(erin: User, frank: User, oscar: User) -> None:
    proposal = _propose(oscar, Role.ADMIN, erin)
    assert _post(_admin_client(erin), "admin:accounts_rolegrantproposal_changelist", "withdraw", proposal.pk) == [
        f"Withdrew #{proposal.pk}."
    ]
    assert proposal.closure.outcome == "withdrawn"
