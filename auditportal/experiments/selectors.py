from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from django.conf import settings
from django.db import connection
from django.db.models import Prefetch, Q, QuerySet
from django.http import Http404
from django.utils import formats, timezone

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.selectors import events_about
from auditportal.experiments import asha, configs, rules
from auditportal.experiments.models import (
    TERMINAL_TRIAL_STATES,
    Backend,
    Experiment,
    ExperimentStatus,
    MetricKind,
    MetricPoint,
    RungOutcome,
    StopReason,
    Template,
    Trial,
    TrialRung,
    TrialVerdict,
)
from auditportal.fairness.figures import experiment as figures
from auditportal.fairness.figures.serialize import figure_json
from auditportal.fairness.files.intersections import attribute_key, split_key
from auditportal.fairness.files.metricsfile import CONFUSION_CELLS, decode_group
from auditportal.fairness.statistics import judge
from auditportal.fairness.statistics.eod import CountSeries, EodPair, eod_pairs
from auditportal.fairness.text import numbers
from auditportal.fairness.text.presentation import hparams_text
from auditportal.policies.selectors import policy_active


def experiment_list(*, user: User) -> QuerySet[Experiment]:
    if not rules.can_read(user):
        return Experiment.objects.none()
    return Experiment.objects.select_related("dataset_version__dataset", "launched_by")


def run_internals_visible(*, user: User) -> bool:
    """experiments.rules.can_see_run_internals, kept under this name for the approvals pages."""
    return rules.can_see_run_internals(user)


def launch_backend() -> str:
    """Where a new experiment will train, in words: the pages that list and launch experiments say so,
    so that a portal meant for a cluster is never silently training locally."""
    label = Backend(settings.EXPERIMENT_BACKEND).label
    if settings.EXPERIMENT_BACKEND == Backend.DETERMINED:
        return f"{label} at {settings.DET_MASTER}"
    return str(label)


def experiment_get(*, user: User, experiment_id: int) -> Experiment:
    try:
        return experiment_list(user=user).get(pk=experiment_id)
    except Experiment.DoesNotExist:
        raise Http404("No such experiment.") from None


def trial_list(*, experiment: Experiment) -> QuerySet[Trial]:
    # Without their documents (tens of kilobytes each, read on every poll of the live page);
    # verdict_documents and the selected trial's figures read those they need.
    verdicts = TrialVerdict.objects.select_related("policy").defer("document")
    return experiment.trials.order_by("number").prefetch_related(
        Prefetch("verdicts", queryset=verdicts), Prefetch("rungs", queryset=TrialRung.objects.order_by("rung"))
    )


def _moment(value: Any) -> str:
    return formats.date_format(timezone.localtime(value), "Y-m-d H:i:s")


def _finished_before_stop(*, state: str, steps_done: int, steps_planned: int) -> bool:
    """An early stop chosen after the trial had trained its whole length (decisions are asynchronous,
    on a cluster too): nothing was cut short, so it does not count as stopped early."""
    return state in TERMINAL_TRIAL_STATES and bool(steps_planned) and steps_done >= steps_planned


def trial_stopped_at_rung(trial: Trial) -> int | None:
    """The rung (from 1) where the search stopped the trial before the end of its training; None when
    it was not stopped, or the stop came after it had finished."""
    early = next((entry for entry in trial.rungs.all() if entry.outcome == RungOutcome.STOPPED), None)
    if early is None or _finished_before_stop(
        state=trial.state, steps_done=trial.steps_done, steps_planned=trial.steps_planned
    ):
        return None
    return early.rung + 1


