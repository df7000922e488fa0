"""A deployment's monitor policy: its next version, or a proposal when the change loosens it, which a
different administrator confirms (the fairness policy's two-person rule, docs/governance.md; the
values that loosen: spec.spec_loosenings)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.monitoring import rules
from auditportal.monitoring.models import (
    Deployment,
    MonitorPolicy,
    MonitorPolicyProposal,
    MonitorPolicyProposalClosure,
    ProposalOutcome,
)
from auditportal.monitoring.services.common import MonitorPolicyError, deployment_lock, text_checked
from auditportal.monitoring.spec import spec_loosenings


def monitor_policy_create(
    *, user: User, deployment: Deployment, changes: dict[str, Any], reason: str
) -> MonitorPolicy | MonitorPolicyProposal:
    """The next version of ``deployment``'s monitor policy (administrators): ``changes`` is a partial
    spec over the active version's (MonitorSpec.changed). A change that only tightens applies at once;
    one that loosens anything is a MonitorPolicyProposal that a different administrator confirms
    (monitor_policy_proposal_confirm). Judgements already made keep the version they were made under."""
    rules.check_change_policy(user)
    reason = text_checked(reason, "reason", required=True, error=MonitorPolicyError)
    with transaction.atomic():
        deployment = deployment_lock(deployment=deployment)
        active = _active(deployment)
        base = active.monitor_spec
        spec = base.changed(changes)
        if spec == base:
            raise MonitorPolicyError(f"Nothing changed: version {active.version} already has these values.")
        loosens = spec_loosenings(base, spec)
        if loosens:
            proposal = MonitorPolicyProposal.objects.create(
                deployment=deployment,
                base=active,
                spec=spec.as_json(),
                loosens=loosens,
                reason=reason,
                proposed_by=user,
            )
            event_record(
                actor=user,
                verb=Verb.MONITOR_POLICY_PROPOSED,
                target=proposal,
                data={
                    "deployment": deployment.name,
                    "base_version": active.version,
                    "spec": proposal.spec,
                    "loosens": loosens,
                    "reason": reason,
                },
            )
            return proposal
        policy = MonitorPolicy.objects.create(
            deployment=deployment, version=active.version + 1, spec=spec.as_json(), reason=reason, created_by=user
        )
        event_record(
            actor=user,
            verb=Verb.MONITOR_POLICY_CREATED,
            target=policy,
            data={"deployment": deployment.name, "version": policy.version, "spec": policy.spec, "reason": reason},
        )
        return policy


def monitor_policy_proposal_confirm(*, user: User, proposal: MonitorPolicyProposal) -> MonitorPolicy:
    """The version a pending proposal proposes, made active by an administrator other than its
    proposer; both are on the version (created_by, confirmed_by) and in the events."""
    rules.check_confirm_policy(user, proposal)
    with transaction.atomic():
        deployment = deployment_lock(deployment=proposal.deployment)
        proposal = _open(proposal, action="confirmed")
        active = _active(deployment)
        if proposal.base_id != active.pk:
            raise MonitorPolicyError(
                f"Proposal #{proposal.pk} is stale: it was made against version {proposal.base.version}, but "
                f"version {active.version} is active now; withdraw it and propose the change again."
            )
        MonitorPolicyProposalClosure.objects.create(
            proposal=proposal, outcome=ProposalOutcome.CONFIRMED, closed_by=user
        )
        policy = MonitorPolicy.objects.create(
            deployment=deployment,
            version=active.version + 1,
            spec=proposal.spec,
            reason=proposal.reason,
            created_by=proposal.proposed_by,
            confirmed_by=user,
            proposal=proposal,
        )
        people = {"proposed_by": proposal.proposed_by.get_username(), "confirmed_by": user.get_username()}
        event_record(
            actor=user,
            verb=Verb.MONITOR_POLICY_PROPOSAL_CONFIRMED,
            target=proposal,
            data={
                "deployment": deployment.name,
                "version": policy.version,
                "loosens": list(proposal.loosens),
                **people,
            },
        )
        event_record(
            actor=user,
            verb=Verb.MONITOR_POLICY_CREATED,
            target=policy,
            data={
                "deployment": deployment.name,
                "version": policy.version,
                "spec": policy.spec,
                "reason": policy.reason,
                "proposal": proposal.pk,
                **people,
            },
        )
        return policy


def monitor_policy_proposal_withdraw(*, user: User, proposal: MonitorPolicyProposal) -> MonitorPolicyProposal:
    """Close a pending or stale proposal without a version (any administrator: it loosens nothing)."""
    rules.check_withdraw_policy(user, proposal)
    with transaction.atomic():
        deployment_lock(deployment=proposal.deployment)
        proposal = _open(proposal, action="withdrawn")
        MonitorPolicyProposalClosure.objects.create(
            proposal=proposal, outcome=ProposalOutcome.WITHDRAWN, closed_by=user
        )
        event_record(
            actor=user,
            verb=Verb.MONITOR_POLICY_PROPOSAL_WITHDRAWN,
            target=proposal,
            data={
                "deployment": proposal.deployment.name,
                "base_version": proposal.base.version,
                "proposed_by": proposal.proposed_by.get_username(),
            },
        )
    return proposal


def _active(deployment: Deployment) -> MonitorPolicy:
    return deployment.monitor_policies.order_by("-version").first() or _missing(deployment)


def _missing(deployment: Deployment) -> MonitorPolicy:
    raise RuntimeError(f"deployment {deployment.name} has no monitor policy (deployment_create makes version 1)")


def _open(proposal: MonitorPolicyProposal, *, action: str) -> MonitorPolicyProposal:
    """The proposal re-read (its deployment is locked); refused when it is confirmed or withdrawn."""
    fresh = MonitorPolicyProposal.objects.select_related("base", "proposed_by", "deployment").get(pk=proposal.pk)
    closure = MonitorPolicyProposalClosure.objects.select_related("closed_by").filter(proposal=fresh).first()
    if closure is not None:
        raise MonitorPolicyError(
            f"Proposal #{fresh.pk} cannot be {action}: it was already {closure.outcome} by "
            f"{closure.closed_by.get_username()}."
        )
    return fresh
