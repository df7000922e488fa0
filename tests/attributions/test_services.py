"""Asking why a trial's model has its gaps: the checks before anything is stored, the pending row with its
event and its task in one transaction, the same inputs answered by the stored one, and the worker's
completion (here with the trainer's file and its summary stood in for; test_real.py runs both)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, connection, transaction
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.attributions import services
from auditportal.attributions.models import AttributionState, TrialAttribution
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments import checkpoints
from auditportal.experiments.models import Backend, Experiment, Trial, TrialState
from auditportal.fairness.documents.canonical import canonical_sha256
from auditportal.fairness.errors import UserError
from auditportal.fairness.statistics import attributions as attribution_statistics
from auditportal.outbox.models import OutboxMessage
from tests.attributions.conftest import done_attribution, local_trial
from tests.attributions.documents import summary_document
from tests.factories import DatasetVersionFactory


def _events(verb: Verb) -> list[Event]:
    return list(Event.objects.filter(verb=verb).order_by("seq"))


def test_a_request_stores_a_pending_attribution_its_event_and_the_workers_task(trial: Trial, bob: User) -> None:
    attribution, created = services.attribution_request(user=bob, trial=trial, sample_size=500, seed=7)
    assert created
    attribution.refresh_from_db()
    version = trial.experiment.dataset_version
    assert (attribution.state, attribution.sample_size, attribution.seed) == ("pending", 500, 7)
    assert attribution.checkpoint == trial.checkpoint
    assert attribution.checkpoint_name == f"ckpt-{trial.pk}"
    import hashlib

    assert attribution.checkpoint_sha256 == hashlib.sha256(b"weights").hexdigest()
    assert (attribution.dataset_version_id, attribution.dataset_sha256) == (version.pk, version.sha256)
    assert attribution.canonical == attribution.sha256 == ""
    [event] = _events(Verb.TRIAL_ATTRIBUTION_QUEUED)
    assert event.target_id == str(attribution.pk)
    assert event.data == {
        "trial": trial.pk,
        "checkpoint_name": attribution.checkpoint_name,
        "checkpoint_sha256": attribution.checkpoint_sha256,
        "dataset_version": version.pk,
        "dataset_sha256": version.sha256,
        "sample_size": 500,
        "seed": 7,
    }
    [message] = OutboxMessage.objects.filter(name=services.ATTRIBUTE_TASK)
    assert message.args == [attribution.pk]


def test_the_same_inputs_asked_again_answer_the_stored_one(trial: Trial, bob: User, carol: User) -> None:
    first, _ = services.attribution_request(user=bob, trial=trial, sample_size=500, seed=7)
    again, created = services.attribution_request(user=carol, trial=trial, sample_size=500, seed=7)
    assert (again.pk, created) == (first.pk, False)
    other_seed, created = services.attribution_request(user=carol, trial=trial, sample_size=500, seed=8)
    assert created
    assert other_seed.pk != first.pk
    assert TrialAttribution.objects.count() == 2
    assert len(_events(Verb.TRIAL_ATTRIBUTION_QUEUED)) == 2
    assert OutboxMessage.objects.filter(name=services.ATTRIBUTE_TASK).count() == 2


def _refused(user: User, trial: Trial, field: str, message: str, **kwargs: Any) -> None:
    with pytest.raises(UserError) as refused:
        services.attribution_request(user=user, trial=trial, **kwargs)
    assert refused.value.field == field
    assert message in refused.value.message, refused.value.message
    assert not TrialAttribution.objects.exists()
    assert not _events(Verb.TRIAL_ATTRIBUTION_QUEUED)
    assert not OutboxMessage.objects.filter(name=services.ATTRIBUTE_TASK).exists()


@pytest.mark.parametrize("state", [TrialState.RUNNING, TrialState.QUEUED, TrialState.ERRORED, TrialState.CANCELED])
def test_a_trial_not_completed_is_refused(version: DatasetVersion, runs: Path, bob: User, state: str) -> None:
    trial = local_trial(version, runs, state=state)
    _refused(
        bob, trial, "trial", f"trial {trial.pk} is {state.lower()}: only a completed trial's checkpoint is explained"
    )


def test_a_trial_without_a_checkpoint_or_whose_checkpoint_is_gone_is_refused(trial: Trial, bob: User) -> None:
    folder = Path(trial.checkpoint)
    (folder / "state_dict.pth").unlink()
    _refused(bob, trial, "trial", f"trial {trial.pk}'s checkpoint {folder.name} is no longer on disk")
    Trial.objects.filter(pk=trial.pk).update(checkpoint="")
    trial.refresh_from_db()
    _refused(bob, trial, "trial", f"trial {trial.pk} has no checkpoint to explain")


def test_a_checkpoint_outside_the_run_folder_is_refused(trial: Trial, bob: User, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "state_dict.pth").write_bytes(b"weights")
    Trial.objects.filter(pk=trial.pk).update(checkpoint=str(elsewhere))
    trial.refresh_from_db()
    _refused(bob, trial, "trial", "checkpoint elsewhere is no longer on disk")


def test_a_trial_on_a_determined_cluster_is_refused_saying_so_without_its_storage(
    trial: Trial, bob: User, settings: SettingsWrapper
) -> None:
    settings.DET_CHECKPOINT_DIR = None
    trial.experiment.backend = Backend.DETERMINED
    trial.experiment.save(update_fields=["backend"])
    _refused(bob, trial, "trial", "ran on a Determined cluster: its checkpoint is in the cluster's storage")
    _refused(bob, trial, "trial", "DET_CHECKPOINT_DIR is not set")


def test_a_cluster_trials_checkpoint_is_read_from_the_mounted_storage_by_its_uuid(
    trial: Trial, bob: User, settings: SettingsWrapper, tmp_path: Path
) -> None:
    """The cluster's shared_fs storage mounted at DET_CHECKPOINT_DIR: the checkpoint is <dir>/<uuid>/;
    a UUID that is not there, or that names a folder outside it, is refused naming the trial."""
    storage = tmp_path / "checkpoints"
    uuid = "0b7e2f4c-3f7a-4c1e-9a51-6c1d2e3f4a5b"
    shutil.copytree(Path(trial.checkpoint), storage / uuid)
    settings.DET_CHECKPOINT_DIR = str(storage)
    Experiment.objects.filter(pk=trial.experiment_id).update(backend=Backend.DETERMINED)
    for recorded, message in (
        ("1d7e2f4c-0000-4c1e-9a51-6c1d2e3f4a5b", "is not in the cluster's checkpoint storage at"),
        ("../elsewhere", "is not a checkpoint UUID"),
    ):
        Trial.objects.filter(pk=trial.pk).update(checkpoint=recorded)
        trial.refresh_from_db()
        _refused(bob, trial, "trial", message)

    Trial.objects.filter(pk=trial.pk).update(checkpoint=uuid)
    trial.refresh_from_db()
    folder = checkpoints.trial_checkpoint(trial, field="trial", purpose="explained", instead="-")
    assert folder == (storage / uuid).resolve()
    attribution, created = services.attribution_request(user=bob, trial=trial, sample_size=500, seed=1)
    assert created
    assert attribution.checkpoint == uuid


def test_a_checkpoint_whose_run_folder_records_another_dataset_version_is_refused(trial: Trial, bob: User) -> None:
    other = DatasetVersionFactory.create()
    DatasetVersion.objects.filter(pk=other.pk).update(sha256="e" * 64)
    other.refresh_from_db()
    run = Path(trial.checkpoint).parents[2]
    (run / "run.json").write_text(json.dumps({"dataset_version": {"id": other.pk, "sha256": other.sha256}}))
    _refused(
        bob,
        trial,
        "trial",
        f"was trained on dataset version {other.pk} ({other.sha256[:12]}…), but the trial's experiment is on "
        f"dataset version {trial.experiment.dataset_version_id}",
    )


def test_a_checkpoint_that_counted_other_groups_is_refused(version: DatasetVersion, runs: Path, bob: User) -> None:
    trial = local_trial(version, runs, counted={"gender": ["female", "male", "nonbinary"]})
    _refused(bob, trial, "trial", "counted attribute 'gender' with groups female, male, nonbinary")


def test_shards_gone_or_rewritten_from_other_data_are_refused(trial: Trial, bob: User) -> None:
    manifest = Path(trial.experiment.shard_dir) / "manifest.json"
    manifest.write_text(json.dumps({"dataset": {"sha256": "f" * 64}}))
    _refused(bob, trial, "trial", "shards were rewritten from other data than its dataset version")
    manifest.unlink()
    _refused(bob, trial, "trial", "shards are no longer on disk")


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({"sample_size": 10}, "sample_size", "sample_size 10 is not between 100 and 20,000 validation rows"),
        ({"sample_size": 10**6}, "sample_size", "is not between 100 and 20,000"),
        ({"seed": -1}, "seed", "seed -1 is not between 0 and 2,147,483,647"),
    ],
)
def test_a_sample_out_of_range_is_refused_naming_its_field(
    trial: Trial, bob: User, kwargs: dict[str, int], field: str, message: str
) -> None:
    _refused(bob, trial, field, message, **kwargs)


def test_a_data_steward_may_not_ask(trial: Trial, alice: User) -> None:
    with pytest.raises(PermissionDenied, match="Only an ML engineer or a reviewer"):
        services.attribution_request(user=alice, trial=trial)
    assert not TrialAttribution.objects.exists()


# ---------------------------------------------------------------------------------------- the worker's part


@pytest.fixture
def stood_in(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The trainer's file and its summary stood in for: what the worker's code does around them."""
    seen: dict[str, Any] = {}

    def attributions_file(attribution: TrialAttribution, folder: Path, out: Path) -> dict[str, Any]:
        seen["folder"] = folder
        return {"schema": np.array(1)}

    def summarise(arrays: Any, *, seed: int, **kwargs: Any) -> dict[str, Any]:
        seen["seed"] = seed
        return summary_document(seed=seed)

    monkeypatch.setattr(services, "_attributions_file", attributions_file)
    monkeypatch.setattr(attribution_statistics, "summarise", summarise)
    return seen


