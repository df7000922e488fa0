"""accounts.rules: the role predicates every app's rules build on, and the refusals they raise."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied

from auditportal.accounts import rules
from auditportal.accounts.models import Role, User
from auditportal.approvals import rules as approval_rules
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def test_a_member_views_an_account_without_a_role_or_anonymous_does_not() -> None:
    assert rules.can_view(make_user("eve", [Role.DATA_STEWARD]))
    nobody = make_user("nobody")
    assert not rules.can_view(nobody)
    assert not rules.can_view(AnonymousUser())  # type: ignore[arg-type]
    with pytest.raises(PermissionDenied) as refused:
        rules.check_view(nobody)
    assert str(refused.value) == "Your account has no role yet. Ask an administrator to grant you one."


def test_check_role_names_the_role_and_the_action(bob: User) -> None:
    rules.check_role(bob, Role.ML_ENGINEER, action="launch experiments")
    with pytest.raises(rules.RoleRequired, match=r"^Only a data steward can register datasets\.$"):
        rules.check_role(bob, Role.DATA_STEWARD, action="register datasets")


def test_those_who_make_evidence_are_one_list_that_review_requests_follow(erin: User) -> None:
    assert rules.AUTHOR_ROLES == (Role.ML_ENGINEER, Role.REVIEWER)
    for role in Role:
        user = make_user(f"user-{role.value}", [role])
        assert rules.can_author(user) is approval_rules.can_create(user) is (role in rules.AUTHOR_ROLES)


def test_only_administrators_manage_roles_and_tokens(erin: User, bob: User) -> None:
    assert (rules.can_manage_roles(erin), rules.can_manage_tokens(erin)) == (True, True)
    assert (rules.can_manage_roles(bob), rules.can_manage_tokens(bob)) == (False, False)
    with pytest.raises(PermissionDenied, match=r"^Only an administrator can create or revoke API tokens\.$"):
        rules.check_manage_tokens(bob)


@pytest.mark.parametrize(
    ("role", "noun", "with_article"),
    [
        (Role.ML_ENGINEER, "ML engineer", "an ML engineer"),
        (Role.DATA_STEWARD, "data steward", "a data steward"),
        (Role.REVIEWER, "reviewer", "a reviewer"),
        (Role.ETHICS_COMMITTEE, "ethics-committee member", "an ethics-committee member"),
        (Role.ADMIN, "administrator", "an administrator"),
    ],
)
def test_every_role_reads_right_inside_a_sentence(role: Role, noun: str, with_article: str) -> None:
    assert (role.noun, role.with_article) == (noun, with_article)
    refusal = rules.RoleRequired(role, "do it")
    assert str(refusal) == f"Only {with_article} can do it."
