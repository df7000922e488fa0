from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils.html import escape
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments import services
from auditportal.experiments.models import Experiment
from tests.factories import client_for


@pytest.fixture
def experiment(bob: User, demo_version: DatasetVersion, fake_trainer: Path) -> Experiment:
    return services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=4)


def test_members_read_the_live_page_and_its_json(carol: User, experiment: Experiment) -> None:
    client = client_for(carol)
    page = client.get(reverse("experiments:detail", args=[experiment.pk]))
    assert page.status_code == 200
    assert b"js/experiments.js" in page.content
    data = json.loads(client.get(reverse("experiments:progress", args=[experiment.pk])).content)
    assert data["experiment"] == experiment.pk
    assert data["status"] == "queued"


def test_an_outsider_gets_404_for_an_experiment(oscar: User, experiment: Experiment) -> None:
    assert client_for(oscar).get(reverse("experiments:detail", args=[experiment.pk])).status_code == 404
    assert client_for(oscar).get(reverse("experiments:progress", args=[experiment.pk])).status_code == 404


@pytest.mark.parametrize("fixture_name", ["alice", "carol", "dave"])
def test_members_without_the_ml_engineer_role_cannot_launch_or_cancel(
    request: pytest.FixtureRequest, fixture_name: str, experiment: Experiment
) -> None:
    client = client_for(request.getfixturevalue(fixture_name))
    response = client.get(reverse("experiments:new"))
    assert response.status_code == 403
    assert b"Only an ML engineer can launch experiments" in response.content
    assert client.post(reverse("experiments:cancel", args=[experiment.pk])).status_code == 403
    experiment.refresh_from_db()
    assert experiment.status == "queued"


def test_an_invalid_range_is_rejected_on_the_hparams_field(bob: User, demo_version: DatasetVersion) -> None:
    response = client_for(bob).post(
        reverse("experiments:new"),
        {
            "dataset_version": demo_version.pk,
            "template": "random",
            "hparams": '{"dropout": {"type": "double", "minval": 0.5, "maxval": 0.1}}',
            "max_trials": 3,
            "batches": 20,
        },
    )
    assert response.status_code == 400
    assert "dropout: minval (0.5) must be below maxval (0.1)." in response.content.decode()
    assert not Experiment.objects.exists()