def trial_stop_note(trial: Trial) -> str:
    """How the portal stopped the trial, as the page shows it: an early stop with its rung and rank,
    or a cancel; with when the stop was asked and when the trial's processes had actually ended."""
    rungs = list(trial.rungs.all())
    early = next((entry for entry in rungs if entry.outcome == RungOutcome.STOPPED), None)
    parts = []
    if early is not None:
        metric = "not reported" if early.metric is None else numbers.significant(early.metric, 4)
        ranked = (
            f"at rung {early.rung + 1} ({numbers.count(early.units)} batches): {configs.SEARCHER_METRIC} {metric} "
            f"ranked {numbers.count(early.position)} of {numbers.count(early.entered)}; "
            f"the best {numbers.count(early.continuing)} went on."
        )
        if _finished_before_stop(state=trial.state, steps_done=trial.steps_done, steps_planned=trial.steps_planned):
            return f"Chosen to stop {ranked} It had finished before the stop reached it."
        parts.append(f"Stopped early {ranked}")
    elif trial.stop_reason == StopReason.CANCEL and trial.stop_requested_at is not None:
        parts.append(f"Stop asked {_moment(trial.stop_requested_at)}.")
    if trial.stop_requested_at is not None:
        if trial.is_terminal and trial.ended_at is not None:
            parts.append(f"Stopped {_moment(trial.ended_at)}.")
        elif not trial.is_terminal:
            parts.append("Stopping…")
    return " ".join(parts)


def experiment_cancel_note(experiment: Experiment) -> str:
    """When a cancel was asked for, and whether (and when) the trials have stopped."""
    if experiment.cancel_requested_at is None:
        return ""
    note = f"Cancel requested {_moment(experiment.cancel_requested_at)}"
    if experiment.status == ExperimentStatus.CANCELLING:
        left = experiment.trials.exclude(state__in=TERMINAL_TRIAL_STATES).count()
        return f"{note}; {left} trial{'s' if left != 1 else ''} still stopping."
    if experiment.ended_at is not None:
        return f"{note}; every trial had stopped by {_moment(experiment.ended_at)}."
    return f"{note}."


def experiment_asha_rungs(*, experiment: Experiment) -> list[dict[str, Any]]:
    """The local ASHA search's rungs: per bracket and rung, its length and how many trials entered
    it, went on, were stopped there (``stopped``: before the end of their training; ``stopped_late``:
    chosen to stop once they had already finished), or exited before it. Empty for other experiments."""
    if experiment.template != Template.ASHA or experiment.backend != Backend.LOCAL:
        return []
    plan = asha.search_brackets(
        max_trials=experiment.max_trials,
        max_time=experiment.batches,
        max_concurrent_trials=experiment.max_concurrent_trials,
    )
    counts: dict[tuple[int, int], dict[str, int]] = {}
    rows = TrialRung.objects.filter(trial__experiment=experiment).values_list(
        "trial__asha_bracket", "rung", "outcome", "trial__state", "trial__steps_done", "trial__steps_planned"
    )
    for of_bracket, rung, outcome, state, steps_done, steps_planned in rows:
        if of_bracket is not None:
            if outcome == RungOutcome.STOPPED and _finished_before_stop(
                state=state, steps_done=steps_done, steps_planned=steps_planned
            ):
                outcome = "stopped_late"
            tally = counts.setdefault((of_bracket, rung), {})
            tally[outcome] = tally.get(outcome, 0) + 1
    table = []
    for index, bracket in enumerate(plan):
        units = asha.rung_units(bracket.num_rungs, configs.ASHA_DIVISOR, experiment.batches)
        for rung, length in enumerate(units):
            tally = counts.get((index, rung), {})
            table.append(
                {
                    "bracket": index + 1,
                    "brackets": len(plan),
                    "bracket_trials": bracket.max_trials,
                    "bracket_concurrent": min(bracket.max_concurrent_trials, bracket.max_trials),
                    "rung": rung + 1,
                    "rungs": len(units),
                    "units": length,
                    "entered": sum(tally.values()),
                    "continued": tally.get(RungOutcome.CONTINUED, 0),
                    "stopped": tally.get(RungOutcome.STOPPED, 0),
                    "stopped_late": tally.get("stopped_late", 0),
                    "completed": tally.get(RungOutcome.COMPLETED, 0),
                    "exited": tally.get(RungOutcome.EXITED, 0),
                }
            )
    return table


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


