from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from auditportal.accounts.models import Role
from auditportal.experiments.ingest import trial_metrics_ingest
from auditportal.experiments.models import (
    Experiment,
    ExperimentStatus,
    RungOutcome,
    Trial,
    TrialRung,
    TrialState,
    TrialVerdict,
)
from auditportal.experiments.services import verdict_document_freeze_trial_completed
from auditportal.fairness.files.metricsfile import MetricRecord
from tests.browser.conftest import ARTIFACTS, log_in
from tests.factories import DemoDatasetVersionFactory, ExperimentFactory, TrialFactory, make_user

SHOWS = """([trial, field, text]) =>
    document.querySelector(`tr[data-trial="${trial}"] [data-field="${field}"]`).textContent === text"""

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fast_polls"),
]


def test_the_experiment_page_follows_a_running_trial_without_a_reload(
    page: Any, live_server: Any, dataset_storage: Path
) -> None:
    bob = make_user("bob", [Role.ML_ENGINEER])
    experiment = ExperimentFactory.create(
        dataset_version=DemoDatasetVersionFactory.create(rows=300),
        batches=2000,
        status=ExperimentStatus.RUNNING,
        launched_by=bob,
    )
    trial = TrialFactory.create(
        experiment=experiment,
        state=TrialState.RUNNING,
        steps_done=600,
        latest_step=25,
        latest_eod=0.2,
        latest_accuracy=0.7,
    )

    log_in(page, live_server.url, "bob")
    page.goto(f"{live_server.url}/experiments/{experiment.pk}/")
    row = page.locator(f'tr[data-trial="{trial.pk}"]')
    # Numbers for people: rates at 3 significant digits, counts with separators.
    assert row.locator('[data-field="eod"]').inner_text() == "0.200"
    assert row.locator('[data-field="steps"]').inner_text() == "600 / 2,000"
    page.evaluate("window.__loadMarker = 'same page'")

    # The worker ingests more metrics: the page must show them by itself.
    Trial.objects.filter(pk=trial.pk).update(
        steps_done=1200, latest_step=50, latest_eod=0.0512, latest_fair_objective=0.61
    )
    TrialVerdict.objects.create(
        trial=trial, attribute="gender", step=50, tolerance=0.05, alpha=0.05, reference="male", verdict="FAIL",
        group="female", difference=-0.21, ci_low=-0.26, ci_high=-0.16,
    )  # fmt: skip
    TrialVerdict.objects.create(
        trial=trial, attribute="race", step=50, tolerance=0.05, alpha=0.05, reference="a", verdict="INCONCLUSIVE",
        group="b", difference=0.0312, ci_low=-0.0101, ci_high=0.0725, positives_needed=12345,
    )  # fmt: skip
    page.wait_for_function(SHOWS, arg=[trial.pk, "eod", "0.0512"])
    badge = row.locator('[data-field="verdicts"] .verdict[data-attribute="gender"]')
    badge.wait_for()
    assert badge.locator(".badge").inner_text() == "FAIL"
    assert "female − male: -0.210 [-0.260, -0.160]" in badge.inner_text()
    race = row.locator('[data-field="verdicts"] .verdict[data-attribute="race"]')
    assert "b − a: +0.0312 [-0.0101, +0.0725]; ~12,345 positives in b to decide" in race.inner_text()
    assert row.locator('[data-field="steps"]').inner_text() == "1,200 / 2,000"
    assert row.locator('[data-field="fair_objective"]').inner_text() == "0.610"
    live = row.locator('[data-field="verdicts"]').inner_text()
    assert row.locator('[data-field="bar"]').evaluate("e => e.style.width") == "60%"

    Trial.objects.filter(pk=trial.pk).update(state=TrialState.ERRORED, error="trainer crashed", log_tail="boom")
    Experiment.objects.filter(pk=experiment.pk).update(status=ExperimentStatus.ERRORED)
    page.wait_for_function(SHOWS, arg=[trial.pk, "state", "Errored"])
    assert page.locator(f'tr[data-trial-error="{trial.pk}"]').is_visible()
    assert "boom" in page.locator(f'tr[data-trial-error="{trial.pk}"] pre').inner_text()
    page.wait_for_selector("#cancel-form", state="hidden")
    assert page.evaluate("window.__loadMarker") == "same page", "the page was reloaded"
    page.screenshot(path=str(ARTIFACTS / "experiment-live-progress.png"), full_page=True)
    # The server writes the row's numbers as the live update did.
    page.reload()
    assert row.locator('[data-field="verdicts"]').inner_text() == live
    assert row.locator('[data-field="steps"]').inner_text() == "1,200 / 2,000"


