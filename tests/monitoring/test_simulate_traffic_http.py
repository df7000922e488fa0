"""``manage.py simulate_traffic --url ... --token-file ...`` as `make run` uses it: a separate process posting
over HTTP with the demo's monitoring token to a live server, a real Celery worker counting and judging the
batches; an injected drift of women's FNR breaches the limit, and the deployment API answers the rollback
to the model before."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from django.core.management import call_command
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.monitoring.management.commands import seed_demo_deployment as demo
from auditportal.monitoring.models import Incident, PredictionBatch
from tests.database import subprocess_database_url
from tests.factories import PASSWORD
from tests.monitoring.test_walk import until
from tests.worker import REPO, start_worker_fixture  # noqa: F401 (the start_worker fixture)

pytestmark = [pytest.mark.slow, pytest.mark.uses_database, pytest.mark.django_db(transaction=True)]

WAIT_SECONDS = 60  # for the command
API = f"/api/v1/deployments/{demo.DEPLOYMENT}/"


def test_the_command_posts_over_http_and_the_api_answers_the_rollback_of_the_drifted_model(
    live_server: Any,
    settings: SettingsWrapper,
    dataset_storage: Path,
    tmp_path: Path,
    start_worker: Callable[..., subprocess.Popen[bytes]],
) -> None:
    settings.DEBUG = True
    worker = start_worker()  # first: it starts (seconds) while the demo is seeded
    log = tmp_path / "worker-0.log"
    call_command("seed_demo", "--password", PASSWORD, stdout=io.StringIO())
    token_file = tmp_path / "token"
    call_command("seed_demo_deployment", "--password", PASSWORD, "--token-file", token_file, stdout=io.StringIO())
    token = token_file.read_text().strip()
    status = requests.get(f"{live_server.url}{API}", headers={"Authorization": f"Token {token}"}, timeout=30)
    assert (status.json()["model"], status.json()["state"]) == (demo.MODELS[1], "serving")
    until("the worker to be ready", lambda: " ready." in log.read_text(errors="replace"), log=log)

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "auditportal.settings.test",
        "DATABASE_URL": subprocess_database_url(),
        "DATASET_STORAGE_DIR": str(settings.DATASET_STORAGE_DIR),
    }
    # Women's FNR 3% -> 40% from the first batch (limit 5%): confirmed within a batch or two; the pause
    # lets the worker judge a batch before the next is posted, so the command sees the rollback and stops.
    command = [
        sys.executable, "manage.py", "simulate_traffic", "--deployment", demo.DEPLOYMENT,
        "--url", live_server.url, "--token-file", str(token_file), "--wait", "10",
        "--batches", "20", "--batch-size", "1000", "--seed", "5", "--interval", "0.5", "--batch-prefix", "http",
        "--drift-group", "gender=female", "--drift-fnr", "0.4",
    ]  # fmt: skip
    run = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=WAIT_SECONDS)
    assert run.returncode == 0, run.stdout + run.stderr + log.read_text(errors="replace")[-3000:]
    assert "http-00001: 1000 rows of demo-credit:2 received" in run.stdout

    def rolled_back() -> dict[str, Any] | None:
        answer = requests.get(f"{live_server.url}{API}", headers={"Authorization": f"Token {token}"}, timeout=30)
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body if body["state"] != "serving" else None

    answer = until("the deployment to leave 'serving'", rolled_back, log=log)
    assert worker.poll() is None, log.read_text(errors="replace")[-4000:]
    incident = Incident.objects.get(deployment__name=demo.DEPLOYMENT)
    assert (answer["model"], answer["state"], answer["reason"]) == (demo.MODELS[0], "rolled_back", incident.reason)
    assert incident.model_identifier == demo.MODELS[1]
    assert "female" in incident.reason
    assert answer["previous"][0]["model"] == demo.MODELS[1]
    # Posted over HTTP with the demo's monitoring token: the batches are its account's, all of the drifted model.
    batches = PredictionBatch.objects.filter(deployment__name=demo.DEPLOYMENT)
    assert set(batches.values_list("received_by__username", "model_identifier")) == {(demo.ACCOUNT, demo.MODELS[1])}
    # The worker kept up: the command saw the rollback through the API and stopped feeding the drifted model.
    assert f"{demo.MODELS[1]} no longer serves in {demo.DEPLOYMENT} (now: {demo.MODELS[0]})." in run.stdout
    assert batches.count() < 20
