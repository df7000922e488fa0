"""Owners and least privilege (issue 18): a dataset's stewards own it, an experiment's launcher owns
it; only they or an administrator change them. Run internals (log tails, checkpoint paths, the full
config) are shown to ML engineers and administrators only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils.html import escape

from auditportal.accounts.models import Role, User
from auditportal.activity.models import Event, Verb
from auditportal.datasets import services as dataset_services
from auditportal.datasets.models import Dataset, DatasetSteward, DatasetVersion, StagedUpload
from auditportal.experiments.models import Experiment, ExperimentStatus, TrialState
from auditportal.fairness.files.tabular import DatasetSpec
from tests.datasets.conftest import SMALL_CSV
from tests.factories import DatasetVersionFactory, ExperimentFactory, TrialFactory, client_for, make_user

SPEC = DatasetSpec(label="approved", positive="1", attributes=("gender", "age_group"))
NOT_YOURS = "Only the stewards of dataset 'loans' (alice) or an administrator can add a version to it."


@pytest.fixture
def sam(db: None) -> User:
    """A second data steward, who does not own alice's datasets."""
    return make_user("sam", [Role.DATA_STEWARD])


@pytest.fixture
def ben(db: None) -> User:
    """A second ML engineer, who did not launch bob's experiments."""
    return make_user("ben", [Role.ML_ENGINEER])


@pytest.fixture
def version(alice: User, dataset_storage: Path) -> DatasetVersion:
    return DatasetVersionFactory.create(created_by=alice, name="loans")


def _source(tmp_path: Path) -> Path:
    path = tmp_path / "incoming.csv"
    path.write_text(SMALL_CSV, encoding="utf-8")
    return path


def _stored_files(store: Path) -> list[Path]:
    return sorted(path for path in store.rglob("*") if path.is_file())


# -- Dataset stewards -------------------------------------------------------------------------------


def test_the_steward_who_creates_a_dataset_is_its_first_steward(alice: User, version: DatasetVersion) -> None:
    [steward] = DatasetSteward.objects.filter(dataset=version.dataset)
    assert (steward.user, steward.added_by) == (alice, alice)
    [created] = Event.objects.filter(verb=Verb.DATASET_CREATED)
    assert created.data == {"name": "loans", "stewards": ["alice"]}


def test_another_steward_cannot_add_a_version_and_nothing_is_written(
    sam: User, version: DatasetVersion, dataset_storage: Path, tmp_path: Path
) -> None:
    before = _stored_files(dataset_storage)
    events = Event.objects.count()
    with pytest.raises(PermissionDenied) as caught:
        dataset_services.dataset_version_register(
            user=sam, source=_source(tmp_path), original_name="loans.csv", name="loans", spec=SPEC
        )
    assert str(caught.value) == NOT_YOURS
    assert list(DatasetVersion.objects.values_list("number", flat=True)) == [1]
    assert _stored_files(dataset_storage) == before
    assert Event.objects.count() == events


def test_the_owner_and_an_administrator_add_versions_and_the_latest_is_theirs(
    alice: User, erin: User, version: DatasetVersion, tmp_path: Path
) -> None:
    dataset_services.dataset_version_register(
        user=alice, source=_source(tmp_path), original_name="loans.csv", name="loans", spec=SPEC
    )
    erin.role_grants.create(role=Role.DATA_STEWARD)  # registering needs the steward role
    erin.forget_roles()
    third = dataset_services.dataset_version_register(
        user=erin, source=_source(tmp_path), original_name="loans.csv", name="loans", spec=SPEC
    )
    assert (third.number, third.created_by) == (3, erin)


def test_an_upload_under_a_dataset_name_someone_else_owns_is_refused_before_it_is_kept(
    sam: User, version: DatasetVersion, dataset_storage: Path
) -> None:
    before = _stored_files(dataset_storage)
    upload = SimpleUploadedFile("loans.csv", SMALL_CSV.encode(), content_type="text/csv")
    response = client_for(sam).post(reverse("datasets:upload"), {"name": "loans", "file": upload})
    assert response.status_code == 403
    assert escape(NOT_YOURS) in response.content.decode()
    assert not StagedUpload.objects.exists()
    assert _stored_files(dataset_storage) == before


