from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from auditportal.accounts.models import Role
from auditportal.experiments.models import Experiment, ExperimentStatus, Trial, TrialState, TrialVerdict
from tests.browser.conftest import ARTIFACTS, log_in
from tests.factories import DemoDatasetVersionFactory, ExperimentFactory, TrialFactory, make_user

SHOWS = """([trial, field, text]) =>
    document.querySelector(`tr[data-trial="${trial}"] [data-field="${field}"]`).textContent === text"""

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_experiment_page_follows_a_running_trial_without_a_reload(
    page: Any, live_server: Any, dataset_storage: Path
) -> None:
    bob = make_user("bob", [Role.ML_ENGINEER])
    experiment = ExperimentFactory.create(
        dataset_version=DemoDatasetVersionFactory.create(rows=300),
        batches=100,  # a validation every 25
        status=ExperimentStatus.RUNNING,
        launched_by=bob,
    )
    trial = TrialFactory.create(
        experiment=experiment,
        state=TrialState.RUNNING,
        steps_done=30,
        latest_step=25,
        latest_eod=0.2,
        latest_accuracy=0.7,
    )

    log_in(page, live_server.url, "bob")
    page.goto(f"{live_server.url}/experiments/{experiment.pk}/")
    row = page.locator(f'tr[data-trial="{trial.pk}"]')
    assert row.locator('[data-field="eod"]').inner_text() == "0.2000"
    page.evaluate("window.__loadMarker = 'same page'")

    # The worker ingests more metrics: the page must show them by itself.
    Trial.objects.filter(pk=trial.pk).update(
        steps_done=60, latest_step=50, latest_eod=0.0512, latest_fair_objective=0.61
    )
    TrialVerdict.objects.create(
        trial=trial, attribute="gender", step=50, tolerance=0.05, alpha=0.05, reference="male", verdict="FAIL",
        group="female", difference=-0.21, ci_low=-0.26, ci_high=-0.16,
    )  # fmt: skip
    page.wait_for_function(SHOWS, arg=[trial.pk, "eod", "0.0512"])
    badge = row.locator('[data-field="verdicts"] .verdict[data-attribute="gender"]')
    badge.wait_for()
    assert badge.locator(".badge").inner_text() == "FAIL"
    assert "female − male: -0.210 [-0.260, -0.160]" in badge.inner_text()
    assert row.locator('[data-field="steps"]').inner_text() == "60 / 100"
    assert row.locator('[data-field="bar"]').evaluate("e => e.style.width") == "60%"

    Trial.objects.filter(pk=trial.pk).update(state=TrialState.ERRORED, error="trainer crashed", log_tail="boom")
    Experiment.objects.filter(pk=experiment.pk).update(status=ExperimentStatus.ERRORED)
    page.wait_for_function(SHOWS, arg=[trial.pk, "state", "Errored"])
    assert page.locator(f'tr[data-trial-error="{trial.pk}"]').is_visible()
    assert "boom" in page.locator(f'tr[data-trial-error="{trial.pk}"] pre').inner_text()
    page.wait_for_selector("#cancel-form", state="hidden")
    assert page.evaluate("window.__loadMarker") == "same page", "the page was reloaded"
    page.screenshot(path=str(ARTIFACTS / "experiment-live-progress.png"), full_page=True)


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