def test_a_cancel_shows_cancelling_until_the_worker_reports_when_the_trial_actually_stopped(
    page: Any, live_server: Any, dataset_storage: Path
) -> None:
    bob = make_user("bob", [Role.ML_ENGINEER])
    experiment = ExperimentFactory.create(
        dataset_version=DemoDatasetVersionFactory.create(rows=300),
        batches=100,
        status=ExperimentStatus.RUNNING,
        launched_by=bob,
    )
    trial = TrialFactory.create(experiment=experiment, state=TrialState.RUNNING, steps_done=30)

    log_in(page, live_server.url, "bob")
    page.goto(f"{live_server.url}/experiments/{experiment.pk}/")
    page.click("#cancel-form button")
    page.wait_for_selector("#experiment-status.cancelling")
    assert page.locator("#experiment-status").inner_text() == "Cancelling"
    assert page.locator("#cancel-form").count() == 0  # asked once is enough
    assert "1 trial still stopping." in page.locator("#experiment-cancel-note").inner_text()
    assert page.locator(f'tr[data-trial="{trial.pk}"] [data-field="state"]').inner_text() == "Running"

    # The worker stops the trial and records when its processes were gone.
    experiment.refresh_from_db()
    assert experiment.cancel_requested_at is not None
    stopped_at = experiment.cancel_requested_at + timedelta(seconds=3)
    Trial.objects.filter(pk=trial.pk).update(
        state=TrialState.CANCELED,
        stop_reason="cancel",
        stop_requested_at=experiment.cancel_requested_at + timedelta(seconds=1),
        ended_at=stopped_at,
    )
    Experiment.objects.filter(pk=experiment.pk).update(status=ExperimentStatus.CANCELLED, ended_at=stopped_at)
    page.wait_for_function(SHOWS, arg=[trial.pk, "state", "Cancelled"])
    shown = timezone.localtime(stopped_at).strftime("%Y-%m-%d %H:%M:%S")
    note = page.locator(f'tr[data-trial-note="{trial.pk}"]')
    assert note.is_visible()
    assert note.inner_text().endswith(f"Stopped {shown}.")
    assert page.locator("#experiment-cancel-note").inner_text().endswith(f"every trial had stopped by {shown}.")
    page.screenshot(path=str(ARTIFACTS / "experiment-cancelled.png"), full_page=True)


def test_a_reviewer_follows_an_erroring_trial_and_sees_its_error_without_its_log_tail(
    page: Any, live_server: Any, dataset_storage: Path
) -> None:
    make_user("carol", [Role.REVIEWER])
    experiment = ExperimentFactory.create(
        dataset_version=DemoDatasetVersionFactory.create(rows=300),
        batches=100,
        status=ExperimentStatus.RUNNING,
        launched_by=make_user("bob", [Role.ML_ENGINEER]),
    )
    trial = TrialFactory.create(experiment=experiment, state=TrialState.RUNNING, steps_done=30)
    log_in(page, live_server.url, "carol")
    page.goto(f"{live_server.url}/experiments/{experiment.pk}/")
    assert page.locator("#cancel-form").count() == 0  # not the launcher
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    Trial.objects.filter(pk=trial.pk).update(
        state=TrialState.ERRORED, error="trainer crashed", log_tail='File "/srv/portal/var/runs/1/train.py"'
    )
    Experiment.objects.filter(pk=experiment.pk).update(status=ExperimentStatus.ERRORED)
    page.wait_for_function(SHOWS, arg=[trial.pk, "state", "Errored"])
    error_row = page.locator(f'tr[data-trial-error="{trial.pk}"]')
    error_row.wait_for()
    assert error_row.inner_text().strip() == "Trainer crashed"
    assert "/srv/portal" not in page.content()
    assert errors == []


