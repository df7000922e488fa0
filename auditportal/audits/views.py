from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from auditportal.accounts.permissions import request_user
from auditportal.audits import rules, selectors, services
from auditportal.audits.forms import PredictionAuditForm, PredictionAuditRetireForm
from auditportal.audits.models import PredictionAudit, QueuedPredictionAudit, QueuedStatus
from auditportal.evidence.selectors import verdict_documents_of_audit
from auditportal.fairness.documents.plain import document_plain_summary
from auditportal.fairness.errors import UserError
from auditportal.fairness.figures.audit import audit_forest_plot, references
from auditportal.fairness.figures.serialize import kept_figure_json
from auditportal.fairness.statistics import whatif
from auditportal.fairness.text import presentation
from auditportal.lib.csvexport import csv_response
from auditportal.lib.forms import add_user_error, form_failed_redirect, form_failed_restore
from auditportal.lib.uploads import accepts_uploads, received_sha256, report_rejected_uploads
from auditportal.policies.selectors import policy_active

AUDITS_PER_PAGE = 25


@login_required
def prediction_audit_list(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    # get_page: a page number that is not a number shows the first page, one past the end the last.
    page = Paginator(selectors.prediction_audit_list(user=user), AUDITS_PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "audits/list.html",
        {
            "audits": page,
            "page": page,
            "can_run": rules.can_run(user),
            "is_member": user.is_member,
        },
    )


@accepts_uploads(rules.can_run, who="an ML engineer or a reviewer")
@login_required
@require_http_methods(["GET", "POST"])
def prediction_audit_new(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    rules.check_run(user)
    form = PredictionAuditForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and not report_rejected_uploads(request, form) and form.is_valid():
        uploaded = form.cleaned_data["file"]
        try:
            outcome = services.prediction_audit_submit(
                user=user,
                source=Path(uploaded.temporary_file_path()),
                original_name=uploaded.name,
                spec=form.spec(),
                sha256=received_sha256(uploaded),
            )
        except UserError as exc:
            add_user_error(form, exc)
        else:
            if isinstance(outcome, QueuedPredictionAudit):
                return redirect("audits:prediction-queued", queued_id=outcome.pk)
            messages.success(request, f"Audited {outcome.original_name} ({outcome.num_rows:,} rows).")
            return redirect("audits:prediction", audit_id=outcome.pk)
    return render(
        request,
        "audits/new.html",
        {"form": form, "policy": policy_active()},
        status=400 if form.errors else 200,
    )


def _detail(request: HttpRequest, audit: PredictionAudit) -> HttpResponse:
    user = request_user(request)
    retire_form: PredictionAuditRetireForm | None = None
    failed = form_failed_restore(request)
    if failed is not None and failed.name == "retire" and not audit.is_retired:
        # The retire form refused on its POST-only URL, shown again here with its errors.
        retire_form = failed.bind(PredictionAuditRetireForm(failed.data))
    elif failed is not None and failed.name == "retire":
        # Retired meanwhile (the refusal says by whom): no form to show it on.
        for errors in failed.errors.values():
            for error in errors:
                messages.error(request, error)
    elif not audit.is_retired and rules.can_retire(user, audit):
        retire_form = PredictionAuditRetireForm()
    return render(
        request,
        "audits/detail.html",
        {
            "audit": audit,
            "attributes": presentation.attribute_tables(audit.result),
            "document_verdict": presentation.document_verdict(audit.result),
            "plain_summary": document_plain_summary(audit.result),
            "attribute_level": presentation.ATTRIBUTE_LEVEL,
            "rate_level": f"{(1 - audit.result['alpha']) * 100:g}%",
            "exact_below": presentation.exact_below(audit.result["alpha"]),
            "retire_form": retire_form,
            "documents": verdict_documents_of_audit(audit=audit),
            "forest_plot": kept_figure_json(audit_forest_plot, audit.result),
            "forest_references": references(audit.result.get("attributes", {})),
        },
    )


@login_required
def prediction_audit_detail(request: HttpRequest, audit_id: int) -> HttpResponse:
    return _detail(request, selectors.prediction_audit_get(user=request_user(request), audit_id=audit_id))


@login_required
@require_http_methods(["POST"])
def prediction_audit_retire(request: HttpRequest, audit_id: int) -> HttpResponse:
    user = request_user(request)
    audit = selectors.prediction_audit_get(user=user, audit_id=audit_id)
    form = PredictionAuditRetireForm(request.POST)
    if form.is_valid():
        try:
            services.prediction_audit_retire(user=user, audit=audit, reason=form.cleaned_data["reason"])
        except UserError as exc:
            add_user_error(form, exc)
        else:
            messages.success(request, f"Prediction audit #{audit.pk} is retired.")
            return redirect("audits:prediction", audit_id=audit.pk)
    # Back to the audit's page (303) with the errors: the address bar never rests on the POST-only URL.
    return form_failed_redirect(
        request, url=reverse("audits:prediction", kwargs={"audit_id": audit.pk}), name="retire", form=form,
        anchor="#retire",
    )  # fmt: skip


@login_required
def prediction_audit_comparisons_csv(request: HttpRequest, audit_id: int) -> HttpResponseBase:
    """The audit's comparison table, one row per comparison (docs/dashboard.md), safe to open in a
    spreadsheet: group names come from the uploaded file."""
    audit = selectors.prediction_audit_get(user=request_user(request), audit_id=audit_id)
    columns = presentation.COMPARISON_COLUMNS
    rows = ([record[column] for column in columns] for record in presentation.comparison_records(audit.result))
    return csv_response(f"prediction-audit-{audit.pk}-comparisons.csv", columns, rows)


@login_required
def prediction_audit_queued(request: HttpRequest, queued_id: str) -> HttpResponse:
    """The page of a large file's audit while a worker has it: the audit once it is done."""
    queued = selectors.queued_prediction_audit_get(user=request_user(request), queued_id=str(queued_id))
    if queued.status == QueuedStatus.DONE and queued.audit is not None:
        return redirect("audits:prediction", audit_id=queued.audit.pk)
    return render(
        request,
        "audits/queued.html",
        {"queued": queued, "waiting_for_worker": QueuedStatus.QUEUED.label},
    )


@login_required
@require_GET
def prediction_audit_queued_status(request: HttpRequest, queued_id: str) -> JsonResponse:
    """What the worker does with a queued audit: the waiting page polls this."""
    queued = selectors.queued_prediction_audit_get(user=request_user(request), queued_id=str(queued_id))
    return JsonResponse(
        {
            "status": queued.status,
            "progress": queued.get_status_display(),
            "progress_at": (queued.started_at or queued.created_at).isoformat(),
            "error": queued.error or None,
            "audit_url": reverse("audits:prediction", args=[queued.audit_id]) if queued.audit_id else None,
        }
    )


# ---------------------------------------------------------------------------------------- what-if


@accepts_uploads(rules.can_run, who="an ML engineer or a reviewer")
@login_required
@require_http_methods(["GET", "POST"])
def whatif_new(request: HttpRequest) -> HttpResponse:
    """Start a what-if: the audit's upload form, with a score column."""
    user = request_user(request)
    rules.check_run(user)
    form = PredictionAuditForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and not report_rejected_uploads(request, form) and form.is_valid():
        uploaded = form.cleaned_data["file"]
        try:
            item = services.whatif_start(
                user=user,
                source=Path(uploaded.temporary_file_path()),
                original_name=uploaded.name,
                spec=form.spec(),
                sha256=received_sha256(uploaded),
            )
        except UserError as exc:
            add_user_error(form, exc)
        else:
            return redirect("audits:whatif", whatif_id=item.pk)
    return render(
        request,
        "audits/whatif_new.html",
        {"form": form, "policy": policy_active()},
        status=400 if form.errors else 200,
    )


def _slider_step(low: float, high: float) -> float:
    span = high - low
    if span <= 0:
        return 0.001
    return float(10 ** math.floor(math.log10(span / 1000)))


@login_required
@require_GET
def whatif_detail(request: HttpRequest, whatif_id: int) -> HttpResponse:
    user = request_user(request)
    item = selectors.whatif_get(user=user, whatif_id=whatif_id)
    context: dict[str, Any] = {"item": item, "can_run": rules.can_run(user)}
    if not item.is_ready:
        return render(request, "audits/whatif.html", context)
    prepared = selectors.whatif_load(item=item)
    keys = prepared.attribute_keys
    attribute = request.GET.get("attribute") or ""
    if attribute not in keys:
        attribute = keys[0]
    error: UserError | None = None
    try:
        thresholds = whatif.thresholds_from_query(
            [(key, value) for key, values in request.GET.lists() for value in values],
            attribute_keys=keys,
            default=float(prepared.spec.threshold or 0.5),
        )
        answer = selectors.whatif_answer(item=item, thresholds=thresholds)
    except UserError as exc:
        error = exc
        thresholds = whatif.Thresholds(threshold=float(prepared.spec.threshold or 0.5))
        answer = selectors.whatif_answer(item=item, thresholds=thresholds)
    if thresholds.attribute:
        attribute = thresholds.attribute
    low, high = prepared.score_range()
    step = _slider_step(low, high)
    groups = [
        {
            "name": group,
            "field": whatif.override_field(attribute, group),
            "value": thresholds.groups.get(group) if thresholds.attribute == attribute else None,
        }
        for group in prepared.groups_of(attribute)
        # An intersection's combinations without rows are no groups (as in the document): no box for them.
        if group in answer["document"]["attributes"].get(attribute, {}).get("groups", {group: None})
    ]
    context.update(
        {
            "answer": answer,
            "doc": answer["document"],
            "thresholds": thresholds,
            "frozen_fields": [("threshold", thresholds.threshold)]
            + [(whatif.override_field(attribute, name), value) for name, value in thresholds.groups.items()],
            "attribute": attribute,
            "attribute_keys": keys,
            "is_intersection": prepared.spec.intersect and attribute == prepared.intersection_key,
            "groups": groups,
            "slider": {"min": math.floor(low / step) * step, "max": math.ceil(high / step) * step, "step": step},
            "error": error,
            "rows": presentation.comparison_records(answer["document"]),
            "document_verdict": presentation.document_verdict(answer["document"]),
        }
    )
    return render(request, "audits/whatif.html", context, status=400 if error else 200)


@login_required
@require_http_methods(["POST"])
def whatif_freeze(request: HttpRequest, whatif_id: int) -> HttpResponse:
    user = request_user(request)
    item = selectors.whatif_get(user=user, whatif_id=whatif_id)
    rules.check_run(user)
    try:
        prepared = selectors.whatif_load(item=item) if item.is_ready else None
        if prepared is None:
            raise UserError("This what-if is not prepared yet.")
        thresholds = whatif.thresholds_from_query(
            [(key, value) for key, values in request.POST.lists() for value in values],
            attribute_keys=prepared.attribute_keys,
            default=float(prepared.spec.threshold or 0.5),
        )
        audit = services.whatif_freeze(user=user, item=item, thresholds=thresholds)
    except UserError as exc:
        messages.error(request, f"Not frozen: {exc}")
        return redirect("audits:whatif", whatif_id=item.pk)
    messages.success(request, f"Frozen as prediction audit #{audit.pk}, with its verdict document.")
    return redirect("audits:prediction", audit_id=audit.pk)
