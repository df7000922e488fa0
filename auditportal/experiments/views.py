from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from auditportal.accounts.models import User
from auditportal.accounts.permissions import request_user
from auditportal.datasets.selectors import dataset_version_launch_choices
from auditportal.evidence.rules import can_freeze as can_freeze_documents
from auditportal.evidence.selectors import verdict_document_ids_of_trials, verdict_documents_of_trials
from auditportal.experiments import configs, rules, selectors, services
from auditportal.experiments.forms import LaunchForm
from auditportal.experiments.models import Experiment, ExperimentStatus, Trial
from auditportal.fairness.errors import UserError
from auditportal.lib.csvexport import csv_response
from auditportal.lib.forms import add_user_error
from auditportal.lib.params import as_id


@login_required
def experiment_index(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    return render(
        request,
        "experiments/index.html",
        {
            "experiments": selectors.experiment_list(user=user)[:200],
            "launch_backend": selectors.launch_backend(),
            "can_launch": rules.can_launch(user),
            "is_member": user.is_member,
        },
    )


@login_required
@require_http_methods(["GET", "POST"])
def experiment_new(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    rules.check_launch(user)
    initial = {"dataset_version": request.GET.get("dataset_version")}
    form = LaunchForm(request.POST or None, initial=initial, versions=dataset_version_launch_choices(user=user))
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            experiment = services.experiment_create(
                user=user,
                dataset_version=data["dataset_version"],
                template=data["template"],
                hparams=data["hparams"],
                max_trials=data["max_trials"] if data["template"] != "single" else None,
                batches=data["batches"],
                slots_per_trial=data["slots_per_trial"],
                max_concurrent_trials=data["max_concurrent_trials"] if data["template"] != "single" else None,
            )
        except UserError as exc:
            add_user_error(form, exc)
        else:
            messages.success(request, f"Queued {experiment.name}.")
            return redirect("experiments:detail", experiment_id=experiment.pk)
    context = {"form": form, "launch_backend": selectors.launch_backend()}
    return render(request, "experiments/new.html", context, status=400 if form.errors else 200)


def _sections(user: User, experiment: Experiment, trials: list[Trial]) -> dict[str, Any]:
    """What the page renders beyond the rows progress.json updates (experiments/_live.html): each
    trial's frozen documents and, for those who may freeze, its validation steps; the ASHA rungs."""
    documents = verdict_documents_of_trials(trials=trials)
    can_freeze = can_freeze_documents(user)
    return {
        "trial_rows": [
            (trial, documents[trial.pk], selectors.trial_validation_steps(trial=trial) if can_freeze else [])
            for trial in trials
        ],
        "asha_rungs": selectors.experiment_asha_rungs(experiment=experiment),
        "searcher_metric": configs.SEARCHER_METRIC,
        "asha_divisor": configs.ASHA_DIVISOR,
        "live_key": selectors.experiment_live_key(
            trials=trials, documents={pk: sorted(d.pk for d in found) for pk, found in documents.items()}
        ),
    }


@login_required
def experiment_detail(request: HttpRequest, experiment_id: int) -> HttpResponse:
    user = request_user(request)
    experiment = selectors.experiment_get(user=user, experiment_id=experiment_id)
    trials = list(selectors.trial_list(experiment=experiment))
    return render(
        request,
        "experiments/detail.html",
        {
            "experiment": experiment,
            "can_cancel": rules.can_cancel(user, experiment)
            and experiment.is_active
            and experiment.status != ExperimentStatus.CANCELLING,
            "show_internals": rules.can_see_run_internals(user),
            "cancel_note": selectors.experiment_cancel_note(experiment),
            **_sections(user, experiment, trials),
        },
    )


@login_required
def experiment_progress(request: HttpRequest, experiment_id: int) -> JsonResponse:
    """The live page's poll: the experiment as the API shows it, and ``live_key``, which changes when
    the sections the page renders itself (documents, Request review, freeze steps, ASHA rungs) would."""
    user = request_user(request)
    experiment = selectors.experiment_get(user=user, experiment_id=experiment_id)
    trials = list(selectors.trial_list(experiment=experiment))
    data = selectors.experiment_as_json(experiment, user=user, trials=trials)
    # The rows' numbers as the page writes them (the API keeps the numbers alone).
    for row, trial in zip(data["trials"], trials, strict=True):
        row["shown"] = selectors.trial_shown(trial)
    data["live_key"] = selectors.experiment_live_key(
        trials=trials, documents=verdict_document_ids_of_trials(trials=trials)
    )
    return JsonResponse(data)


@login_required
def experiment_live(request: HttpRequest, experiment_id: int) -> HttpResponse:
    """The sections of the page that progress.json's rows do not carry, rendered as the page renders
    them (experiments/_live.html), for the live page to swap in when its live_key changes."""
    user = request_user(request)
    experiment = selectors.experiment_get(user=user, experiment_id=experiment_id)
    trials = list(selectors.trial_list(experiment=experiment))
    return render(request, "experiments/_live.html", {"experiment": experiment, **_sections(user, experiment, trials)})


@login_required
def experiment_figures(request: HttpRequest, experiment_id: int) -> JsonResponse:
    """The page's figures as JSON; ``?trial=<id>`` chooses the trial of the per-trial figures."""
    user = request_user(request)
    experiment = selectors.experiment_get(user=user, experiment_id=experiment_id)
    try:
        selected = _trial_param(request, experiment)
    except UserError as exc:
        return JsonResponse({"detail": str(exc), "field": exc.field}, status=400)
    return JsonResponse(selectors.experiment_figures(experiment=experiment, selected=selected))


@login_required
def experiment_timeline_csv(request: HttpRequest, experiment_id: int) -> HttpResponseBase:
    """The eod and per-group recall timeline as CSV: every trial, or the one ``?trial=<id>`` names."""
    user = request_user(request)
    experiment = selectors.experiment_get(user=user, experiment_id=experiment_id)
    try:
        selected = _trial_param(request, experiment)
    except UserError as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain; charset=utf-8")
    if selected is None:
        trials, filename = list(selectors.trial_list(experiment=experiment)), f"experiment-{experiment.pk}-timeline.csv"
    else:
        trials, filename = [selected], f"experiment-{experiment.pk}-trial-{selected.number}-timeline.csv"
    header, rows = selectors.timeline_table(trials=trials)
    return csv_response(filename, header, rows)


def _trial_param(request: HttpRequest, experiment: Experiment) -> Trial | None:
    raw = request.GET.get("trial")
    if raw is None or raw == "":
        return None
    trial_id = as_id(raw)
    if trial_id is None:
        raise UserError(f"trial: expected a trial id (a whole number), got {raw[:40]!r}.", field="trial")
    return selectors.trial_of_experiment(experiment=experiment, trial_id=trial_id)


@login_required
@require_POST
def experiment_cancel(request: HttpRequest, experiment_id: int) -> HttpResponse:
    user = request_user(request)
    experiment = selectors.experiment_get(user=user, experiment_id=experiment_id)
    try:
        experiment = services.experiment_cancel(user=user, experiment=experiment)
    except UserError as exc:
        messages.error(request, str(exc))
    else:
        if experiment.status == ExperimentStatus.CANCELLING:
            messages.success(request, f"Cancelling {experiment.name}: a worker is stopping its trials.")
        else:
            messages.success(request, f"Cancelled {experiment.name}.")
    return redirect("experiments:detail", experiment_id=experiment.pk)


@login_required
@require_POST
def trial_validation_freeze(request: HttpRequest, trial_id: int) -> HttpResponse:
    user = request_user(request)
    trial = selectors.trial_get(user=user, trial_id=trial_id)
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
