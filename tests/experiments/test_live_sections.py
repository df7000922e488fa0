"""The live experiment page's server-rendered sections: progress.json's live_key and the fragment
(experiments:live) the page swaps in when it changes (static/js/experiments.js)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from auditportal.accounts.models import User
from auditportal.experiments.ingest import trial_metrics_ingest
from auditportal.experiments.models import Experiment, RungOutcome, Trial, TrialRung, TrialState
from auditportal.experiments.services import verdict_document_freeze_trial_completed
from auditportal.fairness.files.metricsfile import MetricRecord
from tests.factories import DemoDatasetVersionFactory, ExperimentFactory, TrialFactory, client_for


def _validation(step: int) -> MetricRecord:
    metrics: dict[str, float | None] = {"count/gender/unknown": 0.0, "accuracy": 0.8, "eod": 0.2}
    for group, tp in (("female", 600), ("male", 800)):
        for cell, value in zip(("tp", "fn", "fp", "tn"), (tp, 1000 - tp, 100, 900), strict=True):
            metrics[f"count/gender/{group}/{cell}"] = float(value)
    return MetricRecord(kind="validation", step=step, metrics=metrics)


@pytest.fixture
def search(bob: User, dataset_storage: Path) -> tuple[Experiment, Trial]:
    experiment = ExperimentFactory.create(
        dataset_version=DemoDatasetVersionFactory.create(rows=300),
        template="asha",
        max_trials=4,
        batches=100,
        status="running",
        launched_by=bob,
    )
    trial = TrialFactory.create(experiment=experiment, state=TrialState.RUNNING, asha_bracket=0)
    return experiment, trial


def _key(client: Client, experiment: Experiment) -> str:
    data = json.loads(client.get(reverse("experiments:progress", args=[experiment.pk])).content)
    key: str = data["live_key"]
    return key


def _page_key(client: Client, experiment: Experiment) -> str:
    page = client.get(reverse("experiments:detail", args=[experiment.pk])).content.decode()
    match = re.search(r'data-live-key="([0-9a-f]+)"', page)
    assert match is not None
    return match.group(1)


def test_the_page_starts_with_the_key_progress_json_brings_so_nothing_is_fetched_on_load(
    bob: User, search: tuple[Experiment, Trial]
) -> None:
    experiment, _ = search
    client = client_for(bob)
    assert _page_key(client, experiment) == _key(client, experiment)


def test_the_key_changes_with_a_validation_a_frozen_document_a_checkpoint_and_a_rung(
    bob: User, search: tuple[Experiment, Trial]
) -> None:
    experiment, trial = search
    client = client_for(bob)
    keys = [_key(client, experiment)]
    trial_metrics_ingest(trial=trial, records=[_validation(100)])
    keys.append(_key(client, experiment))
    Trial.objects.filter(pk=trial.pk).update(state=TrialState.COMPLETED, checkpoint="/checkpoints/1/")
    keys.append(_key(client, experiment))
    assert verdict_document_freeze_trial_completed(trial=trial) is not None
    keys.append(_key(client, experiment))
    TrialRung.objects.create(
        trial=trial, rung=0, units=25, step=25, metric=0.6, position=1, entered=1, continuing=1,
        outcome=RungOutcome.CONTINUED,
    )  # fmt: skip
    keys.append(_key(client, experiment))
    assert len(set(keys)) == len(keys)
    assert _page_key(client, experiment) == keys[-1]


def test_the_fragment_has_the_documents_row_with_its_review_link_and_the_rung_table(
    bob: User, dave: User, search: tuple[Experiment, Trial]
) -> None:
    experiment, trial = search
    url = reverse("experiments:live", args=[experiment.pk])
    before = client_for(bob).get(url).content.decode()
    assert f'data-trial-documents="{trial.pk}" hidden' in before
    assert 'id="asha-rungs"' in before
    trial_metrics_ingest(trial=trial, records=[_validation(100)])
    Trial.objects.filter(pk=trial.pk).update(state=TrialState.COMPLETED, checkpoint="/checkpoints/1/")
    document = verdict_document_freeze_trial_completed(trial=trial)
    assert document is not None
    after = client_for(bob).get(url).content.decode()
    assert f'data-trial-documents="{trial.pk}">' in after
    assert f'href="/documents/{document.pk}/"' in after
    assert f'href="/approvals/new/?trial={trial.pk}"' in after
    assert 'name="csrfmiddlewaretoken"' in after  # the freeze form posts from the swapped row too
    # A committee member reads the same row without the actions that are not theirs.
    member = client_for(dave).get(url).content.decode()
    assert f'href="/documents/{document.pk}/"' in member
    assert "Request review" not in member
    assert "freeze-form" not in member


def test_an_outsider_gets_404_for_the_fragment(oscar: User, search: tuple[Experiment, Trial]) -> None:
    experiment, _ = search
    assert client_for(oscar).get(reverse("experiments:live", args=[experiment.pk])).status_code == 404
