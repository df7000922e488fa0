"""The A/B test planner's API: ``POST /api/v1/comparisons/plan/`` (docs/planner.md). It stores
nothing; a refusal is a 400 naming the field (``groups[1].share``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from auditportal.accounts import rules as account_rules
from auditportal.accounts.permissions import request_user
from auditportal.fairness.statistics import planning
from auditportal.policies import selectors as policy_selectors


def plan_as_json(plan: planning.Plan) -> dict[str, Any]:
    return {
        "groups": [
            {
                "name": group.name,
                "share": group.share,
                "rate": group.rate,
                "challenger_rate": group.challenger_rate,
                "effect_size": group.effect_size,
                "units_champion": group.units_a,
                "units_challenger": group.units_b,
                "rows_champion": group.rows_a,
                "power_at_plan": group.power_at_plan,
                "deciding": group.deciding,
            }
            for group in plan.groups
        ],
        "deciding": plan.deciding,
        "champion": plan.rows_a,
        "challenger": plan.rows_b,
        "total": plan.total,
        "unit": plan.unit,
        "difference": plan.difference,
        "alpha": plan.alpha,
        "level": plan.level,
        "power": plan.power,
        "ratio": plan.ratio,
        "method": plan.method,
        "family": plan.family,
        "curve": [{"total": point.total, "power": list(point.power)} for point in plan.curve],
    }


class _PlanGroupInputSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(max_length=200)
    share = serializers.FloatField(help_text="the group's share of all rows; the shares sum to 1")
    rate = serializers.FloatField(help_text="the champion's rate of the compared metric in the group, in (0, 1)")
    prevalence = serializers.FloatField(
        required=False,
        allow_null=True,
        help_text="the group's positive rate of labels; needed when unit is positives or negatives",
    )


class _PlanGroupSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    share = serializers.FloatField()
    rate = serializers.FloatField()
    challenger_rate = serializers.FloatField(help_text="the alternative planned for: rate +- difference, nearer 0.5")
    effect_size = serializers.FloatField(help_text="Cohen's h, challenger minus champion")
    units_champion = serializers.IntegerField(help_text="units (rows, positives or negatives) arm A needs in the group")
    units_challenger = serializers.IntegerField(help_text="and arm B")
    rows_champion = serializers.IntegerField(help_text="predictions arm A needs for this group alone")
    power_at_plan = serializers.FloatField(help_text="the group's power at the plan's arm sizes")
    deciding = serializers.BooleanField(help_text="whether this group sets the size")


class _PlanCurvePointSerializer(serializers.Serializer[Any]):
    total = serializers.IntegerField(help_text="predictions in both arms")
    power = serializers.ListField(child=serializers.FloatField(), help_text="one per group, in the groups' order")


class ComparisonPlanApi(APIView):
    """How many predictions each arm of a live A/B test needs so that every group's comparison of the
    champion (A) with the challenger (B) reaches the power (members; nothing is stored)."""

    class InputSerializer(serializers.Serializer[Any]):
        groups = serializers.ListField(child=_PlanGroupInputSerializer(), max_length=planning.MAX_GROUPS)
        difference = serializers.FloatField(help_text="the smallest absolute difference of rates that matters")
        alpha = serializers.FloatField(
            required=False, help_text="familywise over the groups (Bonferroni); default: the active policy's alpha"
        )
        power = serializers.FloatField(required=False, default=0.8)
        ratio = serializers.FloatField(required=False, default=1.0, help_text="challenger predictions per champion one")
        unit = serializers.ChoiceField(choices=list(planning.UNITS), required=False, default="rows")

    class OutputSerializer(serializers.Serializer[Any]):
        groups = _PlanGroupSerializer(many=True)
        deciding = serializers.CharField(help_text="the group that sets the size")
        champion = serializers.IntegerField(help_text="predictions arm A (champion) needs")
        challenger = serializers.IntegerField(help_text="predictions arm B (challenger) needs")
        total = serializers.IntegerField()
        unit = serializers.ChoiceField(choices=list(planning.UNITS))
        difference = serializers.FloatField()
        alpha = serializers.FloatField()
        level = serializers.FloatField(help_text="each group's comparison level: alpha / G")
        power = serializers.FloatField()
        ratio = serializers.FloatField()
        method = serializers.CharField()
        family = serializers.CharField()
        curve = _PlanCurvePointSerializer(many=True)

    @extend_schema(request=InputSerializer, responses=OutputSerializer)
    def post(self, request: Request) -> Response:
        account_rules.check_view(request_user(request))
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        plan = planning.plan_ab_test(
            groups=[
                planning.GroupInput(
                    name=group["name"], share=group["share"], rate=group["rate"], prevalence=group.get("prevalence")
                )
                for group in data["groups"]
            ],
            difference=data["difference"],
            alpha=data["alpha"] if "alpha" in data else policy_selectors.policy_active().alpha,
            power=data["power"],
            ratio=data["ratio"],
            unit=data["unit"],
        )
        return Response(plan_as_json(plan))
