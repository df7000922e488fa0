"""The experiment page's charts as a search fills them, in Chromium at 1280 and 390 pixels: the
accuracy-vs-eod numbers never overlap, the noise floor under the selected trial is the floor of the
pair that set its eod (not the widest of any group), an experiment without validations shows
empty charts on sane axes, and the worker-share map shows differences under 0.02. Screenshots in
test-artifacts/browser/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from auditportal.accounts.models import Role
from auditportal.experiments.ingest import trial_metrics_ingest
from auditportal.experiments.models import Experiment, ExperimentStatus, Trial, TrialState
from auditportal.fairness.files.metricsfile import MetricRecord
from tests.browser.conftest import ARTIFACTS, log_in
from tests.factories import ExperimentFactory, TrialFactory, make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# Positives per group: race "c" is tiny, so its comparisons have the widest noise floor.
POSITIVES = {("gender", "female"): 900, ("gender", "male"): 1100, ("race", "a"): 1200, ("race", "b"): 780}
POSITIVES[("race", "c")] = 20
WIDTHS = (1280, 390)
LABELS = """id => Array.from(document.querySelectorAll(`#${id} .textpoint text`))
    .filter(t => t.textContent).map(t => { const b = t.getBoundingClientRect();
        return [t.textContent, b.left, b.top, b.right, b.bottom]; })"""


def _validation(step: int, recall: dict[tuple[str, str], float], accuracy: float) -> MetricRecord:
    metrics: dict[str, float | None] = {"accuracy": accuracy}
    gaps = []
    for attribute in ("gender", "race"):
        metrics[f"count/{attribute}/unknown"] = 0.0
        rates = []
        for (name, group), positives in POSITIVES.items():
            if name != attribute:
                continue
            tp = round(recall[(name, group)] * positives)
            for cell, value in zip(("tp", "fn", "fp", "tn"), (tp, positives - tp, 150, 1350), strict=True):
                metrics[f"count/{attribute}/{group}/{cell}"] = float(value)
            metrics[f"recall/{attribute}/{group}"] = tp / positives
            rates.append(tp / positives)
        gaps.append(max(rates) - min(rates))
    metrics["eod"] = max(gaps)
    metrics["fair_objective"] = 0.45 + max(gaps)
    return MetricRecord(kind="validation", step=step, metrics=metrics)


@pytest.fixture
def search(dataset_storage: Path) -> tuple[Experiment, list[Trial]]:
    """Twelve trials whose accuracy and eod crowd together; trial 1 trained on two workers."""
    bob = make_user("bob", [Role.ML_ENGINEER])
    make_user("carol", [Role.REVIEWER])
    experiment = ExperimentFactory.create(
        template="random", max_trials=12, batches=400, launched_by=bob, status=ExperimentStatus.COMPLETED
    )
    rng = np.random.default_rng(5)
    trials = []
    for _ in range(12):
        trial = TrialFactory.create(experiment=experiment, state=TrialState.COMPLETED)
        # gender's gap (about 0.08) sets the eod; race c's twenty positives sit in the middle.
        base = dict(zip(POSITIVES, [0.66, 0.74, 0.7, 0.7, 0.7], strict=True))
        base = {key: value + 0.01 * rng.standard_normal() for key, value in base.items()}
        records = []
        for step in range(50, 401, 50):
            recall = {key: float(np.clip(value + 0.01 * rng.standard_normal(), 0, 1)) for key, value in base.items()}
            recall[("race", "c")] = 0.7  # 14 of 20
            records.append(_validation(step, recall, 0.81 + 0.004 * rng.standard_normal()))
        for record in records:
            trial_metrics_ingest(trial=trial, records=[record])
        trials.append(trial)
    shares: dict[str, float | None] = {}
    for group, share in (("female", 0.45), ("male", 0.55)):
        for rank, drift in ((0, 0.006), (1, -0.006)):
            shares[f"worker_share/gender/{group}/rank{rank}"] = share + (drift if group == "female" else -drift)
    shares["worker_share_spread/gender"] = 0.012
    for step in (10, 20, 30):
        trial_metrics_ingest(trial=trials[0], records=[MetricRecord(kind="training", step=step, metrics=shares)])
    return experiment, trials


def _open(page: Any, base_url: str, experiment: Experiment, width: int, trial: Trial | None = None) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{base_url}/experiments/{experiment.pk}/")
    page.wait_for_selector("#charts[data-version]")
    if trial is not None:
        page.click(f'button[data-select-trial="{trial.pk}"]')
        page.wait_for_selector(f'#charts[data-selected="{trial.pk}"]')


def _overlapping(boxes: list[list[Any]]) -> list[tuple[str, str]]:
    pairs = []
    for index, (name, left, top, right, bottom) in enumerate(boxes):
        for other, o_left, o_top, o_right, o_bottom in boxes[index + 1 :]:
            if left < o_right and o_left < right and top < o_bottom and o_top < bottom:
                pairs.append((name, other))
    return pairs


@pytest.mark.parametrize("width", WIDTHS)
def test_the_charts_of_a_crowded_search_keep_their_numbers_apart_and_the_floor_to_the_eods_pair(
    page: Any, live_server: Any, search: tuple[Experiment, list[Trial]], width: int
) -> None:
    experiment, trials = search
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, live_server.url, "carol")
    _open(page, live_server.url, experiment, width, trials[0])

    labels = page.evaluate(LABELS, "figure-scatter")
    assert 1 <= len(labels) <= 5
    assert "1" in [label[0] for label in labels]  # the selected trial is numbered
    assert _overlapping(labels) == []

    # The grey region under trial 1's line: at each step the floor of the pair that set its eod
    # (gender's), well below the widest floor of any of its comparisons (race c's, twenty positives).
    band = page.evaluate(
        "() => { const t = document.getElementById('figure-timeline')._fullData"
        ".find(d => d.name === 'noise floor, trial 1'); return [Array.from(t.y), Array.from(t.text)]; }"
    )
    widest = max(v.noise_floor or 0.0 for v in trials[0].verdicts.all())
    assert len(band[0]) == 8
    assert all(0 < floor < widest / 2 for floor in band[0])
    assert all(text.startswith("gender: ") for text in band[1])
    heat = page.evaluate("() => document.getElementById('figure-workers')._fullData[0]")
    # The data's reach (0.006 off the workers' mean) takes the whole diverging scale.
    assert (heat["zmin"], heat["zmax"]) == (pytest.approx(-0.006), pytest.approx(0.006))
    assert "trial 1" in page.locator("#figure-workers .gtitle").text_content()
    page.screenshot(path=str(ARTIFACTS / f"experiment-charts-{width}.png"), full_page=True)
    assert errors == []


@pytest.mark.parametrize("width", WIDTHS)
def test_an_experiment_without_validations_shows_empty_charts_on_sane_axes(
    page: Any, live_server: Any, dataset_storage: Path, width: int
) -> None:
    make_user("carol", [Role.REVIEWER])
    experiment = ExperimentFactory.create(
        batches=400, status=ExperimentStatus.RUNNING, launched_by=make_user("bob", [Role.ML_ENGINEER])
    )
    TrialFactory.create(experiment=experiment, state=TrialState.RUNNING)
    log_in(page, live_server.url, "carol")
    _open(page, live_server.url, experiment, width)
    for figure, axis, bounds in (
        ("figure-timeline", "yaxis", [0, 1]),
        ("figure-timeline", "xaxis", [0, 400]),
        ("figure-scatter", "yaxis", [0, 1]),
        ("figure-scatter", "xaxis", [0, 1]),
        ("figure-lowest", "yaxis", [0, 1]),
        ("figure-recall", "xaxis", [0, 1.02]),
    ):
        shown = page.evaluate(f"() => document.getElementById('{figure}')._fullLayout.{axis}.range")
        assert shown == bounds, (figure, axis)
        assert "No " in page.locator(f"#{figure} .annotation-text").first.text_content()
    page.screenshot(path=str(ARTIFACTS / f"experiment-charts-empty-{width}.png"), full_page=True)