def trial_as_json(trial: Trial, *, internals: bool) -> dict[str, Any]:
    """``internals``: with the checkpoint and the log tail (rules.can_see_run_internals); else both null."""
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
        # As the page shows them (fairness.text.presentation.hparam_text), so the live rows match.
        "hparams_text": hparams_text(trial.hparams),
        "metrics": {
            "eod": trial.latest_eod,
            "eod_beyond_noise": trial.latest_eod_beyond_noise,
            "fair_objective": trial.latest_fair_objective,
            "accuracy": trial.latest_accuracy,
            "step": trial.latest_step,
        },
        "verdicts": [verdict_as_json(verdict) for verdict in trial.verdicts.all()],
        "checkpoint": trial.checkpoint if internals else None,
        "error": trial.error,
        "log_tail": trial.log_tail if internals else None,
        "ended_at": trial.ended_at.isoformat() if trial.ended_at else None,
        "stop_reason": trial.stop_reason or None,
        "stop_requested_at": trial.stop_requested_at.isoformat() if trial.stop_requested_at else None,
        "stopped_at_rung": trial_stopped_at_rung(trial),
        "note": trial_stop_note(trial),
    }


def verdict_gap_text(verdict: TrialVerdict) -> str:
    """The verdict's deciding recall gap as the page writes it beside the badge: ``female − male:
    -0.210 [-0.260, -0.160]``, and for an INCONCLUSIVE one what would decide it; "" without a gap."""
    if verdict.difference is None:
        return ""
    text = (
        f"{verdict.group} − {verdict.reference}: {numbers.gap(verdict.difference)} "
        f"{numbers.interval(verdict.ci_low, verdict.ci_high)}"
    )
    if verdict.verdict == "INCONCLUSIVE" and verdict.positives_needed:
        text += f"; ~{numbers.count(verdict.positives_needed)} positives in {verdict.group} to decide"
    return text


def trial_shown(trial: Trial) -> dict[str, Any]:
    """A trial's numbers as its row on the page shows them (fairness/text/numbers.py), for the live
    rows to show them alike: rates at 3 significant digits, counts with separators."""
    return {
        "eod": numbers.rate(trial.latest_eod),
        "eod_beyond_noise": numbers.rate(trial.latest_eod_beyond_noise),
        "fair_objective": numbers.rate(trial.latest_fair_objective),
        "accuracy": numbers.rate(trial.latest_accuracy),
        "steps": f"{numbers.count(trial.steps_done)} / {numbers.count(trial.steps_planned)}",
        "verdicts": {verdict.attribute: verdict_gap_text(verdict) for verdict in trial.verdicts.all()},
    }


def experiment_as_json(experiment: Experiment, *, user: User, trials: list[Trial] | None = None) -> dict[str, Any]:
    """The experiment and its trials (``trials``, when already read with trial_list) as the live
    page and the API show them to ``user``."""
    internals = rules.can_see_run_internals(user)
    if trials is None:
        trials = list(trial_list(experiment=experiment))
    return {
        "experiment": experiment.pk,
        "name": experiment.name,
        "status": experiment.status,
        "status_label": experiment.get_status_display(),
        "error": experiment.error,
        "template": experiment.template,
        "slots_per_trial": experiment.slots_per_trial,
        "max_concurrent_trials": experiment.max_concurrent_trials,
        "stopped_early": sum(1 for trial in trials if trial_stopped_at_rung(trial) is not None),
        "backend": experiment.backend,
        "det_experiment_id": experiment.det_experiment_id,
        "dataset_version": experiment.dataset_version_id,
        "active": experiment.is_active,
        "cancel_requested_at": experiment.cancel_requested_at.isoformat() if experiment.cancel_requested_at else None,
        "ended_at": experiment.ended_at.isoformat() if experiment.ended_at else None,
        "cancel_note": experiment_cancel_note(experiment),
        "trials": [trial_as_json(trial, internals=internals) for trial in trials],
    }