def test_a_declaration_for_a_name_taken_meanwhile_by_another_steward_is_refused(
    alice: User, sam: User, dataset_storage: Path, tmp_path: Path
) -> None:
    staged = dataset_services.staged_upload_create(
        user=alice, source=_source(tmp_path), original_name="loans.csv", dataset_name="credit"
    )
    assert dataset_services.staged_upload_profile(staged_id=staged.pk) is not None
    DatasetVersionFactory.create(created_by=sam, name="credit")  # sam registered "credit" first
    response = client_for(alice).post(
        reverse("datasets:declare", args=[staged.pk]),
        {"label": "approved", "positive": "1", "attributes": ["gender"], "confirm_groups": "on"},
    )
    assert response.status_code == 403
    assert (
        escape("Only the stewards of dataset 'credit' (sam) or an administrator can add a version to it.")
        in response.content.decode()
    )
    staged.refresh_from_db()
    assert staged.status == "ready"
    assert Dataset.objects.get(name="credit").versions.count() == 1


def test_the_worker_refuses_a_queued_declaration_when_the_name_was_taken_meanwhile(
    alice: User, sam: User, dataset_storage: Path, tmp_path: Path
) -> None:
    staged = dataset_services.staged_upload_create(
        user=alice, source=_source(tmp_path), original_name="loans.csv", dataset_name="credit"
    )
    dataset_services.staged_upload_profile(staged_id=staged.pk)
    dataset_services.staged_upload_declare(user=alice, staged=staged, spec=SPEC)
    DatasetVersionFactory.create(created_by=sam, name="credit")
    assert dataset_services.staged_upload_register_queued(staged_id=staged.pk) is None
    staged.refresh_from_db()
    assert staged.status == "ready"
    assert staged.error == "Only the stewards of dataset 'credit' (sam) or an administrator can add a version to it."
    assert staged.path.is_file()  # kept for another try under another name
    assert Dataset.objects.get(name="credit").versions.count() == 1


def test_another_steward_cannot_retire_a_version_and_sees_no_retire_form(
    alice: User, sam: User, version: DatasetVersion
) -> None:
    client = client_for(sam)
    page = client.get(reverse("datasets:version", args=[version.pk])).content.decode()
    assert 'action="{}"'.format(reverse("datasets:retire", args=[version.pk])) not in page
    assert '<dd id="stewards">alice ' in page
    response = client.post(reverse("datasets:retire", args=[version.pk]), {"reason": "mine now"})
    assert response.status_code == 403
    assert (
        escape("Only the stewards of dataset 'loans' (alice) or an administrator can retire its versions.")
        in response.content.decode()
    )
    version.refresh_from_db()
    assert not version.is_retired
    owner_page = client_for(alice).get(reverse("datasets:version", args=[version.pk])).content.decode()
    assert 'action="{}"'.format(reverse("datasets:retire", args=[version.pk])) in owner_page


def test_an_added_steward_may_add_versions_and_a_removed_one_no_longer_may(
    alice: User, sam: User, erin: User, version: DatasetVersion, tmp_path: Path
) -> None:
    dataset_services.dataset_steward_add(dataset=version.dataset, user=sam, actor=erin)
    second = dataset_services.dataset_version_register(
        user=sam, source=_source(tmp_path), original_name="loans.csv", name="loans", spec=SPEC
    )
    assert second.number == 2
    dataset_services.dataset_version_retire(user=sam, version=version, reason="superseded by v2")
    dataset_services.dataset_steward_remove(dataset=version.dataset, user=sam, actor=erin)
    with pytest.raises(PermissionDenied, match="can add a version to it"):
        dataset_services.dataset_version_register(
            user=sam, source=_source(tmp_path), original_name="loans.csv", name="loans", spec=SPEC
        )
    added, removed = (
        Event.objects.get(verb=Verb.DATASET_STEWARD_ADDED),
        Event.objects.get(verb=Verb.DATASET_STEWARD_REMOVED),
    )
    for event in (added, removed):
        assert (event.actor, event.target_type, event.target_id) == (erin, "datasets.dataset", str(version.dataset_id))
        assert event.data == {"dataset": "loans", "steward": "sam"}


