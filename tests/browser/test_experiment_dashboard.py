"""The experiment page's charts in Chromium: they render without console errors, a trial click (in
the table or on a chart) updates the recall chart, and a running trial's timeline grows by itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from auditportal.accounts.models import Role
from auditportal.experiments.ingest import trial_metrics_ingest
from auditportal.experiments.models import Experiment, ExperimentStatus, Trial, TrialState
from auditportal.fairness.files.metricsfile import MetricRecord
from tests.browser.conftest import ARTIFACTS, log_in
from tests.factories import ExperimentFactory, TrialFactory, make_user

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fast_polls"),
]

FIGURES = ("figure-timeline", "figure-recall", "figure-scatter", "figure-lowest")
# plotly.js keeps a figure's arrays, decoded, in the element's _fullData (its .data holds the typed
# arrays as the server sent them, base64).
# A trace by its name (the selected trial's noise floor is drawn first, under the lines).
TRACE = "document.getElementById(id)._fullData.find(trace => trace.name === name)"
TRACE_POINTS = f"([id, name]) => {TRACE}.x.length"
TRACE_X = f"([id, name]) => Array.from({TRACE}.x)"


def _validation(step: int, female: int, male: int) -> MetricRecord:
    """gender groups with 1,000 positives each, ``female`` and ``male`` of them found."""
    from trainer import bias  # here, not at the top: it imports torch (1 s of CPU) in every collecting process

    metrics: dict[str, float | None] = {"count/gender/unknown": 0.0, "accuracy": 0.7 + step / 1000}
    for group, tp in (("female", female), ("male", male)):
        for cell, value in zip(("tp", "fn", "fp", "tn"), (tp, 1000 - tp, 100, 900), strict=True):
            metrics[f"count/gender/{group}/{cell}"] = float(value)
        metrics[f"recall/gender/{group}"] = tp / 1000
    metrics["eod"] = abs(female - male) / 1000
    beyond_noise = bias.gap_beyond_noise([female, male], [1000, 1000])
    metrics["eod_beyond_noise"] = beyond_noise
    metrics["fair_objective"] = 0.5 + beyond_noise
    return MetricRecord(kind="validation", step=step, metrics=metrics)


@pytest.fixture
def console(page: Any) -> list[str]:
    """Every console error and uncaught exception of the page."""
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


@pytest.fixture
def search(dataset_storage: Path) -> tuple[Experiment, Trial, Trial]:
    bob = make_user("bob", [Role.ML_ENGINEER])
    experiment = ExperimentFactory.create(template="random", batches=40, launched_by=bob, status="completed")
    first = TrialFactory.create(
        experiment=experiment, state=TrialState.COMPLETED, hparams={"learning_rate": 0.0007631388066955715}
    )
    second = TrialFactory.create(experiment=experiment, state=TrialState.COMPLETED, hparams={"learning_rate": 0.01})
    for step, female in ((10, 400), (20, 700), (30, 790)):
        trial_metrics_ingest(trial=first, records=[_validation(step, female, 800)])
    one_worker: dict[str, float | None] = {
        "worker_share/gender/female/rank0": 0.5,
        "worker_share/gender/male/rank0": 0.5,
        "worker_share_spread/gender": 0.0,
    }
    trial_metrics_ingest(trial=first, records=[MetricRecord(kind="training", step=10, metrics=one_worker)])
    for step, female in ((10, 300), (20, 500)):
        trial_metrics_ingest(trial=second, records=[_validation(step, female, 900)])
    return experiment, first, second


def _open(page: Any, base_url: str, experiment: Experiment) -> None:
    log_in(page, base_url, "carol")
    page.goto(f"{base_url}/experiments/{experiment.pk}/")
    page.wait_for_selector("#charts[data-version]")


def test_the_charts_render_without_console_errors_and_fit_1280_pixels(
    page: Any, live_server: Any, console: list[str], search: tuple[Experiment, Trial, Trial]
) -> None:
    experiment, first, _ = search
    make_user("carol", [Role.REVIEWER])
    _open(page, live_server.url, experiment)
    for figure in FIGURES:
        assert page.locator(f"#{figure}.figure-drawn .main-svg").count() >= 1, figure
    # One line per trial (three and two validations), each named.
    assert page.evaluate(TRACE_POINTS, ["figure-timeline", "trial 1"]) == 3
    assert page.evaluate(TRACE_POINTS, ["figure-timeline", "trial 2"]) == 2
    # Under the selected trial (1), the noise floor of the pair that set its eod, at each validation.
    assert page.evaluate(TRACE_X, ["figure-timeline", "noise floor, trial 1"]) == [10, 20, 30]
    assert page.locator("#figure-timeline .legendtext").evaluate_all("nodes => nodes.map(n => n.textContent)")[:2] == [
        "trial 1",
        "trial 2",
    ]
    assert (
        page.locator("#workers-note")
        .inner_text()
        .endswith("ran on one worker: there is no split of its groups between workers to show.")
    )
    assert page.locator(f'tr[data-trial="{first.pk}"] td.hparams').inner_text().count("learning_rate=0.0007631") == 1
    # Both gaps: the raw eod (plotted) and the one less its noise that fair_objective searches on.
    assert page.locator(f'tr[data-trial="{first.pk}"] td[data-field="eod"]').inner_text() == "0.0100"
    assert page.locator(f'tr[data-trial="{first.pk}"] td[data-field="eod_beyond_noise"]').inner_text() == "0"
    second_beyond = page.locator(f'tr[data-trial="{search[2].pk}"] td[data-field="eod_beyond_noise"]').inner_text()
    assert 0.3 < float(second_beyond) < 0.4
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    page.screenshot(path=str(ARTIFACTS / "experiment-dashboard.png"), full_page=True)
    assert console == []


def test_a_trial_click_in_the_table_or_on_a_chart_updates_the_recall_chart(
    page: Any, live_server: Any, console: list[str], search: tuple[Experiment, Trial, Trial]
) -> None:
    experiment, first, second = search
    make_user("carol", [Role.REVIEWER])
    _open(page, live_server.url, experiment)
    # The default is the searcher's best trial (the lowest fair_objective): trial 1.
    assert page.get_attribute("#charts", "data-selected") == str(first.pk)
    assert "trial 1" in page.locator("#figure-recall .gtitle").text_content()
    recall = "() => Array.from(document.getElementById('figure-recall')._fullData[0].x)"
    assert page.evaluate(recall) == [0.79, 0.8]

    page.click(f'tr[data-trial="{second.pk}"] td[data-field="eod"]')
    page.wait_for_selector(f'#charts[data-selected="{second.pk}"]')
    assert "Recall per group, trial 2 (step 20)" in page.locator("#figure-recall .gtitle").text_content()
    assert page.evaluate(recall) == [0.5, 0.9]
    assert page.locator(f'tr[data-trial="{second.pk}"]').get_attribute("class") == "selected"
    assert page.get_attribute("#csv-trial", "href").endswith(f"timeline.csv?trial={second.pk}")

    # A click on trial 1's bar in the lowest-eod chart selects it again.
    bar = page.locator("#figure-lowest .bars .point").first.bounding_box()
    page.mouse.click(bar["x"] + bar["width"] / 2, bar["y"] + bar["height"] - 3)
    page.wait_for_selector(f'#charts[data-selected="{first.pk}"]')
    assert page.evaluate(recall) == [0.79, 0.8]
    page.screenshot(path=str(ARTIFACTS / "experiment-dashboard-selected.png"), full_page=True)
    assert console == []


def test_the_timeline_grows_while_a_trial_runs_without_a_reload(
    page: Any, live_server: Any, console: list[str], dataset_storage: Path
) -> None:
    carol = make_user("carol", [Role.REVIEWER])
    experiment = ExperimentFactory.create(
        batches=100, status=ExperimentStatus.RUNNING, launched_by=make_user("bob", [Role.ML_ENGINEER])
    )
    trial = TrialFactory.create(experiment=experiment, state=TrialState.RUNNING)
    trial_metrics_ingest(trial=trial, records=[_validation(25, 500, 800)])
    assert carol.is_member
    _open(page, live_server.url, experiment)
    assert page.evaluate(TRACE_POINTS, ["figure-timeline", "trial 1"]) == 1
    page.evaluate("window.__loadMarker = 'same page'")

    # The worker ingests the next validation: the timeline must extend by itself.
    trial_metrics_ingest(trial=trial, records=[_validation(50, 780, 800)])
    page.wait_for_function(f"{TRACE_POINTS} === 2", arg=["figure-timeline", "trial 1"])
    assert page.evaluate(TRACE_X, ["figure-timeline", "trial 1"]) == [25, 50]
    assert page.evaluate("window.__loadMarker") == "same page", "the page was reloaded"
    page.screenshot(path=str(ARTIFACTS / "experiment-dashboard-live.png"), full_page=True)
    assert console == []
