"""Launching re-checks the stored file; shard folders are reused only when they came from its bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils.html import escape

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.datasets import services as dataset_services
from auditportal.datasets.models import DatasetVersion, IntegrityCheck
from auditportal.experiments import services, tasks
from auditportal.experiments.models import Experiment, ExperimentStatus
from auditportal.fairness.errors import UserError
from auditportal.fairness.files import tabular
from tests.datasets.conftest import flip_labels
from tests.experiments.conftest import poll_until_done
from tests.factories import client_for


def _message(version: DatasetVersion) -> str:
    return (
        f"Dataset version credit-demo v1 failed its integrity check: the stored file's SHA-256 is "
        f"{tabular.file_sha256(version.path)}, registered {version.sha256}. "
        "The file changed after registration; register the correct file as a new version."
    )


def _launch_form(version: DatasetVersion) -> dict[str, object]:
    return {"dataset_version": version.pk, "template": "single", "batches": 4}


def test_creating_an_experiment_on_a_tampered_file_is_refused_on_the_dataset_field(
    bob: User, demo_version: DatasetVersion
) -> None:
    flip_labels(demo_version)
    with pytest.raises(dataset_services.DatasetIntegrityError) as caught:
        services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=4)
    assert (str(caught.value), caught.value.field) == (_message(demo_version), "dataset_version")
    assert not Experiment.objects.exists()
    check = IntegrityCheck.objects.get()
    assert (check.ok, check.purpose, check.actor) == (False, "launch", bob)
    [event] = Event.objects.filter(verb=Verb.DATASET_VERSION_INTEGRITY_FAILED)
    assert (event.actor, event.target_id, event.data["purpose"]) == (bob, str(demo_version.pk), "launch")


def test_the_launch_form_shows_the_integrity_failure_on_the_dataset_field(
    bob: User, demo_version: DatasetVersion
) -> None:
    flip_labels(demo_version)
    response = client_for(bob).post(reverse("experiments:new"), _launch_form(demo_version))
    assert response.status_code == 400
    field = response.context["form"]["dataset_version"]
    assert field.errors == [_message(demo_version)]
    assert escape(_message(demo_version)) in response.content.decode()
    assert not Experiment.objects.exists()


def test_the_api_refuses_a_tampered_file_with_the_field(bob: User, demo_version: DatasetVersion) -> None:
    flip_labels(demo_version)
    response = client_for(bob).post(
        reverse("api-experiment-list"), _launch_form(demo_version), content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json() == {"detail": _message(demo_version), "field": "dataset_version"}


def test_a_file_tampered_with_after_queueing_fails_the_launch_with_the_message(
    bob: User, demo_version: DatasetVersion, fake_trainer: Path
) -> None:
    experiment = services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=4)
    flip_labels(demo_version)
    tasks.experiment_launch_task(experiment.pk)
    experiment.refresh_from_db()
    assert experiment.status == ExperimentStatus.LAUNCH_FAILED
    assert experiment.error == f"launch failed: {_message(demo_version)}"
    assert experiment.trials.count() == 0
    assert not Path(experiment.shard_dir).exists()  # nothing was sharded from the tampered bytes
    assert not fake_trainer.exists()  # nor submitted
    [failed] = Event.objects.filter(verb=Verb.EXPERIMENT_LAUNCH_FAILED, target_id=str(experiment.pk))
    assert failed.data == {"reason": _message(demo_version)}
    [integrity] = Event.objects.filter(verb=Verb.DATASET_VERSION_INTEGRITY_FAILED)
    assert (integrity.actor, integrity.data["purpose"]) == (None, "launch")
    assert list(IntegrityCheck.objects.order_by("pk").values_list("ok", "purpose")) == [
        (True, "launch"),  # experiment_create
        (False, "launch"),  # the launch itself
    ]


def _launch_and_finish(bob: User, version: DatasetVersion) -> Experiment:
    experiment = services.experiment_create(user=bob, dataset_version=version, template="single", batches=4)
    assert services.experiment_launch(experiment=experiment)
    experiment = poll_until_done(experiment)
    assert experiment.status == ExperimentStatus.COMPLETED, experiment.error
    return experiment


def _manifest(shard_dir: Path) -> dict[str, object]:
    manifest: dict[str, object] = json.loads((shard_dir / "manifest.json").read_text())
    return manifest


def test_shards_from_the_registered_bytes_are_reused(
    bob: User, demo_version: DatasetVersion, fake_trainer: Path
) -> None:
    shard_dir = Path(_launch_and_finish(bob, demo_version).shard_dir)
    assert _manifest(shard_dir)["dataset"] == {
        "version_id": demo_version.pk,
        "name": "credit-demo",
        "sha256": demo_version.sha256,
    }
    marker = shard_dir / "reused"
    marker.touch()
    _launch_and_finish(bob, demo_version)
    assert marker.exists()
    assert IntegrityCheck.objects.filter(purpose="shard").count() == 1  # sharded once


def test_a_shard_folder_whose_manifest_names_another_hash_is_written_again(
    bob: User, demo_version: DatasetVersion, fake_trainer: Path
) -> None:
    shard_dir = Path(_launch_and_finish(bob, demo_version).shard_dir)
    manifest = _manifest(shard_dir)
    manifest["dataset"] = {**manifest["dataset"], "sha256": "0" * 64}  # type: ignore[dict-item]
    (shard_dir / "manifest.json").write_text(json.dumps(manifest))
    (shard_dir / "planted").touch()
    _launch_and_finish(bob, demo_version)
    assert not (shard_dir / "planted").exists()
    assert _manifest(shard_dir)["dataset"]["sha256"] == demo_version.sha256  # type: ignore[index]
    assert IntegrityCheck.objects.filter(purpose="shard").count() == 2


def test_an_incomplete_shard_folder_is_written_again(
    bob: User, demo_version: DatasetVersion, fake_trainer: Path
) -> None:
    shard_dir = Path(_launch_and_finish(bob, demo_version).shard_dir)
    (shard_dir / "part-00000" / "data.parquet").unlink()
    _launch_and_finish(bob, demo_version)
    assert (shard_dir / "part-00000" / "data.parquet").is_file()
    assert dataset_services.shards_match_version(out_dir=shard_dir, version=demo_version)


def test_a_retired_version_is_refused_and_not_offered(bob: User, demo_version: DatasetVersion) -> None:
    # Retired by the steward who registered it (its owner).
    owner = demo_version.created_by
    dataset_services.dataset_version_retire(user=owner, version=demo_version, reason="labels were mis-coded")
    demo_version.refresh_from_db()
    assert demo_version.retired_at is not None
    with pytest.raises(UserError) as caught:
        services.experiment_create(user=bob, dataset_version=demo_version, template="single", batches=4)
    assert (str(caught.value), caught.value.field) == (
        f"Dataset version credit-demo v1 was retired on {demo_version.retired_at:%Y-%m-%d} "
        "(labels were mis-coded); choose another version.",
        "dataset_version",
    )
    client = client_for(bob)
    form = client.get(reverse("experiments:new")).context["form"]
    assert list(form.fields["dataset_version"].queryset) == []
    response = client.post(reverse("experiments:new"), _launch_form(demo_version))
    assert response.status_code == 400
    assert not Experiment.objects.exists()
