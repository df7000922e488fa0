"""The trial's "Why the gaps" page: the card with its form and the state, and a done attribution's charts,
tables and provenance (sample, seed, baseline, method)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from django.test import Client

from auditportal.accounts.models import User
from auditportal.attributions.models import TrialAttribution
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments.models import Trial, TrialState
from tests.attributions.conftest import done_attribution, local_trial
from tests.attributions.documents import summary_document


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _figures(page: str) -> dict[str, Any]:
    return {
        key: json.loads(html.unescape(value))
        for key, value in re.findall(r'<script id="([^"]+)" type="application/json">(.*?)</script>', page, re.S)
    }


def test_a_done_attribution_shows_its_charts_tables_and_provenance(trial: Trial, bob: User, alice: User) -> None:
    done = done_attribution(trial, bob, seed=11)
    page = _client(alice).get(f"/attributions/trials/{trial.pk}/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Why the gaps" in text
    assert 'id="attribution-sample">400 validation rows explained, stratified by group, seed 11' in text
    assert "Integrated Gradients (Captum 0.8.0)" in text
    assert (
        "the training data&#x27;s mean row (numeric means, categorical nulls): the model's output there is 0.310"
        in text
    )
    assert "holds" in text
    assert done.sha256 in text
    # Per attribute: its groups' gaps, the charts, the proxies (strongest first).
    figures = _figures(text)
    assert set(figures) == {f"attribute-{n}-{kind}" for n in (1, 2) for kind in ("score", "recall", "mean-abs")}
    score = figures["attribute-1-score"]
    assert score["data"][0]["orientation"] == "h"
    assert score["data"][0]["error_x"]["type"] == "data"
    proxies = re.findall(r"<table class=\"data attribution-proxies\">.*?</table>", text, re.S)[0]
    assert re.findall(r"<tr><td class=\"feature\">(\w+)</td>", proxies) == ["signal", "proxy", "income", "region"]
    assert '<td class="num">0.900</td>' in proxies
    # Not for a steward: the form, and the checkpoint's path.
    assert 'id="attribution-form"' not in text
    assert trial.checkpoint not in text
    # Static assets only from static/.
    assert "/static/vendor/plotly/plotly.min.js" in text
    assert not re.search(r'<script[^>]+src="(?!/static/)', text)


def test_an_engineer_sees_the_form_and_the_checkpoint_path(trial: Trial, bob: User) -> None:
    done_attribution(trial, bob)
    text = _client(bob).get(f"/attributions/trials/{trial.pk}/").content.decode()
    assert 'id="attribution-form"' in text
    assert 'name="sample_size"' in text
    assert trial.checkpoint in text


def test_the_form_queues_one_and_the_page_shows_it_pending(trial: Trial, bob: User) -> None:
    client = _client(bob)
    answer = client.post(f"/attributions/trials/{trial.pk}/request/", {"sample_size": 300, "seed": 2})
    attribution = TrialAttribution.objects.get()
    assert answer.status_code == 302
    assert answer["Location"] == f"/attributions/{attribution.pk}/"
    text = client.get(answer["Location"]).content.decode()
    assert "are pending: a worker is running the checkpoint on 300 validation rows" in text
    assert "plotly.min.js" not in text  # nothing to draw yet


def test_a_refused_form_comes_back_with_the_reason(version: DatasetVersion, runs: Path, bob: User) -> None:
    trial = local_trial(version, runs)
    (Path(trial.checkpoint) / "state_dict.pth").unlink()
    client = _client(bob)
    answer = client.post(f"/attributions/trials/{trial.pk}/request/", {"sample_size": 300, "seed": 2})
    assert answer.status_code == 303
    assert answer["Location"] == f"/attributions/trials/{trial.pk}/#why"
    text = client.get(f"/attributions/trials/{trial.pk}/").content.decode()
    assert f"trial {trial.pk}&#x27;s checkpoint ckpt-{trial.pk} is no longer on disk" in text
    bad = client.post(f"/attributions/trials/{trial.pk}/request/", {"sample_size": 5, "seed": 2})
    assert bad.status_code == 303
    text = client.get(f"/attributions/trials/{trial.pk}/").content.decode()
    assert "Ensure this value is greater than or equal to 100." in text
    assert 'value="5"' in text
    assert not TrialAttribution.objects.exists()


def test_a_trial_still_running_offers_no_form(version: DatasetVersion, runs: Path, bob: User) -> None:
    trial = local_trial(version, runs, state=TrialState.RUNNING)
    text = _client(bob).get(f"/attributions/trials/{trial.pk}/").content.decode()
    assert "No attributions yet." in text
    assert "this trial is running" in text
    assert 'id="attribution-form"' not in text


def test_a_failed_attribution_shows_its_reason_and_the_history_lists_every_one(trial: Trial, bob: User) -> None:
    done = done_attribution(trial, bob)
    failed = TrialAttribution.objects.create(
        trial=trial, checkpoint=trial.checkpoint, checkpoint_name="ckpt", checkpoint_sha256="d" * 64,
        dataset_version=trial.experiment.dataset_version, dataset_sha256="0" * 64, sample_size=300, seed=1,
        state="failed", error="the trainer ran out of memory", created_by=bob,
    )  # fmt: skip
    client = _client(bob)
    text = client.get(f"/attributions/{failed.pk}/").content.decode()
    assert f"Attributions #{failed.pk} failed: the trainer ran out of memory" in text
    assert f'href="/attributions/{done.pk}/"' in text
    # The trial's page shows the newest done one.
    text = client.get(f"/attributions/trials/{trial.pk}/").content.decode()
    assert f'#{done.pk}, <span class="state done">' in text


def test_names_from_the_file_are_text_in_the_page_and_the_figures(trial: Trial, bob: User) -> None:
    hostile = '<img src=x onerror="alert(1)">&%{x}'
    document = summary_document(attributes={"gender": ("male", hostile)}, features=(hostile, "income"))
    done_attribution(trial, bob, document=document)
    text = _client(bob).get(f"/attributions/trials/{trial.pk}/").content.decode()
    assert hostile not in text
    assert "&lt;img src=x onerror=" in text


def test_the_experiment_page_links_a_completed_trial_to_its_page(trial: Trial, bob: User) -> None:
    text = _client(bob).get(f"/experiments/{trial.experiment_id}/").content.decode()
    assert f'href="/attributions/trials/{trial.pk}/">Why the gaps</a>' in text