def test_the_worker_stores_the_summary_once_with_its_inputs_and_event(
    trial: Trial, bob: User, stood_in: dict[str, Any]
) -> None:
    pending, _ = services.attribution_request(user=bob, trial=trial, seed=3)
    done = services.attribution_compute(attribution_id=pending.pk)
    assert done is not None
    done.refresh_from_db()
    assert done.state == AttributionState.DONE
    document = done.document
    assert document is not None
    assert document["inputs"] == {
        "schema": 1,
        "trial": trial.pk,
        "experiment": trial.experiment_id,
        "number": trial.number,
        "checkpoint": done.checkpoint_name,
        "checkpoint_sha256": done.checkpoint_sha256,
        "dataset_version": done.dataset_version_id,
        "dataset_sha256": done.dataset_sha256,
        "sample_size": services.DEFAULT_SAMPLE_SIZE,
        "seed": 3,
    }
    assert done.sha256 == canonical_sha256(document)
    assert done.method == document["method"]
    assert done.completed_at is not None
    assert stood_in == {"folder": Path(trial.checkpoint).resolve(), "seed": 3}
    [event] = _events(Verb.TRIAL_ATTRIBUTION_COMPUTED)
    assert event.actor_id == bob.pk
    assert event.data["sha256"] == done.sha256
    # Run again (a redelivered task): nothing changes.
    assert services.attribution_compute(attribution_id=pending.pk) is None
    assert len(_events(Verb.TRIAL_ATTRIBUTION_COMPUTED)) == 1
    # Asked again for the same inputs: the stored one, done.
    again, created = services.attribution_request(user=bob, trial=trial, seed=3)
    assert (again.pk, again.state, created) == (done.pk, "done", False)


