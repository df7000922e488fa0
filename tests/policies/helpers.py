"""Changing the policy in tests that are not about the two-person rule: a loosening is proposed by
one administrator and confirmed by a second."""

from __future__ import annotations

from typing import Any

from auditportal.accounts.models import Role, User
from auditportal.policies.models import ALL_METRICS, FairnessPolicy, PolicyProposal
from auditportal.policies.services import policy_create, policy_proposal_confirm
from tests.factories import make_user

SECOND_ADMIN = "irene"


def second_admin() -> User:
    """An administrator besides erin (tests/conftest.py), made on first use."""
    return User.objects.filter(username=SECOND_ADMIN).first() or make_user(SECOND_ADMIN, [Role.ADMIN])


def policy_change(*, user: User, confirmer: User | None = None, **values: Any) -> FairnessPolicy:
    """The next version with ``values``: at once, or (a loosening) confirmed by ``confirmer`` (by default
    the second administrator)."""
    made = policy_create(user=user, **values)
    if isinstance(made, PolicyProposal):
        return policy_proposal_confirm(user=confirmer or second_admin(), proposal=made)
    return made


def judge_every_metric(user: User | None = None) -> FairnessPolicy:
    """The next version judging every metric (the default judges equal opportunity only): a tightening,
    active at once, made by ``user`` (by default the second administrator). For tests about documents
    with several judged families."""
    return policy_change(user=user or second_admin(), metrics=list(ALL_METRICS), reason="judge every metric")
