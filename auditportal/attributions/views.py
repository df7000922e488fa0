from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from auditportal.accounts.permissions import request_user
from auditportal.attributions import presentation, rules, selectors, services
from auditportal.attributions.forms import AttributionRequestForm
from auditportal.attributions.models import AttributionState, TrialAttribution
from auditportal.experiments.models import Trial, TrialState
from auditportal.experiments.selectors import trial_get
from auditportal.fairness.errors import UserError
from auditportal.lib.forms import form_failed_redirect, form_failed_restore

FORM = "attribution"


def _page(request: HttpRequest, trial: Trial, shown: TrialAttribution | None) -> HttpResponse:
    user = request_user(request)
    attributions = list(selectors.attribution_list(user=user, trial=trial))
    if shown is None:
        # The newest done one, else the newest (pending or failed: its state is the news).
        shown = next((item for item in attributions if item.state == AttributionState.DONE), None) or next(
            iter(attributions), None
        )
    failed = form_failed_restore(request)
    form = (
        failed.bind(AttributionRequestForm(data=failed.data))
        if failed is not None and failed.name == FORM
        else AttributionRequestForm()
    )
    document = shown.document if shown is not None else None
    return render(
        request,
        "attributions/trial.html",
        {
            "trial": trial,
            "experiment": trial.experiment,
            "attributions": attributions,
            "shown": shown,
            "document": document,
            "attributes": presentation.attribute_views(document) if document else [],
            "form": form,
            "failed_error": failed.error if failed is not None else None,
            "can_request": rules.can_request(user),
            "explainable": trial.state == TrialState.COMPLETED and bool(trial.checkpoint),
            "show_checkpoint_path": rules.can_see_checkpoint_path(user),
        },
    )


@login_required
@require_GET
def trial_attributions(request: HttpRequest, trial_id: int) -> HttpResponse:
    """The trial's "Why the gaps" page: its newest attributions, the form to compute them, the others."""
    trial = trial_get(user=request_user(request), trial_id=trial_id)
    return _page(request, trial, None)


@login_required
@require_GET
def attribution_detail(request: HttpRequest, attribution_id: int) -> HttpResponse:
    attribution = selectors.attribution_get_any(user=request_user(request), attribution_id=attribution_id)
    return _page(request, attribution.trial, attribution)


@login_required
@require_POST
def attribution_request(request: HttpRequest, trial_id: int) -> HttpResponse:
    user = request_user(request)
    trial = trial_get(user=user, trial_id=trial_id)
    rules.check_request(user)
    page = reverse("attributions:trial", kwargs={"trial_id": trial.pk})
    form = AttributionRequestForm(request.POST)
    if not form.is_valid():
        return form_failed_redirect(request, url=page, name=FORM, form=form, anchor="#why")
    try:
        attribution, created = services.attribution_request(
            user=user, trial=trial, sample_size=form.cleaned_data["sample_size"], seed=form.cleaned_data["seed"]
        )
    except UserError as exc:
        field = exc.field if exc.field in form.fields else None
        form.add_error(field, exc.message)
        return form_failed_redirect(request, url=page, name=FORM, form=form, anchor="#why")
    if created:
        messages.success(request, f"Attributions of trial {trial.number} queued: a worker computes them.")
    else:
        messages.info(request, "These attributions were asked for already (same checkpoint, data, sample and seed).")
    return redirect("attributions:detail", attribution_id=attribution.pk)
