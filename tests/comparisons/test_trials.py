"""Two trials validated on the same dataset version, paired row by row on their shared validation split:
two real local trainings (trainer/ in Determined's local mode), their checkpoints run by trainer.predict."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.comparisons import tasks as comparison_tasks
from auditportal.comparisons import trial_services
from auditportal.comparisons.models import ComparisonState, PairedComparison
from auditportal.datasets.models import DatasetVersion
from auditportal.evidence.models import VerdictDocument
from auditportal.experiments.models import Trial, TrialState
from auditportal.fairness.errors import UserError
from tests.approvals.conftest import handed_over, worker_runs
from tests.factories import DatasetVersionFactory, ExperimentFactory, TrialFactory
from tests.trainer.trainer_testkit import LAMBDA_HP, TrainedRun
from trainer.predict import validation_predictions

# The session's two trainings on the demo shards (tests/conftest.py: lambda_runs, shared with the
# fairness test in tests/trainer/test_training.py, in one xdist group so one worker trains them): the
# champion without the fairness penalty, the challenger with it.
HP: dict[str, Any] = LAMBDA_HP["plain"]
CHALLENGER_HP: dict[str, Any] = LAMBDA_HP["fair"]
SHARDS_SHA256 = "0" * 64  # what trainer_testkit's manifest names


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("paired-trials")


@pytest.fixture(scope="module")
def trained(demo_shards: Path, lambda_runs: tuple[Path, dict[str, TrainedRun]]) -> dict[str, Path]:
    """The shards and the two trainings' checkpoints, and the run folder that holds them (read only)."""
    root, runs = lambda_runs
    champion, challenger = runs["plain"].checkpoint, runs["fair"].checkpoint
    return {"shards": demo_shards, "root": root, "champion": champion, "challenger": challenger}


@pytest.fixture
def version(db: None) -> DatasetVersion:
    made = DatasetVersionFactory.create()
    DatasetVersion.objects.filter(pk=made.pk).update(sha256=SHARDS_SHA256)
    made.refresh_from_db()
    return made


def _trial(version: DatasetVersion, shards: Path, checkpoint: Path | None, hp: dict[str, Any], **kwargs: Any) -> Trial:
    experiment = ExperimentFactory.create(dataset_version=version, shard_dir=str(shards))
    return TrialFactory.create(
        experiment=experiment,
        hparams=hp,
        state=kwargs.pop("state", TrialState.COMPLETED),
        checkpoint=str(checkpoint) if checkpoint else "",
        **kwargs,
    )


@pytest.fixture
def trials(version: DatasetVersion, trained: dict[str, Path], settings: SettingsWrapper) -> tuple[Trial, Trial]:
    settings.EXPERIMENT_RUN_DIR = trained["root"]
    return (
        _trial(version, trained["shards"], trained["champion"], HP),
        _trial(version, trained["shards"], trained["challenger"], CHALLENGER_HP),
    )


pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("trained-checkpoint")]


def test_two_trials_compare_on_their_shared_validation_rows_with_counts_as_computed_directly(
    trials: tuple[Trial, Trial], trained: dict[str, Path], bob: User, django_capture_on_commit_callbacks: Any
) -> None:
    champion, challenger = trials
    client = Client()
    client.force_login(bob)
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(
            "/api/v1/comparisons/trials/",
            {"champion_trial": champion.pk, "challenger_trial": challenger.pk},
            content_type="application/json",
        )
    assert answer.status_code == 202, answer.content
    assert answer.json()["state"] == "pending"
    assert comparison_tasks.comparison_compute_trials_task.name == trial_services.COMPARE_TRIALS_TASK
    # The request queued the worker's task (handed to the broker once it committed); a worker runs it.
    assert handed_over(trial_services.COMPARE_TRIALS_TASK) == [[answer.json()["id"]]]
    assert worker_runs(trial_services.COMPARE_TRIALS_TASK) == [answer.json()["id"]]
    comparison = PairedComparison.objects.get(pk=answer.json()["id"])
    assert comparison.state == ComparisonState.DONE, comparison.error
    assert comparison.champion_trial == champion
    assert comparison.challenger_trial == challenger
    assert comparison.sha256 == SHARDS_SHA256
    result = comparison.result
    assert result["champion"]["checkpoint"] == trained["champion"].name
    assert result["challenger"]["checkpoint"] == trained["challenger"].name
    assert result["dataset_version"]["sha256"] == SHARDS_SHA256

    # Directly: both checkpoints' predictions on the validation rows, counted with numpy.
    a = validation_predictions(trained["shards"], trained["champion"], HP)
    b = validation_predictions(trained["shards"], trained["challenger"], CHALLENGER_HP)
    assert comparison.num_rows == len(a["target"]) == result["rows"]
    assert 0 < comparison.num_rows < 3000
    gender = result["attributes"]["gender"]
    assert gender["groups"] == ["female", "male"]
    for index, group in enumerate(gender["groups"]):
        rows = a["codes"][:, 0] == index
        positives = rows & (a["target"] == 1)
        table = gender["metrics"]["tpr"]["groups"][group]["table"]
        pa, pb = a["predicted"][positives] == 1, b["predicted"][positives] == 1
        assert table == {
            "both": int(np.sum(pa & pb)),
            "only_champion": int(np.sum(pa & ~pb)),
            "only_challenger": int(np.sum(~pa & pb)),
            "neither": int(np.sum(~pa & ~pb)),
        }
    # And independently of trainer.predict: the champion's own confusion counts, as the trainer counted
    # them at its last validation (bias_stats.json in the checkpoint).
    stats = json.loads((trained["champion"] / "bias_stats.json").read_text())["attributes"]["gender"]["groups"]
    for group, cells in stats.items():
        tpr = gender["metrics"]["tpr"]["groups"][group]["table"]
        fpr = gender["metrics"]["fpr"]["groups"][group]["table"]
        assert tpr["both"] + tpr["only_champion"] == cells["tp"]
        assert sum(tpr.values()) == cells["tp"] + cells["fn"]
        assert fpr["both"] + fpr["only_champion"] == cells["fp"]
        assert sum(fpr.values()) == cells["fp"] + cells["tn"]
    document = VerdictDocument.objects.get(paired_comparison=comparison)
    assert json.loads(document.canonical)["parameters"]["champion_trial"]["trial"] == champion.pk
    assert Event.objects.filter(verb=Verb.PAIRED_COMPARISON_CREATED, target_id=str(comparison.pk)).exists()
    detail = client.get(f"/api/v1/comparisons/{comparison.pk}/").json()
    assert detail["state"] == "done"
    assert detail["source"] == "trials"
    assert [d["id"] for d in detail["documents"]] == [document.pk]


