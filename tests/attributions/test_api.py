"""POST /api/v1/trials/<id>/attributions/ and GET .../attributions/<aid>/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.test import Client

from auditportal.accounts.models import User
from auditportal.attributions import services
from auditportal.attributions.models import TrialAttribution
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments.models import Trial, TrialState
from tests.attributions.conftest import done_attribution, local_trial


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _post(user: User, trial: Trial, body: Any = None) -> Any:
    return _client(user).post(
        f"/api/v1/trials/{trial.pk}/attributions/", json.dumps(body or {}), content_type="application/json"
    )


def test_a_request_answers_202_pending_then_200_with_the_same_one(trial: Trial, bob: User, carol: User) -> None:
    answer = _post(bob, trial, {"sample_size": 300, "seed": 4})
    assert answer.status_code == 202, answer.content
    body = answer.json()
    assert body["state"] == "pending"
    assert (body["trial"], body["sample_size"], body["seed"]) == (trial.pk, 300, 4)
    assert body["document"] is None
    assert body["checkpoint_name"] == f"ckpt-{trial.pk}"
    assert "checkpoint" not in body  # the path stays on the server
    again = _post(carol, trial, {"sample_size": 300, "seed": 4})
    assert again.status_code == 200
    assert again.json()["id"] == body["id"]
    defaults = _post(bob, trial)
    assert defaults.status_code == 202
    assert (defaults.json()["sample_size"], defaults.json()["seed"]) == (services.DEFAULT_SAMPLE_SIZE, 0)


def test_a_done_attribution_answers_its_document_as_stored(trial: Trial, bob: User, dave: User) -> None:
    done = done_attribution(trial, bob)
    answer = _client(dave).get(f"/api/v1/trials/{trial.pk}/attributions/{done.pk}/")
    assert answer.status_code == 200
    body = answer.json()
    assert body["state"] == "done"
    assert body["sha256"] == done.sha256
    assert body["document"] == done.document


def test_refusals_answer_400_naming_the_field(version: DatasetVersion, runs: Path, bob: User) -> None:
    running = local_trial(version, runs, state=TrialState.RUNNING)
    answer = _post(bob, running)
    assert answer.status_code == 400
    assert answer.json() == {
        "detail": f"trial {running.pk} is running: only a completed trial's checkpoint is explained",
        "field": "trial",
    }
    trial = local_trial(version, runs)
    answer = _post(bob, trial, {"sample_size": 5})
    assert answer.status_code == 400
    assert answer.json()["field"] == "sample_size"
    assert "sample_size 5 is not between 100 and 20,000" in answer.json()["detail"]
    answer = _post(bob, trial, {"seed": "seven"})
    assert answer.status_code == 400
    assert "seed" in json.dumps(answer.json())
    assert not TrialAttribution.objects.exists()


def test_who_may_ask_and_read(trial: Trial, bob: User, alice: User, oscar: User) -> None:
    assert _post(alice, trial).status_code == 403  # a steward reads the trial, may not ask
    assert _post(oscar, trial).status_code == 404  # no role: no trial
    done = done_attribution(trial, bob)
    assert _client(alice).get(f"/api/v1/trials/{trial.pk}/attributions/{done.pk}/").status_code == 200
    assert _client(oscar).get(f"/api/v1/trials/{trial.pk}/attributions/{done.pk}/").status_code == 404
    assert Client().get(f"/api/v1/trials/{trial.pk}/attributions/{done.pk}/").status_code == 401


def test_an_attribution_of_another_trial_is_404(version: DatasetVersion, runs: Path, bob: User) -> None:
    one, other = local_trial(version, runs), local_trial(version, runs)
    done = done_attribution(one, bob)
    assert _client(bob).get(f"/api/v1/trials/{other.pk}/attributions/{done.pk}/").status_code == 404
    assert _client(bob).get(f"/api/v1/trials/{one.pk}/attributions/{done.pk + 1}/").status_code == 404