def experiment_live_key(*, trials: list[Trial], documents: dict[int, list[int]]) -> str:
    """A digest of what the page's server-rendered sections show beyond progress.json's rows: each
    trial's frozen documents (``documents``: ids per trial), whether it has a checkpoint (the Request
    review link), its validation steps (the freeze form) and its ASHA rungs (the rung table). The page
    starts with it; the live page fetches the sections again when progress.json brings another."""
    state = [
        (
            trial.pk,
            documents.get(trial.pk, []),
            bool(trial.checkpoint),
            trial.latest_step,
            [(entry.rung, entry.outcome) for entry in trial.rungs.all()],
        )
        for trial in trials
    ]
    return hashlib.sha256(repr(state).encode()).hexdigest()[:16]


def trial_validation_steps(*, trial: Trial) -> list[int]:
    """The steps at which ``trial`` reported a validation, oldest first."""
    steps = trial.metric_points.filter(kind=MetricKind.VALIDATION).values_list("step", flat=True).distinct()
    return sorted(steps)


def trial_validation_counts(*, trial: Trial, step: int) -> dict[str, float | None]:
    """The ``count/...`` metrics of one validation, as the trainer reported them (the input of
    fairness.files.metricsfile.confusion_counts); empty when there was no validation at ``step``."""
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


def trial_of_experiment(*, experiment: Experiment, trial_id: int) -> Trial:
    """One trial of ``experiment`` (already scoped to the user); 404 for any other id."""
    try:
        return experiment.trials.get(pk=trial_id)
    except Trial.DoesNotExist:
        raise Http404("No such trial in this experiment.") from None


# ---------------------------------------------------------------------------- the page's figures


@dataclass(frozen=True)
class ExperimentOverview:
    """Every trial of an experiment as the page's figures draw them (a trial's report too): its eod per
    validation step with the verdict in force, and its latest and lowest values (with the noise floor
    of the pair of groups that set the lowest); the tolerance and alpha of the newest verdict and the
    largest noise floor of any trial's comparisons."""

    trials: list[Trial]
    timelines: list[figures.TrialTimeline]
    summaries: list[figures.TrialSummary]
    tolerance: float
    noise_floor: float | None
    alpha: float = 0.05


def experiment_overview(*, experiment: Experiment) -> ExperimentOverview:
    trials = list(trial_list(experiment=experiment))
    ids = [trial.pk for trial in trials]
    series = _eod_series(ids)
    changes = _verdict_changes(ids)
    tolerance, alpha = _tolerance_and_alpha(trials)
    nothing = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))
    lowest_of = {trial.pk: figures.lowest_eod(*series.get(trial.pk, nothing)) for trial in trials}
    lowest_pairs = _eod_pairs_at(
        {trial_id: [step] for trial_id, (_, step) in lowest_of.items() if step is not None}, alpha=alpha
    )
    timelines = []
    summaries = []
    floors: list[float] = []
    for trial in trials:
        steps, eod = series.get(trial.pk, nothing)
        timelines.append(
            figures.TrialTimeline(
                trial_id=trial.pk,
                number=trial.number,
                steps=steps,
                eod=eod,
                verdicts=figures.verdicts_in_force(steps, changes.get(trial.pk, [])),
            )
        )
        verdicts = list(trial.verdicts.all())
        trial_floor = max((v.noise_floor for v in verdicts if v.noise_floor is not None), default=None)
        if trial_floor is not None:
            floors.append(trial_floor)
        lowest, lowest_step = lowest_of[trial.pk]
        (pair,) = lowest_pairs.get(trial.pk, [None])
        summaries.append(
            figures.TrialSummary(
                trial_id=trial.pk,
                number=trial.number,
                accuracy=trial.latest_accuracy,
                eod=trial.latest_eod,
                fair_objective=trial.latest_fair_objective,
                lowest_eod=lowest,
                lowest_eod_step=lowest_step,
                noise_floor=trial_floor,
                verdict=judge.worst([verdict.verdict or None for verdict in verdicts]),
                hparams=hparams_text(trial.hparams),
                lowest_eod_floor=None if pair is None else pair.noise_floor,
                lowest_eod_pair=None if pair is None else figures.pair_label(pair.attribute, pair.high, pair.low),
            )
        )
    return ExperimentOverview(
        trials=trials,
        timelines=timelines,
        summaries=summaries,
        tolerance=tolerance,
        noise_floor=max(floors) if floors else None,
        alpha=alpha,
    )