def test_the_command_compares_two_trials(trials: tuple[Trial, Trial], bob: User) -> None:
    champion, challenger = trials
    out = StringIO()
    call_command(
        "compare_predictions",
        "--champion-trial",
        str(champion.pk),
        "--challenger-trial",
        str(challenger.pk),
        "--user",
        "bob",
        "--format",
        "json",
        stdout=out,
    )
    printed = json.loads(out.getvalue())
    assert printed["rows"] == PairedComparison.objects.get(pk=printed["id"]).num_rows > 0
    assert printed["champion"]["trial"] == champion.pk


@pytest.fixture
def fake_checkpoints(runs_root: Path, settings: SettingsWrapper) -> Path:
    """Checkpoint folders with a state_dict.pth: enough for the checks made before anything runs."""
    settings.EXPERIMENT_RUN_DIR = runs_root
    for name in ("one", "two"):
        (runs_root / "fake" / name).mkdir(parents=True, exist_ok=True)
        (runs_root / "fake" / name / "state_dict.pth").write_bytes(b"")
    return runs_root / "fake"


def _refusal(bob: User, champion: Trial, challenger: Trial) -> tuple[int, Any]:
    client = Client()
    client.force_login(bob)
    answer = client.post(
        "/api/v1/comparisons/trials/",
        {"champion_trial": champion.pk, "challenger_trial": challenger.pk},
        content_type="application/json",
    )
    return answer.status_code, answer.json()


def test_trials_on_different_dataset_versions_are_refused(
    version: DatasetVersion, trained: dict[str, Path], fake_checkpoints: Path, bob: User
) -> None:
    other = DatasetVersionFactory.create()
    champion = _trial(version, trained["shards"], fake_checkpoints / "one", HP)
    challenger = _trial(other, trained["shards"], fake_checkpoints / "two", HP)
    status, body = _refusal(bob, champion, challenger)
    assert status == 400
    assert "paired trials must be validated on the same dataset version" in json.dumps(body)
    assert "challenger_trial" in json.dumps(body)
    assert not PairedComparison.objects.exists()


@pytest.mark.parametrize(
    ("state", "checkpoint", "message"),
    [
        (TrialState.RUNNING, True, "is running: only a completed trial's checkpoint is compared"),
        (TrialState.COMPLETED, False, "has no checkpoint to compare"),
    ],
)
def test_a_running_trial_or_one_without_checkpoint_is_refused(
    version: DatasetVersion,
    trained: dict[str, Path],
    fake_checkpoints: Path,
    bob: User,
    state: str,
    checkpoint: bool,
    message: str,
) -> None:
    champion = _trial(version, trained["shards"], fake_checkpoints / "one" if checkpoint else None, HP, state=state)
    challenger = _trial(version, trained["shards"], fake_checkpoints / "two", HP)
    status, body = _refusal(bob, champion, challenger)
    assert status == 400
    assert message in json.dumps(body)
    assert "champion_trial" in json.dumps(body)


def test_the_same_trial_twice_and_different_splits_are_refused(
    version: DatasetVersion, trained: dict[str, Path], fake_checkpoints: Path, bob: User
) -> None:
    champion = _trial(version, trained["shards"], fake_checkpoints / "one", HP)
    with pytest.raises(UserError, match="also the champion") as same:
        trial_services.check_trials(champion=champion, challenger=champion)
    assert same.value.field == "challenger_trial"
    other_split = _trial(version, trained["shards"], fake_checkpoints / "two", {**HP, "val_fraction": 0.3})
    with pytest.raises(UserError, match=r"validation splits differ: val_fraction 0\.2") as split:
        trial_services.check_trials(champion=champion, challenger=other_split)
    assert split.value.field == "challenger_trial"


def test_a_trial_the_user_cannot_see_is_404(
    version: DatasetVersion, trained: dict[str, Path], fake_checkpoints: Path, bob: User, oscar: User
) -> None:
    champion = _trial(version, trained["shards"], fake_checkpoints / "one", HP)
    hidden = _trial(version, trained["shards"], fake_checkpoints / "two", HP)
    client = Client()
    client.force_login(oscar)  # no role: sees no trial, and may not compare
    assert client.post(
        "/api/v1/comparisons/trials/",
        {"champion_trial": champion.pk, "challenger_trial": hidden.pk},
        content_type="application/json",
    ).status_code in (403, 404)
    client.force_login(bob)
    answer = client.post(
        "/api/v1/comparisons/trials/",
        {"champion_trial": champion.pk, "challenger_trial": 10**9},
        content_type="application/json",
    )
    assert answer.status_code == 404
    with pytest.raises(CommandError, match="no such trial"):
        call_command(
            "compare_predictions",
            "--champion-trial",
            str(champion.pk),
            "--challenger-trial",
            "999999999",
            "--user",
            "bob",
        )
