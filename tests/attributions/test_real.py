"""The whole of it on a real checkpoint: a small local training on rows where one feature (zip_density) is
gender's proxy and carries the score gap; asked through the API, queued through the outbox, computed by
the worker's task with ``python -m trainer.attribute`` in a subprocess and summarised; then shown."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.attributions import services
from auditportal.attributions import tasks as attribution_tasks
from auditportal.attributions.models import AttributionState, TrialAttribution
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments.models import Trial, TrialState
from auditportal.fairness.documents.canonical import canonical_json
from auditportal.fairness.statistics import attributions as attribution_statistics
from tests.approvals.conftest import handed_over, worker_runs
from tests.factories import DatasetVersionFactory, ExperimentFactory, TrialFactory
from tests.trainer.trainer_testkit import PROXY_HP

# The checkpoint is the session's (tests/conftest.py), trained once for this module and
# tests/trainer/test_attribute.py: one xdist group, so one worker trains it.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("attribute-checkpoints")]

HP: dict[str, Any] = PROXY_HP
SHARDS_SHA256 = "0" * 64  # what trainer_testkit's manifest names


@pytest.fixture(scope="module")
def trained(proxy_checkpoint: tuple[Path, Path]) -> dict[str, Path]:
    """Shards of 4,000 rows and one small training on them (the session's), in one run folder."""
    shards, checkpoint = proxy_checkpoint
    return {"root": shards.parent, "shards": shards, "checkpoint": checkpoint}


@pytest.fixture
def trial(db: None, trained: dict[str, Path], settings: SettingsWrapper) -> Trial:
    settings.EXPERIMENT_RUN_DIR = trained["root"]
    version: DatasetVersion = DatasetVersionFactory.create()
    DatasetVersion.objects.filter(pk=version.pk).update(sha256=SHARDS_SHA256)
    experiment = ExperimentFactory.create(dataset_version=version, shard_dir=str(trained["shards"]))
    made: Trial = TrialFactory.create(
        experiment=experiment, hparams=HP, state=TrialState.COMPLETED, checkpoint=str(trained["checkpoint"])
    )
    return made


def test_a_real_checkpoint_explained_end_to_end_names_the_proxy_first(
    trial: Trial, bob: User, django_capture_on_commit_callbacks: Any
) -> None:
    client = Client()
    client.force_login(bob)
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(
            f"/api/v1/trials/{trial.pk}/attributions/", {"sample_size": 400, "seed": 5}, content_type="application/json"
        )
    assert answer.status_code == 202, answer.content
    pk = answer.json()["id"]
    assert attribution_tasks.attribution_compute_task.name == services.ATTRIBUTE_TASK
    assert handed_over(services.ATTRIBUTE_TASK) == [[pk]]
    assert worker_runs(services.ATTRIBUTE_TASK) == [pk]
    attribution = TrialAttribution.objects.get(pk=pk)
    assert attribution.state == AttributionState.DONE, attribution.error
    document = attribution.document
    assert document is not None
    assert document["completeness"]["holds"], document["completeness"]
    assert document["sample"]["seed"] == 5
    assert 0 < document["sample"]["size"] <= 400
    assert document["features"][0] == "zip_density"
    assert "Integrated Gradients" in attribution.method
    # The proxy carries the gap between the genders, and tells them apart best.
    assert attribution_statistics.top_features(document, "gender", "female")[0] == "zip_density"
    assert attribution_statistics.top_proxies(document, "gender")[0] == "zip_density"
    assert document["attributes"]["gender"]["proxies"]["zip_density"]["auc"] > 0.8
    female = document["attributes"]["gender"]["groups"]["female"]["score_gap"]
    assert sum(female["contributions"].values()) == pytest.approx(female["total"], abs=1e-3)
    assert Event.objects.filter(verb=Verb.TRIAL_ATTRIBUTION_COMPUTED, target_id=str(pk)).exists()

    # Recomputing the same inputs gives the same numbers, byte for byte.
    with tempfile.TemporaryDirectory() as scratch:
        arrays = services._attributions_file(attribution, Path(trial.checkpoint), Path(scratch) / "again.npz")
    again = services.attribution_document(attribution, attribution_statistics.summarise(arrays, seed=5))
    assert canonical_json(again).decode() == attribution.canonical
    # Asked again: the stored one.
    answer = client.post(
        f"/api/v1/trials/{trial.pk}/attributions/", {"sample_size": 400, "seed": 5}, content_type="application/json"
    )
    assert answer.status_code == 200
    assert answer.json()["sha256"] == attribution.sha256

    page = client.get(f"/attributions/trials/{trial.pk}/").content.decode()
    assert "zip_density (" in page  # the largest contribution of a group
    assert "Contributions to the gap in mean score" in page


def test_a_checkpoint_that_does_not_fit_the_shards_fails_with_the_trainers_words(trial: Trial, bob: User) -> None:
    Trial.objects.filter(pk=trial.pk).update(hparams={**HP, "hidden_sizes": [7]})
    trial.refresh_from_db()
    pending, _ = services.attribution_request(user=bob, trial=trial, sample_size=200, seed=1, queue=False)
    failed = services.attribution_compute(attribution_id=pending.pk)
    assert failed is not None
    assert failed.state == AttributionState.FAILED
    assert failed.error.startswith(
        f"trial {trial.pk}'s checkpoint {Path(trial.checkpoint).name} could not be explained: "
    )
    assert "does not fit these shards' features and hyperparameters" in failed.error
