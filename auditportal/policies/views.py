from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from auditportal.accounts.permissions import request_user
from auditportal.fairness.errors import UserError
from auditportal.lib.forms import add_user_error
from auditportal.policies import rules, selectors, services
from auditportal.policies.forms import PolicyForm
from auditportal.policies.models import PolicyProposal


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
            made = services.policy_create(
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
            if isinstance(made, PolicyProposal):
                messages.warning(
                    request,
                    f"Proposal #{made.pk} loosens the policy ({', '.join(made.loosens)}): it takes effect only "
                    "when a different administrator confirms it.",
                )
            else:
                messages.success(request, f"Fairness policy version {made.version} is active; later verdicts use it.")
            return redirect("policies:page")
    proposals = [
        {
            "proposal": proposal,
            "state": selectors.policy_proposal_state(proposal, active=active),
            "loosened": [
                (rules.LOOSENINGS[name], getattr(proposal.base, name), getattr(proposal, name))
                for name in proposal.loosens
            ],
            "can_confirm": rules.can_confirm(user, proposal),
            "can_withdraw": rules.can_withdraw(user, proposal),
        }
        for proposal in selectors.policy_proposals(open_only=True)
    ]
    return render(
        request,
        "policies/page.html",
        {"active": active, "history": selectors.policy_history(), "form": form, "proposals": proposals},
        status=400 if form is not None and form.errors else 200,
    )


@login_required
@require_POST
def proposal_confirm(request: HttpRequest, proposal_id: int) -> HttpResponse:
    user = request_user(request)
    rules.check_view(user)
    rules.check_change(user)
    proposal = selectors.policy_proposal_get(proposal_id=proposal_id)
    try:
        policy = services.policy_proposal_confirm(user=user, proposal=proposal)
    except UserError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            f"Fairness policy version {policy.version} is active (proposed by "
            f"{proposal.proposed_by.get_username()}, confirmed by you); later verdicts use it.",
        )
    return redirect("policies:page")


@login_required
@require_POST
def proposal_withdraw(request: HttpRequest, proposal_id: int) -> HttpResponse:
    user = request_user(request)
    rules.check_view(user)
    rules.check_change(user)
    proposal = selectors.policy_proposal_get(proposal_id=proposal_id)
    try:
        services.policy_proposal_withdraw(user=user, proposal=proposal)
    except UserError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Proposal #{proposal.pk} is withdrawn; the policy is unchanged.")
    return redirect("policies:page")
