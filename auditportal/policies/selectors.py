from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from auditportal.policies.models import FairnessPolicy, PolicyProposal

# What policy_proposal_state answers (the monitor policies' proposals have the same states).
PROPOSAL_STATES = ("pending", "stale", "confirmed", "withdrawn")


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
    return FairnessPolicy.objects.select_related("created_by", "confirmed_by").order_by("-version")


def policy_proposals(*, open_only: bool = False) -> QuerySet[PolicyProposal]:
    """Proposals newest first; ``open_only``: neither confirmed nor withdrawn (stale ones included)."""
    proposals = PolicyProposal.objects.select_related(
        "base", "proposed_by", "closure", "closure__closed_by", "policy"
    ).order_by("-pk")
    return proposals.filter(closure__isnull=True) if open_only else proposals


def policy_proposal_get(*, proposal_id: int) -> PolicyProposal:
    try:
        return policy_proposals().get(pk=proposal_id)
    except PolicyProposal.DoesNotExist:
        raise Http404("No such fairness policy proposal.") from None


def policy_proposal_state(proposal: PolicyProposal, *, active: FairnessPolicy) -> str:
    """pending (a different administrator may confirm it), stale (made against an older version than
    the active one: it can only be withdrawn), confirmed or withdrawn."""
    closure = getattr(proposal, "closure", None)
    if closure is not None:
        return str(closure.outcome)
    return "pending" if proposal.base_id == active.pk else "stale"
