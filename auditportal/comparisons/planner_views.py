"""The A/B test planner's page (docs/planner.md). It stores nothing: the form is a GET, so a plan is
a link that can be shared."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from auditportal.accounts import rules as account_rules
from auditportal.accounts.permissions import request_user
from auditportal.comparisons.planner_forms import PlanForm, add_plan_error, filled_rows, group_formset
from auditportal.fairness.errors import UserError
from auditportal.fairness.figures.planning import power_curve_figure
from auditportal.fairness.figures.serialize import figure_json
from auditportal.fairness.statistics import planning
from auditportal.policies import selectors as policy_selectors


@login_required
@require_GET
def planner_page(request: HttpRequest) -> HttpResponse:
    account_rules.check_view(request_user(request))
    asked = "difference" in request.GET
    policy_alpha = policy_selectors.policy_active().alpha
    form = PlanForm(request.GET if asked else None, initial={"alpha": policy_alpha})
    formset = group_formset(request.GET if asked else None)
    plan: planning.Plan | None = None
    if asked and form.is_valid() and formset.is_valid():
        rows = filled_rows(formset)
        data = form.cleaned_data
        try:
            plan = planning.plan_ab_test(
                groups=[group for _, group in rows],
                difference=data["difference"],
                alpha=data["alpha"],
                power=data["power"],
                ratio=data["ratio"],
                unit=data["unit"],
            )
        except UserError as error:
            add_plan_error(form, rows, formset, error)
    context: dict[str, Any] = {
        "form": form,
        "formset": formset,
        "plan": plan,
        "figure": figure_json(power_curve_figure(plan)) if plan is not None else None,
        "policy_alpha": policy_alpha,
        "method": planning.METHOD,
        "family": planning.FAMILY,
    }
    failed = asked and plan is None
    return render(request, "comparisons/planner.html", context, status=400 if failed else 200)
