"""The experiment page's charts endpoint (figures.json), its timeline CSV and its hyperparameters."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from auditportal.accounts.models import User
from auditportal.experiments.ingest import trial_metrics_ingest
from auditportal.experiments.models import Experiment, Trial, TrialVerdict
from auditportal.fairness.files.metricsfile import MetricRecord
from auditportal.policies.selectors import policy_active
from tests.factories import ExperimentFactory, TrialFactory, client_for
from tests.figures.plotly_json import decoded


def _validation(step: int, female: tuple[int, int], male: tuple[int, int], accuracy: float) -> MetricRecord:
    """A validation's metrics with gender groups given as (tp, fn); eod and recall as the trainer computes them."""
    metrics: dict[str, float | None] = {"count/gender/unknown": 0.0, "accuracy": accuracy}
    recall = {}
    for group, (tp, fn) in (("female", female), ("male", male)):
        for cell, value in zip(("tp", "fn", "fp", "tn"), (tp, fn, 100, 900), strict=True):
            metrics[f"count/gender/{group}/{cell}"] = float(value)
        recall[group] = tp / (tp + fn)
        metrics[f"recall/gender/{group}"] = recall[group]
    eod = abs(recall["female"] - recall["male"])
    metrics["eod"] = metrics["eod/gender"] = eod
    metrics["fair_objective"] = 0.5 + eod
    return MetricRecord(kind="validation", step=step, metrics=metrics)


def _ingest(trial: Trial, *records: MetricRecord) -> None:
    for record in records:  # one at a time, as a live trial's polls ingest them: each is judged
        trial_metrics_ingest(trial=trial, records=[record])


FAILING = ((400, 600), (800, 200))  # recall 0.4 vs 0.8 over a thousand positives each
PASSING = ((5000, 5000), (5000, 5000))  # equal recall over ten thousand


@pytest.fixture
def experiment(bob: User, dataset_storage: Path) -> Experiment:
    return ExperimentFactory.create(template="random", batches=40, launched_by=bob)


@pytest.fixture
def trials(experiment: Experiment) -> tuple[Trial, Trial]:
    first = TrialFactory.create(experiment=experiment, hparams={"learning_rate": 0.0007631388066955715, "seed": 7})
    second = TrialFactory.create(experiment=experiment, hparams={"learning_rate": 0.003, "seed": 8})
    _ingest(first, _validation(10, *FAILING, 0.81), _validation(20, *PASSING, 0.8), _validation(30, *PASSING, 0.79))
    _ingest(second, _validation(10, *FAILING, 0.7))
    return first, second


def _figures(client: Client, experiment: Experiment, **params: Any) -> dict[str, Any]:
    response = client.get(reverse("experiments:figures", args=[experiment.pk]), params)
    assert response.status_code == 200, response.content
    data: dict[str, Any] = decoded(response.json())
    return data


def _trace(figure: dict[str, Any], name: str) -> dict[str, Any]:
    (trace,) = [trace for trace in figure["data"] if trace.get("name") == name]
    assert isinstance(trace, dict)
    return trace


def test_every_member_gets_the_figures_of_every_trial(
    carol: User, experiment: Experiment, trials: tuple[Trial, Trial]
) -> None:
    first, second = trials
    data = _figures(client_for(carol), experiment)
    timeline = data["figures"]["timeline"]
    line = _trace(timeline, f"trial {first.number}")
    assert (line["x"], line["meta"]) == ([10, 20, 30], first.pk)
    assert line["y"] == [pytest.approx(0.4), 0.0, 0.0]
    assert _trace(timeline, f"trial {second.number}")["x"] == [10]
    tolerance = policy_active().tolerance
    assert data["tolerance"] == tolerance
    assert [shape["y1"] for shape in timeline["layout"]["shapes"] if shape["type"] == "line"] == [tolerance]
    # The default selection is the searcher's best trial: the lowest fair_objective.
    assert data["selected"] == {"id": first.pk, "number": first.number}
    lowest = _trace(data["figures"]["lowest"], "lowest eod")
    assert (lowest["customdata"], lowest["y"]) == ([first.pk, second.pk], [0.0, pytest.approx(0.4)])
    # The noise floor of the pair that set each step's eod (here the verdict's one comparison, as its
    # document stores it): shaded under the selected trial's line, ticked on each trial's lowest bar.
    failing, passing = (_stored_floor(trial.verdicts.get()) for trial in (second, first))
    assert failing > 3 * passing  # a thousand positives per group at step 10, ten thousand later
    band = _trace(timeline, f"noise floor, trial {first.number}")
    assert band["x"] == [10, 20, 30]
    assert band["y"] == pytest.approx([failing, passing, passing], abs=1e-6)
    assert band["text"] == ["gender: male − female"] * 3  # at equal recalls too: a gap of 0
    ticks = _trace(data["figures"]["lowest"], "noise floor of the pair that set it")
    assert ticks["y"] == pytest.approx([passing, failing], abs=1e-5)
    assert not [shape for shape in timeline["layout"]["shapes"] if shape.get("name", "").startswith("noise floor")]
    floors = [max(v.noise_floor for v in trial.verdicts.all() if v.noise_floor is not None) for trial in trials]
    assert data["noise_floor"] == max(floors)
    front = _trace(data["figures"]["scatter_eod"], "Pareto front")
    assert (front["x"], front["y"]) == ([0.0], [0.79])  # trial 1 now: no gap and the better accuracy


