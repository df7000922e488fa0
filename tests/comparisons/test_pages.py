"""The comparisons' pages: the "new" page's three forms (one file, two audits of a file, two trials), the
state of a comparison a worker has in hand (list badge, detail page that polls), and the status it polls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.audits.models import PredictionAudit
from auditportal.comparisons import trial_services
from auditportal.comparisons.models import ComparisonState, PairedComparison
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments.models import Trial, TrialState
from auditportal.fairness.statistics.audit import AuditSpec
from auditportal.outbox.models import OutboxMessage
from tests.comparisons.conftest import paired_csv_text
from tests.factories import DatasetVersionFactory, ExperimentFactory, PredictionAuditFactory, TrialFactory, client_for

pytestmark = pytest.mark.django_db

TEXT = paired_csv_text(rows=600, seed=2)


def _audit(user: User, **spec: Any) -> PredictionAudit:
    return PredictionAuditFactory.create(
        created_by=user,
        original_name="paired.csv",
        content=TEXT,
        spec=AuditSpec(label="label", attributes=("gender",), **spec),
    )


@pytest.fixture
def audits(bob: User) -> tuple[PredictionAudit, PredictionAudit]:
    return _audit(bob, prediction="model_a"), _audit(bob, score="score_b", threshold=0.5)


@pytest.fixture
def trials(settings: SettingsWrapper, tmp_path: Path) -> tuple[Trial, Trial]:
    """Two completed local trials on one dataset version, with checkpoints and shards on disk (enough for
    the checks made before a worker runs them)."""
    settings.EXPERIMENT_RUN_DIR = tmp_path / "runs"
    version: DatasetVersion = DatasetVersionFactory.create()
    shards = tmp_path / "shards"
    shards.mkdir()
    manifest = {"dataset": {"sha256": version.sha256}, "part_dirs": ["part-0"], "num_examples": 8}
    (shards / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    made = []
    for name in ("one", "two"):
        checkpoint = tmp_path / "runs" / name
        checkpoint.mkdir(parents=True)
        (checkpoint / "state_dict.pth").write_bytes(b"")
        experiment = ExperimentFactory.create(dataset_version=version, shard_dir=str(shards), name=f"exp-{name}")
        made.append(TrialFactory.create(experiment=experiment, state=TrialState.COMPLETED, checkpoint=str(checkpoint)))
    return made[0], made[1]


def _upload(text: str = TEXT) -> SimpleUploadedFile:
    return SimpleUploadedFile("paired.csv", text.encode(), content_type="text/csv")


def test_the_new_page_offers_one_file_two_audits_of_a_file_and_two_trials(
    bob: User, audits: tuple[PredictionAudit, PredictionAudit], trials: tuple[Trial, Trial]
) -> None:
    lonely = PredictionAuditFactory.create(created_by=bob)  # the only audit of its file: not offered
    html = client_for(bob).get(reverse("comparisons:new")).content.decode()
    for form in ("comparison-form", "comparison-audits-form", "comparison-trials-form"):
        assert f'id="{form}"' in html
    assert f'action="{reverse("comparisons:new-audits")}"' in html
    assert f'action="{reverse("comparisons:new-trials")}"' in html
    champion, challenger = audits
    assert f'<optgroup label="paired.csv (SHA-256 {champion.sha256[:12]}…)">' in html
    assert f"audit #{champion.pk}: model_a" in html
    assert f"audit #{challenger.pk}: score_b ≥ 0.5" in html
    assert f"audit #{lonely.pk}:" not in html
    assert f"trial {trials[0].pk}: exp-one #1" in html
    # The file form keeps its unprefixed fields (ids used by the browser test), the others are prefixed.
    assert 'id="id_file"' in html
    assert 'id="id_audits-file"' in html
    assert 'id="id_trials-champion_trial"' in html


def test_the_page_says_when_nothing_can_be_paired_yet(bob: User) -> None:
    html = client_for(bob).get(reverse("comparisons:new")).content.decode()
    assert 'id="no-audits-to-pair"' in html
    assert 'id="no-trials-to-pair"' in html


def test_the_audits_form_compares_and_lands_on_the_comparison(
    bob: User, audits: tuple[PredictionAudit, PredictionAudit]
) -> None:
    champion, challenger = audits
    answer = client_for(bob).post(
        reverse("comparisons:new-audits"),
        {
            "audits-file": _upload(),
            "audits-champion_audit": champion.pk,
            "audits-challenger_audit": challenger.pk,
            "audits-metrics": ["tpr", "accuracy"],
        },
    )
    comparison = PairedComparison.objects.get()
    assert answer.status_code == 302
    assert answer["Location"] == reverse("comparisons:detail", args=[comparison.pk])
    assert comparison.result["metrics"] == ["tpr", "accuracy"]
    html = client_for(bob).get(answer["Location"]).content.decode()
    audits_fact = html[html.index('id="comparison-audits"') :]
    assert f"audit #{champion.pk}</a>" in audits_fact
    assert "<code>score_b ≥ 0.5</code>" in audits_fact
    assert "its SHA-256 was checked against both audits'" in audits_fact


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"audits-file": "other"}, "give that file, byte for byte"),
        ({"audits-challenger_audit": "champion"}, "is also the champion"),
        ({"audits-file": None}, "This field is required."),
    ],
    ids=["another-file", "same-audit", "no-file"],
)
def test_the_audits_form_shows_the_error_on_its_field(
    bob: User, audits: tuple[PredictionAudit, PredictionAudit], change: dict[str, Any], error: str
) -> None:
    champion, challenger = audits
    data: dict[str, Any] = {
        "audits-file": _upload(),
        "audits-champion_audit": champion.pk,
        "audits-challenger_audit": challenger.pk,
        "audits-metrics": ["tpr"],
    }
    for key, value in change.items():
        if value is None:
            del data[key]
        elif value == "other":
            data[key] = _upload(TEXT + "1,1,1,0.5,0.5,f\n")
        else:
            data[key] = champion.pk
    answer = client_for(bob).post(reverse("comparisons:new-audits"), data)
    assert answer.status_code == 400
    html = answer.content.decode()
    assert error in html
    assert 'id="comparison-failed"' in html
    assert 'href="#from-audits"' in html
    assert not PairedComparison.objects.exists()


def test_the_trials_form_queues_the_comparison_and_lands_on_its_pending_page(
    bob: User, trials: tuple[Trial, Trial], django_capture_on_commit_callbacks: Any
) -> None:
    champion, challenger = trials
    with django_capture_on_commit_callbacks(execute=False):
        answer = client_for(bob).post(
            reverse("comparisons:new-trials"),
            {"trials-champion_trial": champion.pk, "trials-challenger_trial": challenger.pk},
        )
    comparison = PairedComparison.objects.get()
    assert answer.status_code == 302
    assert answer["Location"] == reverse("comparisons:detail", args=[comparison.pk])
    assert comparison.state == ComparisonState.PENDING
    assert (comparison.champion_trial, comparison.challenger_trial) == (champion, challenger)
    assert OutboxMessage.objects.filter(name=trial_services.COMPARE_TRIALS_TASK, args=[comparison.pk]).exists()


def test_the_trials_form_names_the_field_it_refuses(bob: User, trials: tuple[Trial, Trial]) -> None:
    champion, _ = trials
    answer = client_for(bob).post(
        reverse("comparisons:new-trials"),
        {"trials-champion_trial": champion.pk, "trials-challenger_trial": champion.pk},
    )
    assert answer.status_code == 400
    html = answer.content.decode()
    assert f"trial {champion.pk} is also the champion" in html
    assert 'href="#from-trials"' in html
    assert not PairedComparison.objects.exists()


def test_a_pending_comparison_shows_its_state_polls_it_and_the_list_shows_a_badge(
    bob: User, dave: User, trials: tuple[Trial, Trial]
) -> None:
    comparison = trial_services.comparison_request_trials(
        user=bob, champion=trials[0], challenger=trials[1], queue=False
    )
    client = client_for(dave)  # every member reads comparisons
    html = client.get(reverse("comparisons:detail", args=[comparison.pk])).content.decode()
    assert 'id="staged"' in html
    assert f'data-status-url="{reverse("comparisons:status", args=[comparison.pk])}"' in html
    assert "/static/js/staged.js" in html
    assert '<noscript><meta http-equiv="refresh" content="5"></noscript>' in html
    assert "<script>" not in html  # CSP: no inline script
    assert "Rows</dt>" not in html  # nothing counted yet
    status = client.get(reverse("comparisons:status", args=[comparison.pk])).json()
    assert status["status"] == "pending"
    assert status["progress"] == "Pending"
    listed = client.get(reverse("comparisons:list")).content.decode()
    row = listed[listed.index(f">{comparison.pk}</a>") :].split("</tr>")[0]
    assert '<span class="badge comparison-pending">pending</span>' in row
    assert "<td>0</td>" not in row


def test_a_failed_comparison_says_why_and_stops_polling(bob: User, trials: tuple[Trial, Trial]) -> None:
    comparison = trial_services.comparison_request_trials(
        user=bob, champion=trials[0], challenger=trials[1], queue=False
    )
    PairedComparison.objects.filter(pk=comparison.pk).update(
        state=ComparisonState.FAILED, error="trial 1's checkpoint could not be run: no torch"
    )
    client = client_for(bob)
    html = client.get(reverse("comparisons:detail", args=[comparison.pk])).content.decode()
    assert "No result was stored: trial 1&#x27;s checkpoint could not be run: no torch" in html
    assert "staged.js" not in html
    assert 'http-equiv="refresh"' not in html
    assert client.get(reverse("comparisons:status", args=[comparison.pk])).json()["status"] == "failed"
    listed = client.get(reverse("comparisons:list")).content.decode()
    assert '<span class="badge comparison-failed">failed</span>' in listed


def test_the_status_of_a_comparison_is_hidden_from_an_account_without_a_role(
    oscar: User, bob: User, trials: tuple[Trial, Trial]
) -> None:
    comparison = trial_services.comparison_request_trials(
        user=bob, champion=trials[0], challenger=trials[1], queue=False
    )
    assert client_for(oscar).get(reverse("comparisons:status", args=[comparison.pk])).status_code == 404
