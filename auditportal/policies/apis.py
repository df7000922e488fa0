from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from auditportal.accounts.permissions import request_user
from auditportal.policies import rules, selectors, services
from auditportal.policies.models import FairnessPolicy, PolicyProposal
from auditportal.policies.services import KEEP


def policy_as_json(policy: FairnessPolicy, *, active: FairnessPolicy) -> dict[str, Any]:
    return {
        **policy.as_json(),
        "reason": policy.reason,
        "created_by": policy.created_by.username if policy.created_by else None,
        "confirmed_by": policy.confirmed_by.username if policy.confirmed_by else None,
        "proposal": policy.proposal_id,
        "created_at": policy.created_at.isoformat(),
        "active": policy.pk == active.pk,
    }


def proposal_as_json(proposal: PolicyProposal, *, active: FairnessPolicy) -> dict[str, Any]:
    closure = getattr(proposal, "closure", None)
    policy = getattr(proposal, "policy", None)
    return {
        "id": proposal.pk,
        "state": selectors.policy_proposal_state(proposal, active=active),
        "base_version": proposal.base.version,
        **proposal.values(),
        "loosens": list(proposal.loosens),
        "reason": proposal.reason,
        "proposed_by": proposal.proposed_by.username,
        "proposed_at": proposal.proposed_at.isoformat(),
        "closed_by": closure.closed_by.username if closure is not None else None,
        "closed_at": closure.closed_at.isoformat() if closure is not None else None,
        "version": policy.version if policy is not None else None,
    }


class _PolicyVersionSerializer(serializers.Serializer[Any]):
    version = serializers.IntegerField()
    tolerance = serializers.FloatField()
    alpha = serializers.FloatField()
    metrics = serializers.ListField(child=serializers.CharField())
    reference_rule = serializers.CharField()
    min_group_size = serializers.IntegerField(allow_null=True)
    approval_quorum = serializers.IntegerField()
    reason = serializers.CharField(allow_blank=True)
    created_by = serializers.CharField(allow_null=True, help_text="for a confirmed loosening: its proposer")
    confirmed_by = serializers.CharField(
        allow_null=True, help_text="the second administrator who confirmed a loosening; null: it loosened nothing"
    )
    proposal = serializers.IntegerField(allow_null=True, help_text="the proposal this version confirmed")
    created_at = serializers.DateTimeField()
    active = serializers.BooleanField()


class _PolicyProposalSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    state = serializers.ChoiceField(
        choices=list(selectors.PROPOSAL_STATES),
        help_text="stale: made against an older version than the active one; it can only be withdrawn",
    )
    base_version = serializers.IntegerField(help_text="the active version when it was proposed")
    tolerance = serializers.FloatField()
    alpha = serializers.FloatField()
    metrics = serializers.ListField(child=serializers.CharField())
    reference_rule = serializers.CharField()
    min_group_size = serializers.IntegerField(allow_null=True)
    approval_quorum = serializers.IntegerField()
    loosens = serializers.ListField(
        child=serializers.ChoiceField(choices=list(rules.LOOSENINGS)), help_text="the values it loosens"
    )
    reason = serializers.CharField()
    proposed_by = serializers.CharField()
    proposed_at = serializers.DateTimeField()
    closed_by = serializers.CharField(allow_null=True, help_text="who confirmed or withdrew it")
    closed_at = serializers.DateTimeField(allow_null=True)
    version = serializers.IntegerField(allow_null=True, help_text="the version its confirmation made")


class PolicyApi(APIView):
    """GET: the active policy and its history (members). POST: the next version (administrators); a
    change that loosens anything is answered 202 with a proposal that a second administrator confirms."""

    class InputSerializer(serializers.Serializer[Any]):
        # Values left out carry over from the active version; min_group_size null means none.
        tolerance = serializers.FloatField(required=False)
        alpha = serializers.FloatField(required=False)
        metrics = serializers.ListField(child=serializers.CharField(), required=False)
        min_group_size = serializers.IntegerField(required=False, allow_null=True)
        approval_quorum = serializers.IntegerField(required=False)
        reason = serializers.CharField()

    class OutputSerializer(serializers.Serializer[Any]):
        active = _PolicyVersionSerializer()
        history = _PolicyVersionSerializer(many=True)

    @extend_schema(responses=OutputSerializer)
    def get(self, request: Request) -> Response:
        user = request_user(request)
        rules.check_view(user)
        active = selectors.policy_active()
        return Response(
            {
                "active": policy_as_json(active, active=active),
                "history": [policy_as_json(policy, active=active) for policy in selectors.policy_history()],
            }
        )

    @extend_schema(request=InputSerializer, responses={201: _PolicyVersionSerializer, 202: _PolicyProposalSerializer})
    def post(self, request: Request) -> Response:
        user = request_user(request)
        rules.check_change(user)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        made = services.policy_create(
            user=user,
            reason=data["reason"],
            tolerance=data.get("tolerance", KEEP),
            alpha=data.get("alpha", KEEP),
            metrics=data.get("metrics"),
            min_group_size=data.get("min_group_size", KEEP),
            approval_quorum=data.get("approval_quorum", KEEP),
        )
        if isinstance(made, PolicyProposal):
            return Response(proposal_as_json(made, active=selectors.policy_active()), status=202)
        return Response(policy_as_json(made, active=made), status=201)


class PolicyProposalListApi(APIView):
    """Every proposal to loosen the policy, newest first, with its state (members)."""

    @extend_schema(responses=_PolicyProposalSerializer(many=True))
    def get(self, request: Request) -> Response:
        user = request_user(request)
        rules.check_view(user)
        active = selectors.policy_active()
        return Response([proposal_as_json(proposal, active=active) for proposal in selectors.policy_proposals()])


class PolicyProposalConfirmApi(APIView):
    """Confirm a pending proposal: an administrator other than its proposer; its version becomes active."""

    @extend_schema(request=None, responses=_PolicyVersionSerializer)
    def post(self, request: Request, proposal_id: int) -> Response:
        user = request_user(request)
        rules.check_change(user)
        proposal = selectors.policy_proposal_get(proposal_id=proposal_id)
        policy = services.policy_proposal_confirm(user=user, proposal=proposal)
        return Response(policy_as_json(policy, active=policy))


class PolicyProposalWithdrawApi(APIView):
    """Withdraw a pending or stale proposal (any administrator)."""

    @extend_schema(request=None, responses=_PolicyProposalSerializer)
    def post(self, request: Request, proposal_id: int) -> Response:
        user = request_user(request)
        rules.check_change(user)
        proposal = selectors.policy_proposal_get(proposal_id=proposal_id)
        proposal = services.policy_proposal_withdraw(user=user, proposal=proposal)
        proposal = selectors.policy_proposal_get(proposal_id=proposal.pk)
        return Response(proposal_as_json(proposal, active=selectors.policy_active()))