def test_a_failure_is_stored_with_its_reason_and_asking_again_computes_anew(
    trial: Trial, bob: User, stood_in: dict[str, Any]
) -> None:
    pending, _ = services.attribution_request(user=bob, trial=trial)
    (Path(trial.checkpoint) / "state_dict.pth").unlink()
    failed = services.attribution_compute(attribution_id=pending.pk)
    assert failed is not None
    assert failed.state == AttributionState.FAILED
    assert failed.error == f"trial {trial.pk}'s checkpoint ckpt-{trial.pk} is no longer on disk"
    [event] = _events(Verb.TRIAL_ATTRIBUTION_FAILED)
    assert event.data == {"reason": failed.error}
    (Path(trial.checkpoint) / "state_dict.pth").write_bytes(b"weights")
    again, created = services.attribution_request(user=bob, trial=trial)
    assert created
    assert again.pk != failed.pk
    failed.refresh_from_db()
    assert failed.state == AttributionState.FAILED  # kept, with its reason


def test_weights_changed_since_the_request_fail_it(trial: Trial, bob: User, stood_in: dict[str, Any]) -> None:
    pending, _ = services.attribution_request(user=bob, trial=trial)
    (Path(trial.checkpoint) / "state_dict.pth").write_bytes(b"retrained")
    failed = services.attribution_compute(attribution_id=pending.pk)
    assert failed is not None
    assert failed.state == AttributionState.FAILED
    assert "changed since it was asked for" in failed.error
    assert "folder" not in stood_in  # nothing was run


