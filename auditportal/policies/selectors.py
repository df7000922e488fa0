from __future__ import annotations

from django.db.models import QuerySet

from auditportal.policies.models import FairnessPolicy


class NoPolicy(RuntimeError):
    def __init__(self) -> None:
        super().__init__("no fairness policy exists: run `python manage.py migrate`, which seeds version 1")


def policy_active() -> FairnessPolicy:
    """The policy new verdicts are judged under: the highest version."""
    policy = FairnessPolicy.objects.order_by("-version").first()
    if policy is None:
        raise NoPolicy
    return policy


def policy_history() -> QuerySet[FairnessPolicy]:
    return FairnessPolicy.objects.select_related("created_by").order_by("-version")
