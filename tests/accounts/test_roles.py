from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from auditportal.accounts.models import Role, RoleGrant, User
from auditportal.accounts.services import role_grant, role_revoke
from auditportal.activity.models import Event


def test_a_user_may_hold_several_roles(alice: User) -> None:
    role_grant(user=alice, role=Role.REVIEWER, granted_by=None)
    assert alice.has_role(Role.DATA_STEWARD)
    assert alice.has_role(Role.REVIEWER)
    assert not alice.has_role(Role.ETHICS_COMMITTEE)


def test_granting_a_role_twice_keeps_one_grant_and_one_event(bob: User, erin: User) -> None:
    role_grant(user=bob, role=Role.REVIEWER, granted_by=erin)
    role_grant(user=bob, role=Role.REVIEWER, granted_by=erin)
    assert RoleGrant.objects.filter(user=bob, role=Role.REVIEWER).count() == 1
    events = Event.objects.filter(verb="role.granted", target_id=str(bob.pk), actor=erin)
    assert events.count() == 1
    assert events.get().data == {"role": "reviewer"}


def test_revoking_a_role_takes_effect_and_is_logged(carol: User, erin: User) -> None:
    assert role_revoke(user=carol, role=Role.REVIEWER, revoked_by=erin) is True
    assert not carol.has_role(Role.REVIEWER)
    assert not User.objects.get(pk=carol.pk).is_member
    assert Event.objects.filter(verb="role.revoked", actor=erin).exists()


def test_the_database_refuses_an_unknown_role(oscar: User) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        RoleGrant.objects.create(user=oscar, role="overlord")


def test_an_account_without_roles_is_not_a_member(oscar: User) -> None:
    assert not oscar.is_member
