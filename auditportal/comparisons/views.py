from __future__ import annotations

import dataclasses
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from auditportal.accounts.models import User
from auditportal.accounts.permissions import request_user
from auditportal.audits.selectors import prediction_audit_get
from auditportal.comparisons import audit_services, rules, selectors, services, trial_services
from auditportal.comparisons.forms import (
    AuditsComparisonForm,
    PairedComparisonForm,
    TrialsComparisonForm,
    audit_model_text,
)
from auditportal.comparisons.models import ComparisonState
from auditportal.evidence.selectors import verdict_document_of_comparison
from auditportal.experiments.selectors import trial_get
from auditportal.fairness.errors import UserError
from auditportal.fairness.figures.paired import paired_forest_plot
from auditportal.fairness.figures.serialize import kept_figure_json
from auditportal.lib.forms import add_user_error
from auditportal.lib.uploads import accepts_uploads, received_sha256, report_rejected_uploads
from auditportal.policies.selectors import policy_active


@login_required
@require_GET
def comparison_list(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    page = Paginator(selectors.comparison_list(user=user), 50).get_page(request.GET.get("page"))
    return render(request, "comparisons/list.html", {"page": page, "can_create": rules.can_create(user)})


def _new_page(
    request: HttpRequest,
    user: User,
    *,
    form: PairedComparisonForm | None = None,
    audits_form: AuditsComparisonForm | None = None,
    trials_form: TrialsComparisonForm | None = None,
) -> HttpResponse:
    """The "new comparison" page: one file, two audits of a file, or two trials; the form that was sent
    shown again with its errors (400), the others empty."""
    forms = {
        "form": form or PairedComparisonForm(),
        "audits_form": audits_form or AuditsComparisonForm(audits=selectors.audits_to_pair(user=user)),
        "trials_form": trials_form or TrialsComparisonForm(trials=selectors.trials_to_pair(user=user)),
    }
    failed = any(bound.is_bound and bound.errors for bound in forms.values())
    return render(request, "comparisons/new.html", {**forms, "policy": policy_active()}, status=400 if failed else 200)


@accepts_uploads(rules.can_create, who="an ML engineer or a reviewer")
@login_required
@require_http_methods(["GET", "POST"])
def comparison_new(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    rules.check_create(user)
    form = PairedComparisonForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and not report_rejected_uploads(request, form) and form.is_valid():
        uploaded = form.cleaned_data["file"]
        try:
            comparison = services.comparison_create(
                user=user,
                source=Path(uploaded.temporary_file_path()),
                original_name=uploaded.name,
                spec=dataclasses.replace(form.spec(), max_groups=settings.DATASET_MAX_GROUPS),
                sha256=received_sha256(uploaded),
                web=True,
            )
        except UserError as exc:
            add_user_error(form, exc)
        else:
            messages.success(request, f"Compared {comparison.original_name} ({comparison.num_rows:,} rows).")
            return redirect("comparisons:detail", comparison_id=comparison.pk)
    return _new_page(request, user, form=form)


@accepts_uploads(rules.can_create, who="an ML engineer or a reviewer")
@login_required
@require_POST
def comparison_new_audits(request: HttpRequest) -> HttpResponse:
    """The page's second form: two audits of one file, and the file again (the same service as
    POST /api/v1/comparisons/audits/)."""
    user = request_user(request)
    rules.check_create(user)
    form = AuditsComparisonForm(request.POST, request.FILES, audits=selectors.audits_to_pair(user=user))
    if not report_rejected_uploads(request, form) and form.is_valid():
        data = form.cleaned_data
        uploaded = data["file"]
        try:
            comparison = audit_services.comparison_create_from_audits(
                user=user,
                champion=prediction_audit_get(user=user, audit_id=data["champion_audit"]),
                challenger=prediction_audit_get(user=user, audit_id=data["challenger_audit"]),
                source=Path(uploaded.temporary_file_path()),
                original_name=uploaded.name,
                sha256=received_sha256(uploaded),
                metrics=data["metrics"],
                web=True,
            )
        except UserError as exc:
            add_user_error(form, exc)
        else:
            messages.success(
                request,
                f"Compared audits #{data['champion_audit']} and #{data['challenger_audit']} on "
                f"{comparison.original_name} ({comparison.num_rows:,} rows).",
            )
            return redirect("comparisons:detail", comparison_id=comparison.pk)
    return _new_page(request, user, audits_form=form)


@login_required
@require_POST
def comparison_new_trials(request: HttpRequest) -> HttpResponse:
    """The page's third form: two completed trials (the same service as POST /api/v1/comparisons/trials/);
    a worker compares them, so the answer is the pending comparison's page."""
    user = request_user(request)
    rules.check_create(user)
    form = TrialsComparisonForm(request.POST, trials=selectors.trials_to_pair(user=user))
    if form.is_valid():
        data = form.cleaned_data
        try:
            comparison = trial_services.comparison_request_trials(
                user=user,
                champion=trial_get(user=user, trial_id=data["champion_trial"]),
                challenger=trial_get(user=user, trial_id=data["challenger_trial"]),
            )
        except UserError as exc:
            add_user_error(form, exc)
        else:
            messages.success(
                request,
                f"Comparing trials {data['champion_trial']} and {data['challenger_trial']}: a worker runs both "
                "checkpoints on their shared validation rows.",
            )
            return redirect("comparisons:detail", comparison_id=comparison.pk)
    return _new_page(request, user, trials_form=form)


@login_required
@require_GET
def comparison_detail(request: HttpRequest, comparison_id: int) -> HttpResponse:
    comparison = selectors.comparison_get(user=request_user(request), comparison_id=comparison_id)
    audits = [
        {
            "role": role,
            "audit": audit,
            "model": audit_model_text(audit),
            "document": (comparison.result.get(role) or {}).get("document"),
        }
        for role, audit in (("champion", comparison.champion_audit), ("challenger", comparison.challenger_audit))
        if audit is not None
    ]
    return render(
        request,
        "comparisons/detail.html",
        {
            "comparison": comparison,
            "audits": audits,
            "document": verdict_document_of_comparison(comparison=comparison),
            "forest_plot": kept_figure_json(paired_forest_plot, comparison.result),
        },
    )


@login_required
@require_GET
def comparison_status(request: HttpRequest, comparison_id: int) -> JsonResponse:
    """A comparison's state: the page of a pending comparison polls this (static/js/staged.js)."""
    comparison = selectors.comparison_get(user=request_user(request), comparison_id=comparison_id)
    return JsonResponse(
        {
            "status": comparison.state,
            "progress": ComparisonState(comparison.state).label.capitalize(),
            "progress_at": comparison.created_at.isoformat(),
            "error": comparison.error or None,
        }
    )