def test_an_unknown_hyperparameter_is_rejected_by_the_api_with_the_field(
    bob: User, demo_version: DatasetVersion
) -> None:
    client = client_for(bob)
    response = client.post(
        reverse("api-experiment-list"),
        {"dataset_version": demo_version.pk, "template": "single", "hparams": {"lr": 0.1}},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "hparams"
    assert response.json()["detail"].startswith("Unknown hyperparameter 'lr'")


LAYER_REFUSED = 'normalization: "layer" is not one of none, batch, sync_batch.'


def test_the_form_shows_a_refused_normalization_on_the_hparams_field_with_the_allowed_values(
    bob: User, demo_version: DatasetVersion
) -> None:
    response = client_for(bob).post(
        reverse("experiments:new"),
        {
            "dataset_version": demo_version.pk,
            "template": "single",
            "hparams": '{"normalization": "layer"}',
            "batches": 20,
        },
    )
    assert response.status_code == 400
    assert response.context["form"].errors == {"hparams": [LAYER_REFUSED]}
    assert f'<p class="error" role="alert">{escape(LAYER_REFUSED)}</p>' in response.content.decode()
    assert not Experiment.objects.exists()


def test_the_api_refuses_a_normalization_with_the_allowed_values_and_accepts_sync_batch(
    bob: User, demo_version: DatasetVersion
) -> None:
    client = client_for(bob)
    url = reverse("api-experiment-list")
    body: dict[str, object] = {"dataset_version": demo_version.pk, "template": "single", "batches": 20}
    response = client.post(url, {**body, "hparams": {"normalization": "layer"}}, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {"detail": LAYER_REFUSED, "field": "hparams"}
    assert not Experiment.objects.exists()
    response = client.post(url, {**body, "hparams": {"normalization": "sync_batch"}}, content_type="application/json")
    assert response.status_code == 201
    assert Experiment.objects.get().hparam_space["normalization"] == "sync_batch"


def test_the_api_refuses_a_double_range_for_an_integer_hyperparameter(bob: User, demo_version: DatasetVersion) -> None:
    response = client_for(bob).post(
        reverse("api-experiment-list"),
        {
            "dataset_version": demo_version.pk,
            "template": "random",
            "hparams": {"global_batch_size": {"type": "double", "minval": 64, "maxval": 512}},
        },
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json() == {
        "detail": 'global_batch_size is an integer: use {"type": "int", "minval": 64, "maxval": 512}, '
        'not a "double" range.',
        "field": "hparams",
    }


def test_a_model_too_large_for_the_datasets_features_is_refused_at_launch(
    bob: User, demo_version: DatasetVersion
) -> None:
    # The demo dataset has 5 numeric and 3 categorical features: at most 5 + 3 * 256 inputs.
    client = client_for(bob)
    body: dict[str, object] = {"dataset_version": demo_version.pk, "template": "single", "batches": 20}
    hparams = {"hidden_sizes": "2048,2048", "embedding_dim": 256}
    response = client.post(
        url := reverse("api-experiment-list"), {**body, "hparams": hparams}, content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json() == {
        "detail": 'hidden_sizes: "2048,2048" makes 5,783,553 parameters on 773 inputs; at most 5,000,000 are allowed.',
        "field": "hparams",
    }
    hparams["embedding_dim"] = 8
    assert client.post(url, {**body, "hparams": hparams}, content_type="application/json").status_code == 201


def test_too_short_an_asha_search_is_refused_on_the_batches_field(bob: User, demo_version: DatasetVersion) -> None:
    response = client_for(bob).post(
        reverse("experiments:new"),
        {"dataset_version": demo_version.pk, "template": "asha", "max_trials": 4, "batches": 8},
    )
    assert response.status_code == 400
    assert response.context["form"].errors["batches"] == [
        "An ASHA search needs at least 16 batches (three rungs, divisor 4)."
    ]
    assert not Experiment.objects.exists()


def test_the_api_names_the_field_of_a_wrong_launch_parameter(bob: User, demo_version: DatasetVersion) -> None:
    response = client_for(bob).post(
        reverse("api-experiment-list"),
        {"dataset_version": demo_version.pk, "template": "single", "max_trials": 3},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json() == {"detail": "A single-trial experiment runs exactly one trial.", "field": "max_trials"}
    assert not Experiment.objects.exists()


def test_cancelling_an_ended_experiment_says_there_is_nothing_to_cancel(bob: User, experiment: Experiment) -> None:
    Experiment.objects.filter(pk=experiment.pk).update(status="completed")
    client = client_for(bob)
    response = client.post(reverse("api-experiment-cancel", args=[experiment.pk]))
    assert response.status_code == 400
    assert response.json() == {"detail": f"Experiment {experiment.pk} is completed; nothing to cancel.", "field": None}
    page = client.post(reverse("experiments:cancel", args=[experiment.pk]), follow=True)
    assert f"Experiment {experiment.pk} is completed; nothing to cancel." in page.content.decode()


def test_every_experiment_page_says_where_experiments_train(
    bob: User, experiment: Experiment, settings: SettingsWrapper
) -> None:
    client = client_for(bob)
    settings.EXPERIMENT_BACKEND = "determined"
    settings.DET_MASTER = "http://determined-master:8080"
    for url in (reverse("experiments:index"), reverse("experiments:new")):
        page = client.get(url).content.decode()
        assert "Determined cluster at http://determined-master:8080" in page, url
    Experiment.objects.filter(pk=experiment.pk).update(backend="determined", det_experiment_id=41)
    index = client.get(reverse("experiments:index")).content.decode()
    assert '<td>Determined cluster <small class="muted">(det 41)</small></td>' in index
    detail = client.get(reverse("experiments:detail", args=[experiment.pk])).content.decode()
    assert "<dt>Backend</dt><dd>Determined cluster — Determined experiment 41</dd>" in detail
    assert escape(experiment.config_yaml) in detail

    settings.EXPERIMENT_BACKEND = "local"
    assert (
        "Trains on: <strong>Local (Determined local training mode)</strong>"
        in client.get(reverse("experiments:new")).content.decode()
    )


def test_a_failed_poll_is_shown_on_the_experiment_page(bob: User, experiment: Experiment) -> None:
    reason = (
        "last poll failed: master unreachable: HTTP 503 from http://m:8080 while trying to read the metrics of trial 7"
    )
    Experiment.objects.filter(pk=experiment.pk).update(status="running", error=reason)
    client = client_for(bob)
    page = client.get(reverse("experiments:detail", args=[experiment.pk])).content.decode()
    assert f'<div class="error" role="alert" id="experiment-error">{escape("L" + reason[1:])}</div>' in page
    data = json.loads(client.get(reverse("experiments:progress", args=[experiment.pk])).content)
    assert data["error"] == reason