def experiment_figures(*, experiment: Experiment, selected: Trial | None = None) -> dict[str, Any]:
    """Every figure of the experiment page as JSON (docs/dashboard.md), the trial-specific ones
    (recall per group, worker shares) for ``selected``, by default the trial with the lowest
    fair_objective (the searcher's metric). Bounded whatever the experiment's size: the timeline's
    traces are downsampled together to at most figures.TIMELINE_POINTS points."""
    overview = experiment_overview(experiment=experiment)
    trials = overview.trials
    if selected is None:
        selected = _default_trial(trials)
    timelines, summaries = overview.timelines, overview.summaries
    tolerance, floor = overview.tolerance, overview.noise_floor
    chosen = selected.pk if selected is not None else None
    eod_floor = _eod_floor(timelines, selected=chosen, alpha=overview.alpha)
    result: dict[str, Any] = {
        "experiment": experiment.pk,
        "selected": None if selected is None else {"id": selected.pk, "number": selected.number},
        "trials": [{"id": trial.pk, "number": trial.number, "latest_step": trial.latest_step} for trial in trials],
        "tolerance": tolerance,
        "noise_floor": floor,
        "figures": {
            "timeline": figure_json(
                figures.eod_timeline(
                    timelines, tolerance=tolerance, eod_floor=eod_floor, selected=chosen, max_step=experiment.batches
                )
            ),
            "scatter_eod": figure_json(figures.accuracy_scatter(summaries, objective="eod", selected=chosen)),
            "scatter_objective": figure_json(
                figures.accuracy_scatter(summaries, objective="fair_objective", selected=chosen)
            ),
            "lowest": figure_json(figures.lowest_eod_bars(summaries, tolerance=tolerance, selected=chosen)),
        },
    }
    result.update(_trial_figures(selected))
    return result


def _trial_figures(selected: Trial | None) -> dict[str, Any]:
    figures_of_trial: dict[str, Any] = {"recall": None, "workers": None}
    notes: dict[str, str] = {}
    if selected is None:
        notes["workers"] = "No trial yet."
    else:
        # Only the selected trial's verdict documents are read (the list's verdicts leave them out).
        verdicts = list(TrialVerdict.objects.filter(trial=selected).order_by("attribute"))
        recall = [
            figures.attribute_recall(verdict.attribute, verdict.document, verdict.verdict or None)
            for verdict in verdicts
        ]
        step = max((verdict.step for verdict in verdicts), default=None)
        figures_of_trial["recall"] = figure_json(figures.group_recall(recall, trial_number=selected.number, step=step))
        workers, note = _worker_share_figure(selected)
        figures_of_trial["workers"] = workers
        if note:
            notes["workers"] = note
    return {"figures_trial": figures_of_trial, "notes": notes}


def _default_trial(trials: list[Trial]) -> Trial | None:
    judged = [trial for trial in trials if trial.latest_fair_objective is not None]
    if judged:
        return min(judged, key=lambda trial: (trial.latest_fair_objective, trial.number))
    return trials[0] if trials else None


