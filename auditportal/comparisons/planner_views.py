"""The A/B test planner's page (docs/planner.md). It stores nothing: the form is a GET, so a plan is
a link that can be shared."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from auditportal.accounts import rules as account_rules
from auditportal.accounts.models import User
from auditportal.accounts.permissions import request_user
from auditportal.comparisons.planner_forms import ROWS, PlanForm, add_plan_error, filled_rows, group_formset
from auditportal.datasets import selectors as dataset_selectors
from auditportal.fairness.errors import UserError
from auditportal.fairness.figures.planning import power_curve_figure
from auditportal.fairness.figures.serialize import figure_json
from auditportal.fairness.statistics import planning
from auditportal.policies import selectors as policy_selectors


@login_required
@require_GET
def planner_page(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    account_rules.check_view(user)
    asked = "difference" in request.GET
    policy_alpha = policy_selectors.policy_active().alpha
    form = PlanForm(request.GET if asked else None, initial={"alpha": policy_alpha})
    prefill = None if asked else _prefill(user, request.GET.get("version"), request.GET.get("attribute"))
    formset = group_formset(request.GET if asked else None, initial=prefill["rows"] if prefill else None)
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
        "prefill": prefill,
    }
    failed = asked and plan is None
    return render(request, "comparisons/planner.html", context, status=400 if failed else 200)


def _prefill(user: User, version_id: str | None, attribute: str | None) -> dict[str, Any] | None:
    """Group names, shares and positive rates of labels from a registered dataset version's group
    summary (``?version=ID&attribute=KEY``; the first declared attribute without one). The base rates
    are the champion's, which the dataset does not know: they stay blank. Shares are among the rows
    of known groups (the unknown bucket left out), rounded to 4 digits."""
    if not version_id:
        return None
    if not version_id.isdigit() or len(version_id) > 12:
        raise Http404
    version = dataset_selectors.dataset_version_get(user=user, version_id=int(version_id))
    tables = [table for table in dataset_selectors.dataset_version_group_tables(version=version)]
    chosen = next((table for table in tables if table.attribute == attribute), None) if attribute else None
    if chosen is None:
        chosen = next((table for table in tables if not table.is_intersection), None)
    if chosen is None:
        return None
    known = [row for row in chosen.rows if not row.is_unknown and row.rows > 0]
    total = sum(row.rows for row in known)
    rows = [
        {
            "name": " · ".join(row.values),
            "share": round(row.rows / total, 4),
            "prevalence": None if row.positive_rate is None else round(row.positive_rate, 4),
        }
        for row in sorted(known, key=lambda row: -row.rows)[:ROWS]
    ]
    return {"version": version, "columns": chosen.columns, "rows": rows, "left_out": max(len(known) - ROWS, 0)}
