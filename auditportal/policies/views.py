from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from auditportal.accounts.permissions import request_user
from auditportal.fairness.errors import UserError
from auditportal.lib.forms import add_user_error
from auditportal.policies import rules, selectors, services
from auditportal.policies.forms import PolicyForm


@login_required
@require_http_methods(["GET", "POST"])
def policy_page(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    rules.check_view(user)
    can_change = rules.can_change(user)
    if request.method == "POST":
        rules.check_change(user)
    active = selectors.policy_active()
    form = PolicyForm.starting_from(active, request.POST or None) if can_change else None
    if form is not None and request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            policy = services.policy_create(
                user=user,
                reason=data["reason"],
                tolerance=data["tolerance"],
                alpha=data["alpha"],
                metrics=data["metrics"],
                min_group_size=data["min_group_size"],
                approval_quorum=data["approval_quorum"],
            )
        except UserError as exc:
            add_user_error(form, exc)
        else:
            messages.success(request, f"Fairness policy version {policy.version} is active; later verdicts use it.")
            return redirect("policies:page")
    return render(
        request,
        "policies/page.html",
        {"active": active, "history": selectors.policy_history(), "form": form},
        status=400 if form is not None and form.errors else 200,
    )