def _stored_floor(verdict: TrialVerdict, group: str | None = None) -> float:
    """The noise floor the verdict's document stores for its (or ``group``'s) recall comparison."""
    (floor,) = [
        c["noise_floor"]
        for c in verdict.document["comparisons"]
        if c["metric"] == "tpr" and c["group"] == (group or verdict.group)
    ]
    return float(floor)


def test_the_band_is_the_floor_of_the_pair_that_sets_the_eod_not_the_widest_of_any_group(
    carol: User, experiment: Experiment
) -> None:
    trial = TrialFactory.create(experiment=experiment)
    # a (the reference, most rows) and c set the eod; b, tiny, sits between them with the widest floor.
    groups = {"a": (900, 100), "b": (8, 4), "c": (600, 400)}
    metrics: dict[str, float | None] = {"count/race/unknown": 0.0, "accuracy": 0.8, "eod": 0.3}
    for group, (tp, fn) in groups.items():
        for cell, value in zip(("tp", "fn", "fp", "tn"), (tp, fn, 100, 900), strict=True):
            metrics[f"count/race/{group}/{cell}"] = float(value)
    _ingest(trial, MetricRecord(kind="validation", step=25, metrics=metrics))
    verdict = trial.verdicts.get()
    timeline = _figures(client_for(carol), experiment, trial=trial.pk)["figures"]["timeline"]
    band = _trace(timeline, f"noise floor, trial {trial.number}")
    assert band["text"] == ["race: a − c"]
    assert band["y"] == [pytest.approx(_stored_floor(verdict, "c"), abs=1e-6)]
    assert verdict.noise_floor == pytest.approx(_stored_floor(verdict, "b"))
    assert verdict.noise_floor > 2 * band["y"][0]  # what the whole plot used to be shaded up to


def test_the_timeline_marks_where_the_recorded_verdict_changed(
    carol: User, experiment: Experiment, trials: tuple[Trial, Trial]
) -> None:
    first, second = trials
    timeline = _figures(client_for(carol), experiment)["figures"]["timeline"]
    failed, passed = _trace(timeline, "verdict became Fail"), _trace(timeline, "verdict became Pass")
    assert sorted(zip(failed["customdata"], failed["x"], strict=True)) == [(first.pk, 10), (second.pk, 10)]
    assert (passed["customdata"], passed["x"]) == ([first.pk], [20])


def test_the_selected_trial_gets_its_recall_per_group_with_intervals(
    carol: User, experiment: Experiment, trials: tuple[Trial, Trial]
) -> None:
    _, second = trials
    data = _figures(client_for(carol), experiment, trial=second.pk)
    assert data["selected"] == {"id": second.pk, "number": second.number}
    recall = data["figures_trial"]["recall"]
    assert recall["layout"]["title"]["text"] == f"Recall per group, trial {second.number} (step 10)"
    gender = _trace(recall, "gender: Fail")
    assert gender["y"] == [["gender", "gender"], ["female", "male"]]
    assert gender["x"] == [0.4, 0.8]
    low, high = second.verdicts.get().document["groups"]["female"]["ci"]["tpr"]
    assert gender["error_x"]["arrayminus"][0] == pytest.approx(0.4 - low, abs=1e-5)
    assert gender["error_x"]["array"][0] == pytest.approx(high - 0.4, abs=1e-5)
    assert 0 < low < 0.4 < high < 0.8
    # The bars and the scatter show which trial is selected.
    bars = _trace(data["figures"]["lowest"], "lowest eod")
    assert bars["marker"]["color"][1] != bars["marker"]["color"][0]


