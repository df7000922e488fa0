from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from django.conf import settings
from django.db import IntegrityError, transaction

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.fairness.errors import UserError
from auditportal.fairness.statistics import stats
from auditportal.policies import rules
from auditportal.policies.models import (
    DEFAULT_METRICS,
    MAX_APPROVAL_QUORUM,
    MAX_MIN_GROUP_SIZE,
    FairnessPolicy,
    PolicyProposal,
    PolicyProposalClosure,
    ProposalOutcome,
    ReferenceRule,
)
from auditportal.policies.selectors import policy_active

# Trial verdicts judge recall, the gap the trainer's EOD measures; a policy that did not judge it
# would leave every trial without a verdict.
REQUIRED_METRIC: Final = "tpr"
_ATTEMPTS: Final = 5


class PolicyError(UserError):
    """An impossible policy; ``field`` names the value to fix."""


class Keep:
    """A value not given: it carries over from the active policy."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Final = Keep()


def policy_seed(*, using: str = "default") -> FairnessPolicy | None:
    """Version 1 from FAIRNESS_TOLERANCE / FAIRNESS_ALPHA, once; None when a policy exists already."""
    with transaction.atomic(using=using):
        if FairnessPolicy.objects.using(using).exists():
            return None
        policy = FairnessPolicy.objects.using(using).create(
            version=1,
            tolerance=settings.FAIRNESS_TOLERANCE,
            alpha=settings.FAIRNESS_ALPHA,
            metrics=list(DEFAULT_METRICS),
            reference_rule=ReferenceRule.LARGEST,
            min_group_size=None,
            reason="Seeded from FAIRNESS_TOLERANCE and FAIRNESS_ALPHA at the first migrate.",
        )
        if using == "default":
            event_record(actor=None, verb=Verb.FAIRNESS_POLICY_CREATED, target=policy, data=policy.as_json())
        return policy


def policy_create(
    *,
    user: User,
    reason: str,
    tolerance: float | Keep = KEEP,
    alpha: float | Keep = KEEP,
    metrics: Sequence[str] | None = None,
    reference_rule: str | None = None,
    min_group_size: int | Keep | None = KEEP,
    approval_quorum: int | Keep = KEEP,
) -> FairnessPolicy | PolicyProposal:
    """The next version of the fairness policy (administrators only); values not given carry over.

    A change that only tightens (or keeps) values is the next version at once. A change that loosens
    anything (rules.policy_loosenings) is a PolicyProposal instead, which takes effect only when a
    different administrator confirms it (policy_proposal_confirm): the two-person rule.

    Existing verdicts keep the version they were judged under; only later verdicts use this one.
    Two administrators at once both get a version: the loser of the race for a version number
    re-reads the active policy and tries the next one.
    """
    rules.check_change(user)
    reason = reason.strip()
    if not reason:
        raise PolicyError("give a reason for the new version: it is shown in the policy's history", field="reason")
    for _ in range(_ATTEMPTS):
        try:
            with transaction.atomic():
                active = policy_active()
                values = _checked(
                    tolerance=active.tolerance if isinstance(tolerance, Keep) else tolerance,
                    alpha=active.alpha if isinstance(alpha, Keep) else alpha,
                    metrics=active.metrics if metrics is None else metrics,
                    reference_rule=active.reference_rule if reference_rule is None else reference_rule,
                    min_group_size=active.min_group_size if isinstance(min_group_size, Keep) else min_group_size,
                    approval_quorum=active.approval_quorum if isinstance(approval_quorum, Keep) else approval_quorum,
                )
                current = active.as_json()
                del current["version"]
                if values == current:
                    raise PolicyError(f"nothing changed: version {active.version} already has these values")
                loosens = rules.policy_loosenings(current, values)
                if loosens:
                    return _propose(user=user, active=active, values=values, loosens=loosens, reason=reason)
                policy = FairnessPolicy.objects.create(
                    version=active.version + 1, reason=reason, created_by=user, **values
                )
                event_record(
                    actor=user,
                    verb=Verb.FAIRNESS_POLICY_CREATED,
                    target=policy,
                    data={**policy.as_json(), "reason": reason},
                )
                return policy
        except IntegrityError:
            if not FairnessPolicy.objects.filter(version=active.version + 1).exists():
                raise  # not the race for the version number
    raise RuntimeError(f"could not number a new policy version in {_ATTEMPTS} attempts")


def _propose(
    *, user: User, active: FairnessPolicy, values: dict[str, object], loosens: list[str], reason: str
) -> PolicyProposal:
    proposal = PolicyProposal.objects.create(base=active, loosens=loosens, reason=reason, proposed_by=user, **values)
    event_record(
        actor=user,
        verb=Verb.FAIRNESS_POLICY_PROPOSED,
        target=proposal,
        data={"base_version": active.version, **values, "loosens": loosens, "reason": reason},
    )
    return proposal


def policy_proposal_confirm(*, user: User, proposal: PolicyProposal) -> FairnessPolicy:
    """The version a pending proposal proposes, made active by a different administrator than its
    proposer; both are recorded on the version (created_by, confirmed_by) and in the events."""
    rules.check_confirm(user, proposal)
    try:
        with transaction.atomic():
            proposal = _open(proposal, action="confirmed")
            active = policy_active()
            if proposal.base_id != active.pk:
                raise PolicyError(
                    f"proposal #{proposal.pk} is stale: it was made against version {proposal.base.version}, "
                    f"but version {active.version} is active now; withdraw it and propose the change again"
                )
            PolicyProposalClosure.objects.create(proposal=proposal, outcome=ProposalOutcome.CONFIRMED, closed_by=user)
            policy = FairnessPolicy.objects.create(
                version=active.version + 1,
                reason=proposal.reason,
                created_by=proposal.proposed_by,
                confirmed_by=user,
                proposal=proposal,
                **proposal.values(),
            )
            people = {"proposed_by": proposal.proposed_by.get_username(), "confirmed_by": user.get_username()}
            event_record(
                actor=user,
                verb=Verb.FAIRNESS_POLICY_PROPOSAL_CONFIRMED,
                target=proposal,
                data={"version": policy.version, "loosens": list(proposal.loosens), **people},
            )
            event_record(
                actor=user,
                verb=Verb.FAIRNESS_POLICY_CREATED,
                target=policy,
                data={**policy.as_json(), "reason": policy.reason, "proposal": proposal.pk, **people},
            )
            return policy
    except IntegrityError as exc:
        # Another administrator made a version, or closed the proposal, in the same moment.
        raise PolicyError(
            f"proposal #{proposal.pk} could not be confirmed: the policy or the proposal changed at the same "
            "moment; reload and look again"
        ) from exc


def policy_proposal_withdraw(*, user: User, proposal: PolicyProposal) -> PolicyProposal:
    """Close a pending or stale proposal without a version (any administrator: it loosens nothing)."""
    rules.check_withdraw(user, proposal)
    try:
        with transaction.atomic():
            proposal = _open(proposal, action="withdrawn")
            PolicyProposalClosure.objects.create(proposal=proposal, outcome=ProposalOutcome.WITHDRAWN, closed_by=user)
            event_record(
                actor=user,
                verb=Verb.FAIRNESS_POLICY_PROPOSAL_WITHDRAWN,
                target=proposal,
                data={"base_version": proposal.base.version, "proposed_by": proposal.proposed_by.get_username()},
            )
    except IntegrityError as exc:
        raise PolicyError(f"proposal #{proposal.pk} was closed by someone else at the same moment") from exc
    proposal.refresh_from_db()
    return proposal


def _open(proposal: PolicyProposal, *, action: str) -> PolicyProposal:
    """The proposal re-read under a row lock; refused when it is confirmed or withdrawn already."""
    locked = PolicyProposal.objects.select_for_update().select_related("base", "proposed_by").get(pk=proposal.pk)
    closure = PolicyProposalClosure.objects.select_related("closed_by").filter(proposal=locked).first()
    if closure is not None:
        raise PolicyError(
            f"proposal #{locked.pk} cannot be {action}: it was already {closure.outcome} by "
            f"{closure.closed_by.get_username()}"
        )
    return locked


def _checked(
    *,
    tolerance: float,
    alpha: float,
    metrics: Sequence[str],
    reference_rule: str,
    min_group_size: int | None,
    approval_quorum: int,
) -> dict[str, object]:
    if not _number(tolerance) or not 0 <= tolerance < 1:
        raise PolicyError(f"the tolerance δ must be at least 0 and below 1, not {tolerance}", field="tolerance")
    if not _number(alpha) or not 0 < alpha <= 0.5:
        raise PolicyError(f"alpha must be above 0 and at most 0.5, not {alpha}", field="alpha")
    if isinstance(metrics, str):
        metrics = [metrics]
    chosen = {str(metric).strip() for metric in metrics} - {""}
    unknown = sorted(chosen - set(stats.COMPARED))
    if unknown or not chosen:
        raise PolicyError(
            f"the metrics are one or more of {', '.join(stats.COMPARED)}, not {', '.join(unknown) or 'none'}",
            field="metrics",
        )
    if REQUIRED_METRIC not in chosen:
        raise PolicyError(
            f"the metrics must include {REQUIRED_METRIC}: trial verdicts judge recall (the trainer's EOD)",
            field="metrics",
        )
    if reference_rule not in ReferenceRule.values:
        raise PolicyError(
            f"the reference rule is one of {', '.join(ReferenceRule.values)}, not {reference_rule!r}",
            field="reference_rule",
        )
    if min_group_size is not None and (
        isinstance(min_group_size, bool) or not isinstance(min_group_size, int) or min_group_size < 1
    ):
        raise PolicyError(
            f"the minimum group size must be a positive integer or none, not {min_group_size}", field="min_group_size"
        )
    if min_group_size is not None and min_group_size > MAX_MIN_GROUP_SIZE:
        raise PolicyError(
            f"the minimum group size must be at most {MAX_MIN_GROUP_SIZE}, not {min_group_size}",
            field="min_group_size",
        )
    if (
        isinstance(approval_quorum, bool)
        or not isinstance(approval_quorum, int)
        or not 1 <= approval_quorum <= MAX_APPROVAL_QUORUM
    ):
        raise PolicyError(
            f"the approval quorum must be a whole number of committee members from 1 to {MAX_APPROVAL_QUORUM}, "
            f"not {approval_quorum}",
            field="approval_quorum",
        )
    return {
        "tolerance": float(tolerance),
        "alpha": float(alpha),
        "metrics": [metric for metric in stats.COMPARED if metric in chosen],
        "reference_rule": reference_rule,
        "min_group_size": min_group_size,
        "approval_quorum": approval_quorum,
    }


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