def _validation(step: int) -> MetricRecord:
    """A validation of the demo's gender groups (1,000 positives each) with a gap of 0.2."""
    metrics: dict[str, float | None] = {"count/gender/unknown": 0.0, "accuracy": 0.8, "eod": 0.2}
    for group, tp in (("female", 600), ("male", 800)):
        for cell, value in zip(("tp", "fn", "fp", "tn"), (tp, 1000 - tp, 100, 900), strict=True):
            metrics[f"count/gender/{group}/{cell}"] = float(value)
        metrics[f"recall/gender/{group}"] = tp / 1000
    metrics["fair_objective"] = 0.7
    return MetricRecord(kind="validation", step=step, metrics=metrics)


def test_a_trial_that_completes_while_the_page_is_open_brings_its_documents_review_link_and_rungs(
    page: Any, live_server: Any, dataset_storage: Path
) -> None:
    bob = make_user("bob", [Role.ML_ENGINEER])
    experiment = ExperimentFactory.create(
        dataset_version=DemoDatasetVersionFactory.create(rows=300),
        template="asha",
        max_trials=4,
        batches=100,
        status=ExperimentStatus.RUNNING,
        launched_by=bob,
    )
    trial = TrialFactory.create(experiment=experiment, state=TrialState.RUNNING, steps_done=10, asha_bracket=0)
    rival = TrialFactory.create(experiment=experiment, state=TrialState.RUNNING, steps_done=10, asha_bracket=0)

    log_in(page, live_server.url, "bob")
    page.goto(f"{live_server.url}/experiments/{experiment.pk}/")
    documents = page.locator(f'tr[data-trial-documents="{trial.pk}"]')
    assert documents.is_hidden()
    first_rung = page.locator('#asha-rungs tr[data-bracket="1"][data-rung="1"] td')
    assert first_rung.nth(3).inner_text() == "0"  # entered
    page.evaluate("window.__loadMarker = 'same page'")

    # The worker ingests the trial's last validation, the search decides the first rung, the trial
    # completes with its checkpoint and its last validation is frozen.
    trial_metrics_ingest(trial=trial, records=[_validation(100)])
    units = first_rung.nth(2).inner_text()
    rung: dict[str, Any] = {"rung": 0, "units": int(units.replace(",", "")), "entered": 2, "continuing": 1}
    TrialRung.objects.create(trial=trial, step=25, metric=0.6, position=1, outcome=RungOutcome.CONTINUED, **rung)
    TrialRung.objects.create(trial=rival, step=25, metric=0.9, position=2, outcome=RungOutcome.STOPPED, **rung)
    Trial.objects.filter(pk=trial.pk).update(
        state=TrialState.COMPLETED, steps_done=100, checkpoint="/checkpoints/trial-1/", ended_at=timezone.now()
    )
    document = verdict_document_freeze_trial_completed(trial=trial)
    assert document is not None

    page.wait_for_function(SHOWS, arg=[trial.pk, "state", "Completed"])
    link = documents.locator("a.document-link")
    link.wait_for()
    assert documents.is_visible()
    assert link.get_attribute("href") == f"/documents/{document.pk}/"
    assert link.inner_text() == document.short_hash
    review = documents.locator("a.request-review")
    assert review.get_attribute("href") == f"/approvals/new/?trial={trial.pk}"
    assert documents.locator("select[name=step] option").all_inner_texts() == ["step 100"]
    page.wait_for_function(
        '() => document.querySelector(\'#asha-rungs tr[data-bracket="1"][data-rung="1"] [data-field=stopped]\')'
        ".textContent === '1'"
    )
    assert [first_rung.nth(index).inner_text() for index in (3, 4, 5)] == ["2", "1", "1"]
    assert page.evaluate("window.__loadMarker") == "same page", "the page was reloaded"
    page.screenshot(path=str(ARTIFACTS / "experiment-live-documents.png"), full_page=True)

    # The link the live row brought works like the page's own.
    review.click()
    page.wait_for_url(f"**/approvals/new/?trial={trial.pk}")