def test_a_distributed_trial_gets_the_worker_share_heatmap_and_a_single_worker_a_note(
    carol: User, experiment: Experiment, trials: tuple[Trial, Trial]
) -> None:
    first, second = trials
    shares: dict[str, float | None] = {
        "worker_share/gender/female/rank0": 0.7, "worker_share/gender/female/rank1": 0.3,
        "worker_share/gender/male/rank0": 0.3, "worker_share/gender/male/rank1": 0.7,
        "worker_share/gender&age/female&young/rank0": 0.1, "worker_share/gender&age/female&young/rank1": 0.2,
        "worker_share_spread/gender": 0.4, "worker_share_spread/gender&age": 0.1,
    }  # fmt: skip
    trial_metrics_ingest(trial=first, records=[MetricRecord(kind="training", step=5, metrics=shares)])
    trial_metrics_ingest(
        trial=second, records=[MetricRecord(kind="training", step=5, metrics={"worker_share/gender/female/rank0": 1.0})]
    )
    client = client_for(carol)
    workers = _figures(client, experiment, trial=first.pk)["figures_trial"]["workers"]
    heatmap = workers["data"][0]
    assert heatmap["y"] == [
        "gender=female · rank 0",
        "gender=female · rank 1",
        "gender=male · rank 0",
        "gender=male · rank 1",
    ]  # fmt: skip  (the intersection's rows are left out)
    assert heatmap["customdata"] == [[0.7], [0.3], [0.3], [0.7]]
    assert heatmap["z"] == [[0.2], [-0.2], [-0.2], [0.2]]  # each against the workers' mean share
    assert workers["layout"]["title"]["text"].startswith(f"Worker share of each group, trial {first.number}")
    assert _trace(workers, "spread gender")["y"] == [0.4]
    single = _figures(client, experiment, trial=second.pk)
    assert single["figures_trial"]["workers"] is None
    assert single["notes"]["workers"] == (
        f"Trial {second.number} ran on one worker: there is no split of its groups between workers to show."
    )


def test_an_experiment_without_trials_gets_empty_figures(carol: User, experiment: Experiment) -> None:
    data = _figures(client_for(carol), experiment)
    assert data["selected"] is None
    assert data["figures"]["timeline"]["data"] == []
    assert data["notes"]["workers"] == "No trial yet."


def test_a_trial_without_a_validation_yet_has_no_line_and_says_why(carol: User, experiment: Experiment) -> None:
    queued = TrialFactory.create(experiment=experiment)
    data = _figures(client_for(carol), experiment)
    assert data["selected"] == {"id": queued.pk, "number": queued.number}
    assert data["figures"]["timeline"]["data"] == []
    assert "No validations yet" in data["figures"]["timeline"]["layout"]["annotations"][0]["text"]
    assert data["figures"]["timeline"]["layout"]["xaxis"]["range"] == [0, experiment.batches]
    assert "No judged validation" in data["figures_trial"]["recall"]["layout"]["annotations"][0]["text"]
    assert data["notes"]["workers"] == "No worker shares reported yet: they come with the training metrics."


def test_the_timeline_csv_has_eod_and_recall_per_group_for_every_step(
    carol: User, experiment: Experiment, trials: tuple[Trial, Trial]
) -> None:
    first, second = trials
    response = client_for(carol).get(reverse("experiments:timeline-csv", args=[experiment.pk]))
    assert response.status_code == 200
    assert response["Content-Disposition"] == f'attachment; filename="experiment-{experiment.pk}-timeline.csv"'
    rows = list(csv.reader(io.StringIO(response.getvalue().decode())))
    assert rows[0] == ["trial_id", "step", "eod", "recall/gender/female", "recall/gender/male"]
    assert rows[1:] == [
        [str(first.pk), "10", repr(abs(0.4 - 0.8)), "0.4", "0.8"],
        [str(first.pk), "20", "0.0", "0.5", "0.5"],
        [str(first.pk), "30", "0.0", "0.5", "0.5"],
        [str(second.pk), "10", repr(abs(0.4 - 0.8)), "0.4", "0.8"],
    ]
    one = client_for(carol).get(reverse("experiments:timeline-csv", args=[experiment.pk]), {"trial": second.pk})
    assert f"trial-{second.number}-timeline.csv" in one["Content-Disposition"]
    text = one.getvalue().decode()
    assert text.splitlines()[1:] == [f"{second.pk},10,{abs(0.4 - 0.8)!r},0.4,0.8"]