def _eod_series(trial_ids: list[int]) -> dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]:
    """Each trial's eod per validation step (NaN where undefined), read from the index of series
    without a group (MetricPoint.Meta.indexes) without touching the table."""
    if not trial_ids:
        return {}
    points = MetricPoint.objects.filter(trial_id__in=trial_ids, kind=MetricKind.VALIDATION, name="eod", attribute="")
    if connection.vendor == "postgresql":
        # Imported here: django.contrib.postgres imports psycopg (0.08 s), which a process on SQLite
        # never needs, and this module is loaded by every management command.
        from django.contrib.postgres.aggregates import ArrayAgg

        # One row per trial holding its steps and values as arrays: 20 rows to convert, not 40,000.
        # Both arrays of a row are built from the same rows in the same order, so they pair up;
        # sorting by step here is cheaper than ARRAY_AGG(... ORDER BY), which sorts every group.
        per_trial = (
            points.values("trial_id")
            .annotate(steps=ArrayAgg("step"), values=ArrayAgg("value"))
            .values_list("trial_id", "steps", "values")
        )
        series = {}
        for trial_id, steps, values in per_trial:
            step_array = np.asarray(steps, dtype=np.int64)
            order = np.argsort(step_array, kind="stable")
            series[trial_id] = (step_array[order], np.asarray(values, dtype=np.float64)[order])
        return series
    ordered = points.order_by("trial_id", "step").values_list("trial_id", "step", "value")
    rows = np.asarray(list(ordered), dtype=np.float64).reshape(-1, 3)
    series = {}
    for trial_id in np.unique(rows[:, 0]).tolist():
        mine = rows[rows[:, 0] == trial_id]
        series[int(trial_id)] = (mine[:, 1].astype(np.int64), mine[:, 2])
    return series


def _verdict_changes(trial_ids: list[int]) -> dict[int, list[figures.VerdictChange]]:
    """The verdict changes the ingestion recorded (trial_verdict.changed events), per trial."""
    changes: dict[int, list[figures.VerdictChange]] = {}
    for trial_id, data in events_about(verb=Verb.TRIAL_VERDICT_CHANGED, model=Trial, ids=trial_ids):
        if isinstance(data.get("step"), int) and isinstance(data.get("attribute"), str):
            changes.setdefault(trial_id, []).append(
                figures.VerdictChange(step=data["step"], attribute=data["attribute"], verdict=data.get("to") or None)
            )
    return changes


def _tolerance_and_alpha(trials: list[Trial]) -> tuple[float, float]:
    """The tolerance and alpha the newest verdict was judged under (the ones the table's verdicts
    show), or the active policy's before any verdict."""
    newest = max(
        (verdict for trial in trials for verdict in trial.verdicts.all()),
        key=lambda verdict: verdict.updated_at,
        default=None,
    )
    if newest is not None:
        return newest.tolerance, newest.alpha
    policy = policy_active()
    return policy.tolerance, policy.alpha


def _eod_floor(
    timelines: list[figures.TrialTimeline], *, selected: int | None, alpha: float
) -> figures.EodFloor | None:
    """The selected trial's noise floor under its eod line: at each step the chart keeps, the floor of
    the pair of groups that set the eod there (fairness.statistics.eod)."""
    timeline = next((timeline for timeline in timelines if timeline.trial_id == selected), None)
    if timeline is None or not len(timeline.steps):
        return None
    kept = figures.timeline_kept(timelines)[timeline.trial_id]
    steps = [int(step) for step in np.asarray(timeline.steps)[kept]]
    pairs = _eod_pairs_at({timeline.trial_id: steps}, alpha=alpha).get(timeline.trial_id, [None] * len(steps))
    return figures.EodFloor(
        trial_id=timeline.trial_id,
        number=timeline.number,
        steps=steps,
        floors=[None if pair is None else pair.noise_floor for pair in pairs],
        pairs=["" if pair is None else figures.pair_label(pair.attribute, pair.high, pair.low) for pair in pairs],
    )


