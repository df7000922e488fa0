from __future__ import annotations

import dataclasses
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from auditportal.accounts.permissions import request_user
from auditportal.comparisons import rules, selectors, services
from auditportal.comparisons.forms import PairedComparisonForm
from auditportal.evidence.selectors import verdict_document_of_comparison
from auditportal.fairness.errors import UserError
from auditportal.fairness.figures.paired import paired_forest_plot
from auditportal.fairness.figures.serialize import figure_json
from auditportal.lib.forms import add_user_error
from auditportal.lib.uploads import accepts_uploads, received_sha256, report_rejected_uploads
from auditportal.policies.selectors import policy_active


@login_required
@require_GET
def comparison_list(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    page = Paginator(selectors.comparison_list(user=user), 50).get_page(request.GET.get("page"))
    return render(request, "comparisons/list.html", {"page": page, "can_create": rules.can_create(user)})


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
    return render(
        request, "comparisons/new.html", {"form": form, "policy": policy_active()}, status=400 if form.errors else 200
    )


@login_required
@require_GET
def comparison_detail(request: HttpRequest, comparison_id: int) -> HttpResponse:
    comparison = selectors.comparison_get(user=request_user(request), comparison_id=comparison_id)
    figure = paired_forest_plot(comparison.result)
    return render(
        request,
        "comparisons/detail.html",
        {
            "comparison": comparison,
            "document": verdict_document_of_comparison(comparison=comparison),
            "forest_plot": None if figure is None else figure_json(figure),
        },
    )
