"""Stopping-based ASHA on the local backend: the arithmetic (against hand-worked cases from
Determined 0.38.1's adaptive_asha.go and asha_stopping.go) and a search that stops trials."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.activity.models import Event
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments import asha, configs, selectors, services
from auditportal.experiments.asha import Bracket, Decision
from auditportal.experiments.backends.local import run_dir
from auditportal.experiments.models import ExperimentStatus, RungOutcome, StopReason, TrialRung, TrialState
from auditportal.experiments.tasks import experiment_launch_task
from auditportal.fairness.errors import UserError
from tests.experiments.conftest import poll_until_done
from tests.factories import TrialFactory
from tests.stubs.expconf import config_errors


def test_eight_trials_make_a_two_rung_and_a_one_rung_bracket_in_standard_mode() -> None:
    # max_rungs 3 is capped by the trials: int(log(8) / log(4)) + 1 = 2; standard mode then runs
    # brackets of 2 and 1 rungs, weighted 4/2 and 1/1: int(2/3 * 8) = 5 and int(1/3 * 8) = 2, and the
    # remaining trial goes to the first; each may run max(2, divisor) = 4 at once.
    plan = asha.brackets(max_trials=8, max_time=64, divisor=4, max_rungs=3, mode="standard")
    assert plan == [Bracket(num_rungs=2, max_trials=6, max_concurrent_trials=4), Bracket(1, 2, 4)]


def test_sixteen_trials_reach_three_rungs_and_aggressive_mode_makes_one_bracket() -> None:
    # int(log(16) / log(4)) + 1 = 3; weights 16/3 and 4/2: int(11.6) = 11 and int(4.4) = 4, plus 1.
    assert asha.brackets(max_trials=16, max_time=160, divisor=4, max_rungs=3, mode="standard") == [
        Bracket(3, 12, 4),
        Bracket(2, 4, 4),
    ]
    assert asha.brackets(max_trials=8, max_time=64, divisor=4, max_rungs=3, mode="aggressive") == [Bracket(2, 8, 8)]
    # Conservative: brackets of 3, 2 and 1 rungs, weighted 16/3, 4/2 and 1/1 of 8.33: 10, 3 and 1, plus 2.
    assert asha.brackets(max_trials=16, max_time=160, divisor=4, max_rungs=3, mode="conservative") == [
        Bracket(3, 12, 4),
        Bracket(2, 3, 4),
        Bracket(1, 1, 4),
    ]


def test_rungs_are_the_training_length_divided_by_powers_of_the_divisor() -> None:
    assert asha.rung_units(3, 4, 64) == [4, 16, 64]
    assert asha.rung_units(2, 4, 10) == [2, 10]
    assert asha.rung_units(3, 4, 5) == [1, 1, 5]


def test_trials_are_dealt_to_brackets_in_the_order_determined_creates_them() -> None:
    assert asha.trial_brackets([Bracket(2, 6, 4), Bracket(1, 2, 4)]) == [0, 0, 0, 0, 1, 1, 0, 0]


def test_a_trial_goes_on_only_among_the_best_quarter_of_those_that_reached_the_rung_before_it() -> None:
    assert asha.decide([], 0.5, divisor=4, top=False) == Decision("continued", 1, 1, 1)
    assert asha.decide([0.5], 0.7, divisor=4, top=False) == Decision("stopped", 2, 2, 1)
    # A tie ranks before the equal metric already there (Determined's sort.Search), so it goes on.
    assert asha.decide([0.5], 0.5, divisor=4, top=False) == Decision("continued", 1, 2, 1)
    eight = [0.9, 0.1, 0.8, 0.2, 0.7, 0.3, 0.6]
    # The eighth to arrive: max(8 // 4, 1) = 2 go on.
    assert asha.decide(eight, 0.15, divisor=4, top=False) == Decision("continued", 2, 8, 2)
    assert asha.decide(eight, 0.25, divisor=4, top=False) == Decision("stopped", 3, 8, 2)
    assert asha.decide([0.1], 0.9, divisor=4, top=True) == Decision("completed", 2, 2, 1)


def test_the_local_search_follows_the_asha_template_config() -> None:
    config = configs.experiment_config(
        name="x",
        template="asha",
        space={},
        max_trials=8,
        batches=64,
        shard_host_dir="/shards",
        shard_folder="v1",
        dataset_sha256="0" * 64,
        image="trainer:test",
    )
    searcher = config["searcher"]
    assert searcher["divisor"] == configs.ASHA_DIVISOR
    assert searcher["mode"] == configs.ASHA_MODE
    assert searcher["max_rungs"] == configs.ASHA_MAX_RUNGS
    assert searcher["max_time"] == 64
    assert searcher["smaller_is_better"] is True
    assert searcher["metric"] == configs.SEARCHER_METRIC


# Trials run one at a time in number order (EXPERIMENT_LOCAL_CONCURRENCY 1); max_concurrent_trials 0
# (Determined's default: 4 per bracket) deals the trials to brackets as above:
# trials 1-4, 7, 8 in the two-rung bracket (rungs at 8 and 32 batches), 5 and 6 in the one-rung one.
OBJECTIVES = {1: 0.5, 2: 0.7, 3: 0.3, 4: 0.6, 5: 0.4, 6: 0.4, 7: 0.2, 8: 0.45}


@pytest.mark.slow
def test_an_asha_search_of_eight_trials_stops_those_outside_the_best_quarter_and_shows_where(
    bob: User,
    demo_version: DatasetVersion,
    fake_trainer: Path,
    monkeypatch: pytest.MonkeyPatch,
    client: Client,
) -> None:
    # The trials the search should stop train slowly (16 validations: about 2.4 s for a whole trial),
    # so its stop reaches them long before their end; the others need not wait.
    monkeypatch.setenv("FAKE_TRAINER_SLEEP", ",".join(f"trial-{n}=0.15" for n in (2, 4, 8)))
    monkeypatch.setenv("FAKE_TRAINER_OBJECTIVES", ",".join(f"trial-{n}={v}" for n, v in OBJECTIVES.items()))
    monkeypatch.setenv("FAKE_TRAINER_CRASH", "trial-6")  # exits after its first validation
    experiment = services.experiment_create(
        user=bob, dataset_version=demo_version, template="asha", max_trials=8, batches=32, max_concurrent_trials=0
    )
    experiment_launch_task(experiment.pk)
    experiment = poll_until_done(experiment, timeout=120)

    trials = {trial.number: trial for trial in experiment.trials.all()}
    assert {n: t.asha_bracket for n, t in trials.items()} == {1: 0, 2: 0, 3: 0, 4: 0, 5: 1, 6: 1, 7: 0, 8: 0}
    # Rung 1 (8 batches) of the first bracket, in the order trials reached it: 1 (0.5) goes on;
    # 2 (0.7) is 2nd of 2 and 3 (0.3) 1st of 3 with one going on; 4 (0.6) 3rd of 4; 7 (0.2) 1st of 5;
    # 8 (0.45) 3rd of 6, where max(6 // 4, 1) = 1 goes on.
    first_rung = {
        n: (entry.outcome, entry.position, entry.entered, entry.continuing)
        for n, t in trials.items()
        for entry in t.rungs.filter(rung=0)
    }
    assert first_rung == {
        1: (RungOutcome.CONTINUED, 1, 1, 1),
        2: (RungOutcome.STOPPED, 2, 2, 1),
        3: (RungOutcome.CONTINUED, 1, 3, 1),
        4: (RungOutcome.STOPPED, 3, 4, 1),
        5: (RungOutcome.COMPLETED, 1, 1, 1),  # its bracket's only rung is the whole length
        6: (RungOutcome.EXITED, 2, 2, 1),  # crashed before it: counts as the worst
        7: (RungOutcome.CONTINUED, 1, 5, 1),
        8: (RungOutcome.STOPPED, 3, 6, 1),
    }
    assert {n for n, t in trials.items() if t.rungs.filter(rung=1, outcome=RungOutcome.COMPLETED).exists()} == {
        1,
        3,
        7,
    }
    for number in (2, 4, 8):
        stopped = trials[number]
        assert stopped.state == TrialState.COMPLETED  # as Determined ends a trial its searcher stopped
        assert stopped.stop_reason == StopReason.EARLY_STOP
        assert 8 <= stopped.steps_done < 32, "it was stopped, not run to the end"
        assert json.loads((run_dir(stopped) / "stopped").read_text())["reason"] == StopReason.EARLY_STOP
    for number in (1, 3, 5, 7):
        assert trials[number].steps_done == 32
        assert trials[number].stop_reason == ""
    assert trials[6].state == TrialState.ERRORED
    assert experiment.status == ExperimentStatus.ERRORED
    assert experiment.error == "1 of 8 trials did not complete"
    events = Event.objects.filter(verb="trial.early_stopped").order_by("seq")
    assert [(e.target_id, e.data["rung"], e.data["position"], e.data["entered"]) for e in events] == [
        (str(trials[2].pk), 1, 2, 2),
        (str(trials[4].pk), 1, 3, 4),
        (str(trials[8].pk), 1, 3, 6),
    ]

    client.force_login(bob)
    page = client.get(f"/experiments/{experiment.pk}/").content.decode()
    assert "Early stopping (ASHA)" in page
    metric = trials[2].rungs.get(rung=0).metric
    assert f"Stopped early at rung 1 (8 batches): fair_objective {metric:.4f} ranked 2 of 2; the best 1 went on." in (
        page
    )
    progress = client.get(f"/experiments/{experiment.pk}/progress.json").json()
    assert {t["number"]: t["stopped_at_rung"] for t in progress["trials"]} == {
        1: None,
        2: 1,
        3: None,
        4: 1,
        5: None,
        6: None,
        7: None,
        8: 1,
    }


@pytest.mark.parametrize(
    ("steps_done", "note"),
    [
        (12, "Stopped early at rung 1 (8 batches): fair_objective 0.7000 ranked 3 of 4; the best 1 went on."),
        (32, "Chosen to stop at rung 1 (8 batches): fair_objective 0.7000 ranked 3 of 4; the best 1 went on. "),
    ],
)
def test_the_row_says_where_a_trial_was_stopped_and_whether_it_had_already_finished(
    steps_done: int, note: str, db: None, dataset_storage: Path
) -> None:
    trial = TrialFactory.create(
        experiment__template="asha",
        experiment__batches=32,
        state=TrialState.COMPLETED,
        steps_done=steps_done,
        stop_reason=StopReason.EARLY_STOP,
        stop_requested_at=timezone.now(),
        ended_at=timezone.now(),
    )
    TrialRung.objects.create(
        trial=trial, rung=0, units=8, step=8, metric=0.7, position=3, entered=4, continuing=1, outcome="stopped"
    )
    assert selectors.trial_stop_note(trial).startswith(note)


@pytest.mark.slow
def test_with_max_concurrent_trials_an_asha_search_trains_fewer_batches_and_counts_only_trials_cut_short(
    bob: User,
    demo_version: DatasetVersion,
    fake_trainer: Path,
    settings: SettingsWrapper,
    monkeypatch: pytest.MonkeyPatch,
    client: Client,
) -> None:
    # Two slots; max_concurrent_trials 2 is one per bracket (asha.brackets): trials 1, 3, 4, 5 in the
    # two-rung bracket (rungs at 4 and 16 batches) run one after another, trial 2 (one rung) beside them.
    settings.EXPERIMENT_LOCAL_CONCURRENCY = 2
    # The trials the search should cut short train slowly (16 validations: about 1.6 s for a whole
    # trial), so its stop reaches them long before their end; the others need not wait.
    monkeypatch.setenv("FAKE_TRAINER_SLEEP", "trial-3=0.1,trial-5=0.1")
    objectives = {1: 0.5, 2: 0.4, 3: 0.7, 4: 0.3, 5: 0.6}
    monkeypatch.setenv("FAKE_TRAINER_OBJECTIVES", ",".join(f"trial-{n}={v}" for n, v in objectives.items()))
    experiment = services.experiment_create(
        user=bob, dataset_version=demo_version, template="asha", max_trials=5, batches=16, max_concurrent_trials=2
    )
    assert experiment.max_concurrent_trials == 2
    searcher = configs.from_yaml(experiment.config_yaml)["searcher"]
    assert searcher["max_concurrent_trials"] == 2  # what a master would be sent
    assert config_errors(searcher, schema="searcher.json") == []
    experiment_launch_task(experiment.pk)
    experiment = poll_until_done(experiment, timeout=60)

    trials = {trial.number: trial for trial in experiment.trials.all()}
    assert {n: t.asha_bracket for n, t in trials.items()} == {1: 0, 2: 1, 3: 0, 4: 0, 5: 0}
    # A bracket's next trial started only once its previous one had ended.
    ordered = [trials[n] for n in (1, 3, 4, 5)]
    for before, after in itertools.pairwise(ordered):
        assert before.ended_at is not None
        assert after.started_at is not None
        assert after.started_at >= before.ended_at
    # 3 (0.7) ranks 2nd of 2 at 4 batches and 5 (0.6) 3rd of 4: both stopped while they had work left.
    cut_short = {n for n, t in trials.items() if t.steps_done < t.steps_planned}
    assert cut_short == {3, 5}
    assert all(trials[n].stop_reason == StopReason.EARLY_STOP for n in cut_short)
    total = sum(t.steps_done for t in trials.values())
    assert total < len(trials) * experiment.batches, "early stopping saved no batches"

    client.force_login(bob)
    progress = client.get(f"/experiments/{experiment.pk}/progress.json").json()
    assert progress["max_concurrent_trials"] == 2
    assert progress["stopped_early"] == len(cut_short)
    assert {t["number"] for t in progress["trials"] if t["stopped_at_rung"] is not None} == cut_short
    rows = selectors.experiment_asha_rungs(experiment=experiment)
    assert sum(row["stopped"] for row in rows) == len(cut_short)
    assert sum(row["stopped_late"] for row in rows) == 0


def test_a_stop_chosen_after_the_trial_had_finished_is_not_counted_as_stopped_early(
    db: None, dataset_storage: Path
) -> None:
    trial = TrialFactory.create(
        experiment__template="asha",
        experiment__backend="local",
        experiment__max_trials=4,
        experiment__batches=32,
        asha_bracket=0,
        state=TrialState.COMPLETED,
        steps_done=32,
        steps_planned=32,
        stop_reason=StopReason.EARLY_STOP,
        stop_requested_at=timezone.now(),
        ended_at=timezone.now(),
    )
    TrialRung.objects.create(
        trial=trial, rung=0, units=8, step=8, metric=0.7, position=2, entered=2, continuing=1, outcome="stopped"
    )
    trial = selectors.trial_list(experiment=trial.experiment).get()
    assert selectors.trial_stopped_at_rung(trial) is None
    rows = selectors.experiment_asha_rungs(experiment=trial.experiment)
    assert (rows[0]["stopped"], rows[0]["stopped_late"]) == (0, 1)


@pytest.mark.parametrize("value", [-1, 5])
def test_max_concurrent_trials_outside_0_to_max_trials_is_refused_naming_the_field(
    value: int, bob: User, demo_version: DatasetVersion
) -> None:
    with pytest.raises(UserError) as caught:
        services.experiment_create(
            user=bob, dataset_version=demo_version, template="random", max_trials=4, max_concurrent_trials=value
        )
    assert caught.value.field == "max_concurrent_trials"
    assert "max_concurrent_trials" in str(caught.value)


def test_max_concurrent_trials_defaults_to_the_slots_of_the_machine_over_the_processes_per_trial(
    bob: User, demo_version: DatasetVersion, settings: SettingsWrapper
) -> None:
    settings.EXPERIMENT_LOCAL_CONCURRENCY = 4
    experiment = services.experiment_create(
        user=bob, dataset_version=demo_version, template="random", max_trials=6, slots_per_trial=2, backend="local"
    )
    assert experiment.max_concurrent_trials == 2
    assert configs.from_yaml(experiment.config_yaml)["searcher"]["max_concurrent_trials"] == 2
    assert configs.default_max_concurrent_trials(backend="determined", slots_per_trial=1, local_slots=4) == 0