def _eod_pairs_at(wanted: dict[int, list[int]], *, alpha: float) -> dict[int, list[EodPair | None]]:
    """Per trial id, at each of its wanted validation steps (ascending), the pair of groups that set
    its eod there, from the confusion counts the trainer reported (``count/<attribute>/<group>/<cell>``)."""
    found: dict[int, list[tuple[str, str, str, npt.NDArray[np.int64], npt.NDArray[np.float64]]]] = {}
    single = {trial_id: steps[0] for trial_id, steps in wanted.items() if len(steps) == 1}
    for trial_id, steps in wanted.items():
        if len(steps) > 1:
            found[trial_id] = _count_series(MetricPoint.objects.filter(trial_id=trial_id))
    if single:
        # One validation of each of many trials (their lowest eod): one query for all.
        chosen = Q()
        for trial_id, step in single.items():
            chosen |= Q(trial_id=trial_id, step=step)
        rows = _count_points(MetricPoint.objects.filter(chosen)).values_list(
            "trial_id", "name", "attribute", "group", "step", "value"
        )
        for trial_id, name, attribute, group, step, value in rows:
            found.setdefault(trial_id, []).append(
                (attribute, group, name, np.array([step], np.int64), np.array([np.nan if value is None else value]))
            )
    result: dict[int, list[EodPair | None]] = {}
    for trial_id, steps in wanted.items():
        at = np.asarray(steps, dtype=np.int64)
        cells = {cell: index for index, cell in enumerate(CONFUSION_CELLS)}
        parts = [
            (attribute, group, cells[name.rsplit("/", 1)[-1]], points_steps, values)
            for attribute, group, name, points_steps, values in found.get(trial_id, [])
            # Not count/<attribute>/unknown: the rows with no group.
            if name.count("/") == 3 and name.rsplit("/", 1)[-1] in cells
        ]
        names: dict[str, set[str]] = {}
        for attribute, group, *_ in parts:
            names.setdefault(attribute, set()).add(group)
        # The groups in key order, as confusion_counts gives them (ties between equal recalls break alike).
        columns = {
            attribute: {group: i for i, group in enumerate(sorted(groups))} for attribute, groups in names.items()
        }
        counts = {
            attribute: np.zeros((len(at), len(groups), 4), dtype=np.int64) for attribute, groups in columns.items()
        }
        for attribute, group, cell, points_steps, values in parts:
            position = np.clip(np.searchsorted(at, points_steps), 0, len(at) - 1)
            hit = (at[position] == points_steps) & np.isfinite(values)
            counts[attribute][position[hit], columns[attribute][group], cell] = values[hit].astype(np.int64)
        series = {
            attribute: CountSeries(groups=list(groups), counts=counts[attribute])
            for attribute, groups in columns.items()
        }
        result[trial_id] = eod_pairs(series, steps=len(at), alpha=alpha)
    return result


def _count_points(points: QuerySet[MetricPoint]) -> QuerySet[MetricPoint]:
    """The validation counts of ``points`` a recall needs: ``count/<attribute>/<group>/tp`` and ``/fn``
    (a recall gap and its floor use no other cell; the CountSeries leave fp and tn 0)."""
    cells = Q(name__endswith="/tp") | Q(name__endswith="/fn")
    return points.filter(cells, kind=MetricKind.VALIDATION, name__startswith="count/").exclude(group="")


def _count_series(
    points: QuerySet[MetricPoint],
) -> list[tuple[str, str, str, npt.NDArray[np.int64], npt.NDArray[np.float64]]]:
    """Each confusion-count series of one trial's ``points``: (attribute, group, name, steps, values),
    NaN where a value was not finite. On PostgreSQL one row per series, its steps and values
    aggregated into arrays (a few dozen rows for thousands of validations), as _eod_series does."""
    counts = _count_points(points)
    if connection.vendor == "postgresql":
        from django.contrib.postgres.aggregates import ArrayAgg  # see _eod_series

        rows = (
            counts.values("name", "attribute", "group")
            .annotate(steps=ArrayAgg("step"), values=ArrayAgg("value"))
            .values_list("attribute", "group", "name", "steps", "values")
        )
        return [
            (attribute, group, name, np.asarray(steps, np.int64), np.asarray(values, np.float64))
            for attribute, group, name, steps, values in rows
        ]
    by_series: dict[tuple[str, str, str], tuple[list[int], list[float]]] = {}
    for attribute, group, name, step, value in counts.values_list("attribute", "group", "name", "step", "value"):
        steps, values = by_series.setdefault((attribute, group, name), ([], []))
        steps.append(step)
        values.append(np.nan if value is None else value)
    return [
        (attribute, group, name, np.asarray(steps, np.int64), np.asarray(values, np.float64))
        for (attribute, group, name), (steps, values) in by_series.items()
    ]


