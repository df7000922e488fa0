from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from auditportal.accounts.permissions import request_user
from auditportal.evidence import presentation, selectors, services
from auditportal.evidence.models import VerdictDocument
from auditportal.experiments.selectors import trial_get
from auditportal.fairness.errors import UserError
from auditportal.fairness.figures.audit import verdict_document_forest_plot
from auditportal.fairness.figures.serialize import figure_json


@login_required
def verdict_document_detail(request: HttpRequest, document_id: int) -> HttpResponse:
    document = selectors.verdict_document_get(user=request_user(request), document_id=document_id)
    value = document.document
    forest = verdict_document_forest_plot(value)
    return render(
        request,
        "evidence/document.html",
        {
            "document": document,
            "value": value,
            "headline": document.headline,
            "summaries": presentation.attribute_summaries(document, value),
            "pretty": presentation.pretty(value),
            "forest_plot": None if forest is None else figure_json(forest),
        },
    )


@login_required
def verdict_document_canonical(request: HttpRequest, document_id: int) -> HttpResponse:
    document = selectors.verdict_document_get(user=request_user(request), document_id=document_id)
    return canonical_response(document)


def canonical_response(document: VerdictDocument) -> HttpResponse:
    """The stored bytes exactly: their SHA-256 is the document's."""
    response = HttpResponse(document.canonical_bytes, content_type="application/json")
    response["Content-Disposition"] = (
        f'attachment; filename="verdict-document-{document.pk}-{document.short_hash}.json"'
    )
    response["X-Content-SHA256"] = document.sha256
    return response


@login_required
@require_POST
def trial_validation_freeze(request: HttpRequest, trial_id: int) -> HttpResponse:
    user = request_user(request)
    trial = trial_get(user=user, trial_id=trial_id)
    try:
        step = int(request.POST.get("step", ""))
    except ValueError:
        messages.error(request, "Choose a validation step to freeze.")
        return redirect("experiments:detail", experiment_id=trial.experiment_id)
    try:
        document = services.verdict_document_freeze_trial(user=user, trial=trial, step=step)
    except UserError as exc:
        messages.error(request, exc.message)
        return redirect("experiments:detail", experiment_id=trial.experiment_id)
    messages.success(request, f"Froze trial {trial.number}'s validation at step {step}: SHA-256 {document.sha256}.")
    return redirect("evidence:document", document_id=document.pk)