# -- Experiments: the launcher cancels ---------------------------------------------------------------


@pytest.fixture
def experiment(bob: User, version: DatasetVersion) -> Experiment:
    """Queued (nothing runs: the factory queues no launch)."""
    return ExperimentFactory.create(launched_by=bob, dataset_version=version)


def test_another_engineer_cannot_cancel_and_sees_no_cancel_button(ben: User, experiment: Experiment) -> None:
    client = client_for(ben)
    page = client.get(reverse("experiments:detail", args=[experiment.pk])).content.decode()
    assert 'id="cancel-form"' not in page
    message = f"Only the engineer who launched experiment {experiment.pk} (bob) or an administrator can cancel it."
    response = client.post(reverse("experiments:cancel", args=[experiment.pk]))
    assert response.status_code == 403
    assert escape(message) in response.content.decode()
    api = client.post(reverse("api-experiment-cancel", args=[experiment.pk]))
    assert api.status_code == 403
    assert api.json() == {"detail": message}
    experiment.refresh_from_db()
    assert experiment.status == ExperimentStatus.QUEUED
    assert not Event.objects.filter(verb=Verb.EXPERIMENT_CANCELLED).exists()


@pytest.mark.parametrize("who", ["bob", "erin"])
def test_the_launcher_and_an_administrator_see_the_button_and_cancel(
    request: pytest.FixtureRequest, who: str, experiment: Experiment
) -> None:
    user: User = request.getfixturevalue(who)
    client = client_for(user)
    page = client.get(reverse("experiments:detail", args=[experiment.pk])).content.decode()
    assert 'id="cancel-form"' in page
    response = client.post(reverse("api-experiment-cancel", args=[experiment.pk]))
    assert response.status_code == 200, response.content
    experiment.refresh_from_db()
    assert experiment.status == ExperimentStatus.CANCELLED
    assert Event.objects.get(verb=Verb.EXPERIMENT_CANCELLED).actor == user


# -- Least privilege: run internals -------------------------------------------------------------------

LOG_TAIL = 'Traceback (most recent call last):\n  File "/srv/portal/var/runs/7/trainer/train.py", line 12\nBoom'
CHECKPOINT = "/srv/portal/var/runs/7/xdg/determined/checkpoints/4f1c2b9e-0000-4000-8000-000000000001"


@pytest.fixture
def errored(experiment: Experiment) -> Experiment:
    TrialFactory.create(
        experiment=experiment, state=TrialState.ERRORED, error="trainer crashed (exit status 1)", log_tail=LOG_TAIL
    )
    experiment.trials.update(checkpoint=CHECKPOINT)
    return experiment


def _seen(user: User, experiment: Experiment) -> tuple[str, dict[str, Any], dict[str, Any]]:
    client = client_for(user)
    page = client.get(reverse("experiments:detail", args=[experiment.pk]))
    progress = client.get(reverse("experiments:progress", args=[experiment.pk]))
    api = client.get(reverse("api-experiment", args=[experiment.pk]))
    assert (page.status_code, progress.status_code, api.status_code) == (200, 200, 200)
    return page.content.decode(), json.loads(progress.content), api.json()


