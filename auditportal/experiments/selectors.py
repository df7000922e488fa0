from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet
from django.http import Http404

from auditportal.accounts.models import User
from auditportal.experiments.models import Experiment, MetricKind, MetricPoint, Trial, TrialVerdict


def experiment_list(*, user: User) -> QuerySet[Experiment]:
    if not user.is_authenticated or not user.is_member:
        return Experiment.objects.none()
    return Experiment.objects.select_related("dataset_version__dataset", "launched_by")


def experiment_get(*, user: User, experiment_id: int) -> Experiment:
    try:
        return experiment_list(user=user).get(pk=experiment_id)
    except Experiment.DoesNotExist:
        raise Http404("No such experiment.") from None


def trial_list(*, experiment: Experiment) -> QuerySet[Trial]:
    verdicts = TrialVerdict.objects.select_related("policy")
    return experiment.trials.order_by("number").prefetch_related(Prefetch("verdicts", queryset=verdicts))


def verdict_as_json(verdict: TrialVerdict) -> dict[str, Any]:
    return {
        "attribute": verdict.attribute,
        "verdict": verdict.verdict or None,
        "step": verdict.step,
        "group": verdict.group or None,
        "reference": verdict.reference or None,
        "difference": verdict.difference,
        "ci_low": verdict.ci_low,
        "ci_high": verdict.ci_high,
        "positives_needed": verdict.positives_needed,
        "tolerance": verdict.tolerance,
        "alpha": verdict.alpha,
        "policy_version": verdict.policy.version if verdict.policy else None,
    }


def trial_group_counts(*, trial: Trial, attribute: str, group: str | None = None) -> QuerySet[MetricPoint]:
    """Per-group metric points (counts, recall, ...) of one attribute, optionally one group."""
    points = trial.metric_points.filter(attribute=attribute)
    if group is not None:
        points = points.filter(group=group)
    return points.order_by("kind", "step", "name")


def trial_as_json(trial: Trial) -> dict[str, Any]:
    return {
        "id": trial.pk,
        "number": trial.number,
        "det_trial_id": trial.det_trial_id,
        "state": trial.state,
        "state_label": trial.get_state_display(),
        "steps": trial.steps_done,
        "steps_planned": trial.steps_planned,
        "progress_percent": trial.progress_percent,
        "hparams": trial.hparams,
        "metrics": {
            "eod": trial.latest_eod,
            "fair_objective": trial.latest_fair_objective,
            "accuracy": trial.latest_accuracy,
            "step": trial.latest_step,
        },
        "verdicts": [verdict_as_json(verdict) for verdict in trial.verdicts.all()],
        "checkpoint": trial.checkpoint,
        "error": trial.error,
        "log_tail": trial.log_tail,
    }


def experiment_as_json(experiment: Experiment) -> dict[str, Any]:
    trials = list(trial_list(experiment=experiment))
    return {
        "experiment": experiment.pk,
        "name": experiment.name,
        "status": experiment.status,
        "status_label": experiment.get_status_display(),
        "error": experiment.error,
        "template": experiment.template,
        "backend": experiment.backend,
        "det_experiment_id": experiment.det_experiment_id,
        "dataset_version": experiment.dataset_version_id,
        "active": experiment.is_active,
        "trials": [trial_as_json(trial) for trial in trials],
    }


def trial_validation_steps(*, trial: Trial) -> list[int]:
    """The steps at which ``trial`` reported a validation, oldest first."""
    steps = trial.metric_points.filter(kind=MetricKind.VALIDATION).values_list("step", flat=True).distinct()
    return sorted(steps)


def trial_validation_counts(*, trial: Trial, step: int) -> dict[str, float | None]:
    """The ``count/...`` metrics of one validation, as the trainer reported them (the input of
    fairness.metricsfile.confusion_counts); empty when there was no validation at ``step``."""
    points = trial.metric_points.filter(kind=MetricKind.VALIDATION, step=step, name__startswith="count/")
    return dict(points.values_list("name", "value"))


def trial_get(*, user: User, trial_id: int) -> Trial:
    """A trial of an experiment ``user`` may see; 404 otherwise."""
    try:
        return Trial.objects.select_related("experiment__dataset_version__dataset").get(
            pk=trial_id, experiment__in=experiment_list(user=user).values("pk")
        )
    except Trial.DoesNotExist:
        raise Http404("No such trial.") from None
