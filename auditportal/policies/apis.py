from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from auditportal.accounts.permissions import request_user
from auditportal.policies import rules, selectors, services
from auditportal.policies.models import FairnessPolicy
from auditportal.policies.services import KEEP


def policy_as_json(policy: FairnessPolicy, *, active: FairnessPolicy) -> dict[str, Any]:
    return {
        **policy.as_json(),
        "reason": policy.reason,
        "created_by": policy.created_by.username if policy.created_by else None,
        "created_at": policy.created_at.isoformat(),
        "active": policy.pk == active.pk,
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
    created_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    active = serializers.BooleanField()


class PolicyApi(APIView):
    """GET: the active policy and its history (members). POST: the next version (administrators)."""

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

    @extend_schema(request=InputSerializer, responses={201: _PolicyVersionSerializer})
    def post(self, request: Request) -> Response:
        user = request_user(request)
        rules.check_change(user)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        policy = services.policy_create(
            user=user,
            reason=data["reason"],
            tolerance=data.get("tolerance", KEEP),
            alpha=data.get("alpha", KEEP),
            metrics=data.get("metrics"),
            min_group_size=data.get("min_group_size", KEEP),
            approval_quorum=data.get("approval_quorum", KEEP),
        )
        return Response(policy_as_json(policy, active=policy), status=201)
