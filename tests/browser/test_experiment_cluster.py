"""A cluster experiment's page in Chromium: it names the backend and the Determined experiment, shows
why the last poll failed (and keeps showing it while the page refreshes itself), and shows the config
the portal submitted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from auditportal.accounts.models import Role
from auditportal.experiments.models import Experiment, TrialState
from tests.browser.conftest import ARTIFACTS, log_in
from tests.factories import ExperimentFactory, TrialFactory, make_user

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fast_polls"),
]

FAILED = (
    "last poll failed: master unreachable: HTTP 503 from http://determined-master:8080 while trying to read "
    "the metrics of trial 212"
)


@pytest.fixture
def running(dataset_storage: Path) -> Experiment:
    bob = make_user("bob", [Role.ML_ENGINEER])
    experiment = ExperimentFactory.create(
        template="asha",
        batches=320,
        launched_by=bob,
        status="running",
        backend="determined",
        det_experiment_id=57,
        error=FAILED,
    )
    for det_id, state, steps in (
        (211, TrialState.RUNNING, 160),
        (212, TrialState.RUNNING, 80),
        (213, TrialState.QUEUED, 0),
    ):
        TrialFactory.create(experiment=experiment, det_trial_id=det_id, state=state, steps_done=steps)
    return experiment


def test_the_page_names_the_cluster_and_shows_why_the_last_poll_failed(
    page: Any, live_server: Any, running: Experiment
) -> None:
    log_in(page, live_server.url, "bob")
    page.goto(f"{live_server.url}/experiments/{running.pk}/")
    backend = page.locator("dt:text-is('Backend') + dd")
    assert backend.inner_text() == "Determined cluster — Determined experiment 57"
    error = page.locator("#experiment-error")
    assert error.inner_text() == "L" + FAILED[1:]
    # The page polls its progress JSON; the reason stays until a poll succeeds. The second poll asks
    # only once the first one's answer is shown.
    for _ in range(2):
        with page.expect_response(lambda response: response.url.endswith(f"/experiments/{running.pk}/progress.json")):
            pass
    assert error.is_visible()
    assert error.inner_text() == "L" + FAILED[1:]
    page.click("#experiment-config summary")
    assert "adaptive_asha" in page.locator("#experiment-config pre").inner_text()
    assert "max_rungs: 3" in page.locator("#experiment-config pre").inner_text()
    page.screenshot(path=str(ARTIFACTS / "experiment-cluster-poll-failed.png"), full_page=True)

    page.goto(f"{live_server.url}/experiments/")
    assert "Determined cluster (det 57)" in page.locator("table.data").inner_text()
    page.screenshot(path=str(ARTIFACTS / "experiment-index-backend.png"), full_page=True)
    page.goto(f"{live_server.url}/experiments/new/")
    assert page.locator("#launch-backend").inner_text() == "Trains on: Local (Determined local training mode)"
    page.screenshot(path=str(ARTIFACTS / "experiment-new-backend.png"), full_page=True)
