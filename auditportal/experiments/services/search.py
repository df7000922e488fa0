"""The local ASHA search's decisions (Determined's stopping-based adaptive ASHA, experiments/asha.py):
each trial's validations entered into the rungs they reached, and the early stops, written once."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.experiments import asha, configs
from auditportal.experiments.backends import local
from auditportal.experiments.models import Experiment, MetricKind, MetricPoint, StopReason, Trial, TrialRung


def _asha_enter_rungs(experiment: Experiment, trial: Trial) -> None:
    """Enter the trial's validations into the rungs they reached, and stop it where Determined's
    stopping ASHA would (asha.py). Each entry is written once, so a decision is never taken twice."""
    if trial.asha_bracket is None or trial.stop_requested_at is not None:
        return
    entries = list(trial.rungs.order_by("rung"))
    if entries and entries[-1].outcome != asha.CONTINUED:
        return
    units = _asha_units(experiment, trial.asha_bracket)
    for rung in range(len(entries), len(units)):
        point = (
            MetricPoint.objects.filter(
                trial=trial, kind=MetricKind.VALIDATION, name=configs.SEARCHER_METRIC, step__gte=units[rung]
            )
            .order_by("step")
            .values_list("step", "value")
            .first()
        )
        if point is None:
            return
        step, metric = point
        decision = _asha_record(experiment, trial, rung=rung, units=units, step=step, metric=metric)
        if decision.outcome == asha.STOPPED:
            local.request_stop(trial, reason=StopReason.EARLY_STOP)
        if decision.outcome != asha.CONTINUED:
            return


def _asha_exited(experiment: Experiment, trial: Trial) -> None:
    """A trial that ended with an error counts in its next rung as the worst metric (Determined's
    trialExitedEarly), so it still takes a place among those later trials are ranked against."""
    if trial.asha_bracket is None:
        return
    entries = list(trial.rungs.order_by("rung"))
    if entries and entries[-1].outcome != asha.CONTINUED:
        return
    units = _asha_units(experiment, trial.asha_bracket)
    if len(entries) < len(units):
        _asha_record(experiment, trial, rung=len(entries), units=units, step=None, metric=None)


def _asha_units(experiment: Experiment, bracket: int) -> list[int]:
    plan = asha.search_brackets(max_trials=experiment.max_trials, max_time=experiment.batches)
    return asha.rung_units(plan[bracket].num_rungs, configs.ASHA_DIVISOR, experiment.batches)


def _asha_record(
    experiment: Experiment, trial: Trial, *, rung: int, units: list[int], step: int | None, metric: float | None
) -> asha.Decision:
    entered = [
        asha.EXITED_METRIC if value is None else value
        for value in TrialRung.objects.filter(
            trial__experiment=experiment, trial__asha_bracket=trial.asha_bracket, rung=rung
        ).values_list("metric", flat=True)
    ]
    ranked = asha.EXITED_METRIC if metric is None else metric
    decision = asha.decide(entered, ranked, divisor=configs.ASHA_DIVISOR, top=rung == len(units) - 1)
    outcome = asha.EXITED if step is None else decision.outcome
    with transaction.atomic():
        TrialRung.objects.create(
            trial=trial,
            rung=rung,
            units=units[rung],
            step=step,
            metric=metric,
            position=decision.position,
            entered=decision.entered,
            continuing=decision.continuing,
            outcome=outcome,
        )
        if outcome == asha.STOPPED:
            now = timezone.now()
            Trial.objects.filter(pk=trial.pk).update(stop_requested_at=now, stop_reason=StopReason.EARLY_STOP)
            trial.stop_requested_at, trial.stop_reason = now, StopReason.EARLY_STOP
            event_record(
                actor=None,
                verb=Verb.TRIAL_EARLY_STOPPED,
                target=trial,
                data={
                    "experiment": experiment.pk,
                    "trial": trial.number,
                    "bracket": trial.asha_bracket,
                    "rung": rung + 1,
                    "rungs": len(units),
                    "step": step,
                    configs.SEARCHER_METRIC: metric,
                    "position": decision.position,
                    "entered": decision.entered,
                    "continuing": decision.continuing,
                },
            )
    return decision