def _worker_share_figure(trial: Trial) -> tuple[dict[str, Any] | None, str | None]:
    points = trial.metric_points.filter(kind=MetricKind.TRAINING, name__startswith="worker_share").values_list(
        "step", "name", "attribute", "group", "value"
    )
    shares: dict[tuple[str, str, int], dict[int, float | None]] = {}
    spreads: dict[str, dict[int, float | None]] = {}
    steps: set[int] = set()
    for step, name, attribute, group, value in points:
        if name.startswith("worker_share_spread/"):
            attribute = attribute_key(decode_group(name.split("/", 2)[1], "")[0])
            if len(split_key(attribute)) == 1:
                spreads.setdefault(attribute, {})[step] = value
                steps.add(step)
            continue
        rank = name.rsplit("/", 1)[-1]
        if not rank.startswith("rank") or not rank[4:].isdigit() or len(split_key(attribute)) != 1:
            continue  # intersections would crowd the map; their attributes' own rows are shown
        shares.setdefault((attribute, group, int(rank[4:])), {})[step] = value
        steps.add(step)
    if not shares:
        return None, "No worker shares reported yet: they come with the training metrics."
    ordered = sorted(steps)
    rows = [
        figures.WorkerShareRow(attribute, group, rank, [by_step.get(step) for step in ordered])
        for (attribute, group, rank), by_step in shares.items()
    ]
    spread_series = {attribute: [by_step.get(step) for step in ordered] for attribute, by_step in spreads.items()}
    figure = figures.worker_share_heatmap(ordered, rows, spread_series, trial_number=trial.number)
    if figure is None:
        return None, f"Trial {trial.number} ran on one worker: there is no split of its groups between workers to show."
    return figure_json(figure), None


# --------------------------------------------------------------------------------- CSV export

TIMELINE_COLUMNS = ("trial_id", "step", "eod")
RECALL_PREFIX = "recall/"


def timeline_table(*, trials: list[Trial]) -> tuple[list[str], Iterator[list[int | float | None]]]:
    """The header and rows of the timeline CSV of ``trials`` (docs/dashboard.md): one row per trial
    and validation step, ``trial_id, step, eod`` and then one column per recall series, named as the
    trainer names it (``recall/<attribute>/<group>``, trainer/README.md), empty where a step lacks it."""
    ids = [trial.pk for trial in trials]
    names = sorted(
        MetricPoint.objects.filter(trial_id__in=ids, kind=MetricKind.VALIDATION, name__startswith=RECALL_PREFIX)
        .values_list("name", flat=True)
        .distinct()
    )
    return [*TIMELINE_COLUMNS, *names], _timeline_rows(ids, names)


def _timeline_rows(trial_ids: list[int], names: list[str]) -> Iterator[list[int | float | None]]:
    column = {name: 3 + index for index, name in enumerate(names)}
    width = 3 + len(names)
    for trial_id in trial_ids:
        points = (
            MetricPoint.objects.filter(trial_id=trial_id, kind=MetricKind.VALIDATION)
            .filter(Q(name="eod", attribute="") | Q(name__startswith=RECALL_PREFIX))
            .order_by("step", "name")
            .values_list("step", "name", "value")
        )
        row: list[int | float | None] | None = None
        for step, name, value in points.iterator(chunk_size=10_000):
            if row is None or row[1] != step:
                if row is not None:
                    yield row
                row = [trial_id, step, *([None] * (width - 2))]
            row[2 if name == "eod" else column[name]] = value
        if row is not None:
            yield row
