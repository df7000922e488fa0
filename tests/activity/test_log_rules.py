"""activity.rules mirrors the rules of the apps above it (which it cannot import): held equal here,
for an account of every role, one without a role, a deactivated administrator and a visitor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser

from auditportal.accounts import rules as account_rules
from auditportal.accounts.models import Role, User
from auditportal.activity import rules
from auditportal.experiments import rules as experiment_rules
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def _readers() -> list[Any]:
    readers: list[Any] = [AnonymousUser(), make_user("nobody", [])]
    readers += [make_user(f"holds-{role.value}", [role]) for role in Role]
    readers.append(make_user("several", [Role.REVIEWER, Role.ML_ENGINEER]))
    gone = make_user("former-admin", [Role.ADMIN])
    gone.is_active = False
    readers.append(gone)
    return readers


MIRRORS: list[tuple[Callable[[Any], bool], Callable[[Any], bool]]] = [
    (rules.can_read_log, account_rules.can_view),
    (rules.sees_run_internals, experiment_rules.can_see_run_internals),
    (rules.sees_account_details, account_rules.can_manage_users),
]


@pytest.mark.parametrize(("mirror", "rule"), MIRRORS, ids=[mirror.__name__ for mirror, _ in MIRRORS])
def test_each_log_rule_answers_as_the_rule_it_mirrors(
    mirror: Callable[[Any], bool], rule: Callable[[Any], bool]
) -> None:
    for reader in _readers():
        assert mirror(reader) == bool(rule(reader)), getattr(reader, "username", "a visitor")


def test_the_refusal_is_the_accounts_words() -> None:
    assert rules.NO_ROLE == account_rules.NO_ROLE
    assert (Role.ADMIN.value, Role.ML_ENGINEER.value) == (rules.ADMIN, rules.ML_ENGINEER)


def test_the_reader_without_a_role_is_refused(db: None) -> None:
    nobody: User = make_user("nobody", [])
    with pytest.raises(Exception, match="Your account has no role yet"):
        rules.check_read_log(nobody)