@pytest.mark.parametrize("who", ["alice", "carol", "dave"])
def test_stewards_reviewers_and_committee_members_see_metrics_but_no_run_internals(
    request: pytest.FixtureRequest, who: str, errored: Experiment
) -> None:
    page, progress, api = _seen(request.getfixturevalue(who), errored)
    for secret in ("/srv/portal/var/runs", "Traceback", "4f1c2b9e", escape(errored.config_yaml)):
        assert secret not in page
        assert secret not in json.dumps(progress)
        assert secret not in json.dumps(api)
    assert 'id="experiment-config"' not in page
    assert "Trainer crashed (exit status 1)" in page  # the error itself (no path) is for everyone
    for data in (progress, api):
        trials: list[dict[str, Any]] = data["trials"]
        [trial] = trials
        assert (trial["checkpoint"], trial["log_tail"], trial["error"]) == (
            None,
            None,
            "trainer crashed (exit status 1)",
        )
        assert set(trial) >= {"verdicts", "metrics"}
    assert api["config_yaml"] is None


@pytest.mark.parametrize("who", ["bob", "erin"])
def test_engineers_and_administrators_see_log_tails_checkpoints_and_the_config(
    request: pytest.FixtureRequest, who: str, errored: Experiment
) -> None:
    page, progress, api = _seen(request.getfixturevalue(who), errored)
    assert escape(LOG_TAIL) in page
    assert escape(errored.config_yaml) in page
    for data in (progress, api):
        trials: list[dict[str, Any]] = data["trials"]
        [trial] = trials
        assert (trial["checkpoint"], trial["log_tail"]) == (CHECKPOINT, LOG_TAIL)
    assert api["config_yaml"] == errored.config_yaml


# -- Stewards from the dataset page (administrators) ---------------------------------------------------


def test_an_administrator_adds_and_removes_stewards_on_the_dataset_page(
    erin: User, sam: User, version: DatasetVersion
) -> None:
    client = client_for(erin)
    page = client.get(reverse("datasets:version", args=[version.pk])).content.decode()
    assert 'id="steward-add"' in page
    url = reverse("datasets:stewards", args=[version.dataset_id])
    response = client.post(url, {"action": "add", "username": "sam"})
    assert response.status_code == 302
    assert list(DatasetSteward.objects.filter(dataset=version.dataset).values_list("user__username", flat=True)) == [
        "alice",
        "sam",
    ]
    assert client.post(url, {"action": "remove", "username": "alice"}).status_code == 302
    assert [event.actor for event in Event.objects.filter(verb__startswith="dataset.steward_")] == [erin, erin]
    # A refusal goes back to the dataset's page (303, then 200), not the POST-only stewards URL.
    page = reverse("datasets:version", args=[version.pk]) + "#steward-add"
    refused = client.post(url, {"action": "remove", "username": "sam"}, follow=True)
    assert (refused.redirect_chain, refused.status_code) == ([(page, 303)], 200)
    assert escape("sam is the last steward of 'loans': add another steward first.") in refused.content.decode()
    unknown = client.post(url, {"action": "add", "username": "ghost"}, follow=True)
    assert (unknown.redirect_chain, unknown.status_code) == ([(page, 303)], 200)
    assert escape("No user named 'ghost'.") in unknown.content.decode()


@pytest.mark.parametrize("who", ["alice", "sam", "bob"])
def test_only_an_administrator_changes_stewards(
    request: pytest.FixtureRequest, who: str, sam: User, version: DatasetVersion
) -> None:
    client = client_for(request.getfixturevalue(who))
    page = client.get(reverse("datasets:version", args=[version.pk])).content.decode()
    assert 'id="steward-add"' not in page
    response = client.post(reverse("datasets:stewards", args=[version.dataset_id]), {"action": "add", "username": who})
    assert response.status_code == 403
    assert "Only an administrator can change a dataset&#x27;s stewards." in response.content.decode()
    assert not Event.objects.filter(verb=Verb.DATASET_STEWARD_ADDED).exists()
    with pytest.raises(PermissionDenied, match=r"Only an administrator can change a dataset's stewards\."):
        dataset_services.dataset_steward_add(dataset=version.dataset, user=sam, actor=request.getfixturevalue(who))