def test_a_group_named_like_a_formula_cannot_run_in_a_spreadsheet(
    carol: User, experiment: Experiment, dataset_storage: Path
) -> None:
    trial = TrialFactory.create(experiment=experiment)
    trial_metrics_ingest(
        trial=trial,
        records=[MetricRecord(kind="validation", step=1, metrics={"eod": 0.1, "recall/=cmd|' /C calc'!A0/@x": 0.5})],
    )
    response = client_for(carol).get(reverse("experiments:timeline-csv", args=[experiment.pk]))
    header = next(csv.reader(io.StringIO(response.getvalue().decode())))
    assert header[3] == "recall/=cmd|' /C calc'!A0/@x"  # begins with "recall/": a spreadsheet reads text
    assert all(not cell.startswith(("=", "+", "-", "@")) for cell in header)


@pytest.mark.parametrize("name", ["figures", "timeline-csv", "detail", "progress"])
def test_an_outsider_gets_404_and_an_anonymous_visitor_the_login_page(
    oscar: User, experiment: Experiment, name: str
) -> None:
    url = reverse(f"experiments:{name}", args=[experiment.pk])
    assert client_for(oscar).get(url).status_code == 404
    anonymous = Client().get(url)
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("fixture_name", ["alice", "bob", "carol", "dave", "erin"])
def test_every_role_reads_the_charts_and_the_csv(
    request: pytest.FixtureRequest, fixture_name: str, experiment: Experiment
) -> None:
    client = client_for(request.getfixturevalue(fixture_name))
    assert client.get(reverse("experiments:figures", args=[experiment.pk])).status_code == 200
    assert client.get(reverse("experiments:timeline-csv", args=[experiment.pk])).status_code == 200


def test_a_trial_of_another_experiment_or_a_bad_id_is_refused(
    carol: User, experiment: Experiment, trials: tuple[Trial, Trial], dataset_storage: Path
) -> None:
    other = TrialFactory.create()
    client = client_for(carol)
    for name in ("figures", "timeline-csv"):
        url = reverse(f"experiments:{name}", args=[experiment.pk])
        assert client.get(url, {"trial": other.pk}).status_code == 404
        bad = client.get(url, {"trial": "1 OR 1=1"})
        assert bad.status_code == 400
        assert "trial: expected a trial id (a whole number), got '1 OR 1=1'." in bad.content.decode()
    assert client.get(reverse("experiments:figures", args=[experiment.pk]), {"trial": "x"}).json()["field"] == "trial"


def test_hyperparameters_show_four_significant_digits_on_the_page_and_in_the_live_json(
    carol: User, experiment: Experiment, trials: tuple[Trial, Trial]
) -> None:
    first, _ = trials
    client = client_for(carol)
    page = client.get(reverse("experiments:detail", args=[experiment.pk])).content.decode()
    assert "<code>learning_rate=0.0007631</code>" in page
    assert "0.0007631388066955715" not in page
    progress = client.get(reverse("experiments:progress", args=[experiment.pk])).json()
    (row,) = [trial for trial in progress["trials"] if trial["id"] == first.pk]
    assert row["hparams_text"] == [["learning_rate", "0.0007631"], ["seed", "7"]]
    assert row["hparams"]["learning_rate"] == 0.0007631388066955715  # the exact value stays in the data


def test_the_trial_table_and_the_live_progress_show_eod_and_the_gap_beyond_noise_the_search_uses(
    carol: User, experiment: Experiment
) -> None:
    trial = TrialFactory.create(experiment=experiment)
    record = _validation(10, (1, 1), (2, 0), 0.8)  # one positive missed of two: an eod of 0.5, all noise
    record.metrics["eod_beyond_noise"] = 0.0
    record.metrics["fair_objective"] = 0.5
    later = _validation(20, *FAILING, 0.8)
    later.metrics["eod_beyond_noise"] = 0.3625
    later.metrics["fair_objective"] = 0.8625
    _ingest(trial, record)
    trial.refresh_from_db()
    assert (trial.latest_eod, trial.latest_eod_beyond_noise) == (0.5, 0.0)
    _ingest(trial, later)
    trial.refresh_from_db()
    assert trial.latest_eod == pytest.approx(0.4)
    assert trial.latest_eod_beyond_noise == 0.3625
    client = client_for(carol)
    page = client.get(reverse("experiments:detail", args=[experiment.pk])).content.decode()
    assert ">eod beyond noise</th>" in page
    assert '<td class="num" data-field="eod">0.400</td>' in page
    assert '<td class="num" data-field="eod_beyond_noise">0.362</td>' in page
    progress = client.get(reverse("experiments:progress", args=[experiment.pk])).json()
    (row,) = progress["trials"]
    assert row["metrics"]["eod_beyond_noise"] == 0.3625
    assert row["shown"]["eod_beyond_noise"] == "0.362"