def test_the_trainers_refusal_is_stored_as_the_reason(trial: Trial, bob: User, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(module: str, arguments: list[str], **kwargs: Any) -> None:
        assert module == "trainer.attribute"
        assert arguments[arguments.index("--seed") + 1] == "0"
        raise UserError(f"{kwargs['failure']}: shards: part-00000 cannot be read", field=kwargs["field"])

    monkeypatch.setattr(checkpoints, "trainer_run", refuse)
    pending, _ = services.attribution_request(user=bob, trial=trial)
    failed = services.attribution_compute(attribution_id=pending.pk)
    assert failed is not None
    assert (
        failed.error
        == f"trial {trial.pk}'s checkpoint ckpt-{trial.pk} could not be explained: shards: part-00000 cannot be read"
    )


# ---------------------------------------------------------------------------------------- evidence


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the trigger exists on PostgreSQL only")
def test_postgresql_refuses_to_change_or_delete_a_completed_attribution(trial: Trial, bob: User) -> None:
    done = done_attribution(trial, bob)
    for change in (
        lambda: TrialAttribution.objects.filter(pk=done.pk).update(canonical="{}"),
        lambda: TrialAttribution.objects.filter(pk=done.pk).update(state="pending"),
        lambda: TrialAttribution.objects.filter(pk=done.pk).delete(),
    ):
        with pytest.raises(IntegrityError, match="attributions_trialattribution is append-only"), transaction.atomic():
            change()
    pending, _ = services.attribution_request(user=bob, trial=trial, seed=9)
    with pytest.raises(IntegrityError, match="append-only: UPDATE refused"), transaction.atomic():
        TrialAttribution.objects.filter(pk=pending.pk).update(seed=10)  # what identifies it, while pending
    done.refresh_from_db()
    assert done.state == "done"
    assert done.document is not None


def test_a_done_attribution_needs_its_document_and_a_failed_one_its_reason(trial: Trial, bob: User) -> None:
    pending, _ = services.attribution_request(user=bob, trial=trial)
    with pytest.raises(IntegrityError), transaction.atomic():
        TrialAttribution.objects.filter(pk=pending.pk).update(state="done")
    with pytest.raises(IntegrityError), transaction.atomic():
        TrialAttribution.objects.filter(pk=pending.pk).update(state="failed")
