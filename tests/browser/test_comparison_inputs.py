"""The comparisons' other inputs in Chromium: two audits of one file paired through the page's second form
(the file uploaded again), two trials through the third (landing on the pending comparison, whose page
follows its state until the worker is done, without inline script), the list's state badge, and the
what-if's suggestion for the intersection; screenshots at 1280 and 390 px in test-artifacts/browser/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import Role, User
from auditportal.audits import services as audit_services
from auditportal.comparisons.models import ComparisonState, PairedComparison
from auditportal.datasets.models import DatasetVersion
from auditportal.experiments.models import Trial, TrialState
from auditportal.fairness.statistics.audit import AuditSpec
from tests.browser.conftest import ARTIFACTS, log_in
from tests.comparisons.conftest import paired_csv_text
from tests.factories import DatasetVersionFactory, ExperimentFactory, PredictionAuditFactory, TrialFactory, make_user

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fast_polls"),
]

WIDTHS = (1280, 390)


def _shots(page: Any, name: str, *, reload: bool = True) -> None:
    """A full-page screenshot at each width, the page asked for again at that width (figures are laid
    out for the window they are drawn in) unless it answered a form."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        if reload:
            page.goto(page.url)
            if page.locator(".figure").count():
                page.wait_for_selector(".figure .main-svg")
        assert int(page.evaluate("document.documentElement.scrollWidth")) <= width, (name, width)
        page.screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


def _trials(settings: SettingsWrapper, tmp_path: Path) -> tuple[Trial, Trial]:
    settings.EXPERIMENT_RUN_DIR = tmp_path / "runs"
    version: DatasetVersion = DatasetVersionFactory.create()
    shards = tmp_path / "shards"
    shards.mkdir()
    manifest = {"dataset": {"sha256": version.sha256}, "part_dirs": ["part-0"], "num_examples": 8}
    (shards / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    made = []
    for name in ("baseline", "fair-lambda-4"):
        checkpoint = tmp_path / "runs" / name
        checkpoint.mkdir(parents=True)
        (checkpoint / "state_dict.pth").write_bytes(b"")
        experiment = ExperimentFactory.create(dataset_version=version, shard_dir=str(shards), name=name)
        made.append(TrialFactory.create(experiment=experiment, state=TrialState.COMPLETED, checkpoint=str(checkpoint)))
    return made[0], made[1]


def test_two_audits_of_one_file_are_paired_through_the_page(page: Any, live_server: Any, tmp_path: Path) -> None:
    bob = make_user("bob", [Role.ML_ENGINEER])
    text = paired_csv_text(rows=3000)
    audits = [
        PredictionAuditFactory.create(
            created_by=bob,
            original_name="scored.csv",
            content=text,
            spec=AuditSpec(label="label", attributes=("gender",), **spec),
        )
        for spec in ({"prediction": "model_a"}, {"score": "score_b", "threshold": 0.5})
    ]
    scored = tmp_path / "scored.csv"
    scored.write_text(text, encoding="utf-8")
    log_in(page, live_server.url, "bob")
    page.goto(f"{live_server.url}/comparisons/new/")
    _shots(page, "comparison-new")
    page.click('nav.comparison-inputs a[href="#from-audits"]')
    page.set_input_files("#id_audits-file", str(scored))
    page.select_option("#id_audits-champion_audit", str(audits[0].pk))
    page.select_option("#id_audits-challenger_audit", str(audits[1].pk))
    page.click("#comparison-audits-form button[type=submit]")

    page.wait_for_selector("section.paired-table[data-attribute=gender]")
    page.wait_for_selector("#forest .main-svg")
    comparison = PairedComparison.objects.get()
    assert page.url.endswith(f"/comparisons/{comparison.pk}/")
    facts = page.inner_text("#comparison-audits")
    assert f"audit #{audits[0].pk}" in facts
    assert "score_b ≥ 0.5" in facts
    _shots(page, "comparison-of-two-audits")

    # The same audit twice: refused on the challenger's field, in place.
    page.goto(f"{live_server.url}/comparisons/new/")
    page.set_input_files("#id_audits-file", str(scored))
    page.select_option("#id_audits-champion_audit", str(audits[0].pk))
    page.select_option("#id_audits-challenger_audit", str(audits[0].pk))
    page.click("#comparison-audits-form button[type=submit]")
    page.wait_for_selector("#comparison-failed")
    assert "is also the champion" in page.inner_text("#from-audits")
    assert PairedComparison.objects.count() == 1
    _shots(page, "comparison-new-refused", reload=False)


def test_two_trials_are_compared_through_the_page_which_follows_the_pending_state(
    page: Any, live_server: Any, tmp_path: Path, settings: SettingsWrapper
) -> None:
    make_user("carol", [Role.REVIEWER])
    champion, challenger = _trials(settings, tmp_path)
    violations: list[str] = []
    page.on(
        "console",
        lambda message: violations.append(message.text) if "Content Security Policy" in message.text else None,
    )
    log_in(page, live_server.url, "carol")
    page.goto(f"{live_server.url}/comparisons/new/#from-trials")
    page.select_option("#id_trials-champion_trial", str(champion.pk))
    page.select_option("#id_trials-challenger_trial", str(challenger.pk))
    page.click("#comparison-trials-form button[type=submit]")

    page.wait_for_selector("#staged")
    comparison = PairedComparison.objects.get()
    assert comparison.state == ComparisonState.PENDING
    assert page.url.endswith(f"/comparisons/{comparison.pk}/")
    assert "A worker is running both trials' checkpoints" in page.inner_text("#comparison-state")
    page.wait_for_function("() => /for \\d+ s/.test(document.querySelector('[data-field=elapsed]').textContent)")
    _shots(page, "comparison-pending")
    page.goto(f"{live_server.url}/comparisons/")
    row = page.locator(f"tr:has(a[href='/comparisons/{comparison.pk}/'])")
    assert row.locator(".badge.comparison-pending").inner_text() == "pending"
    _shots(page, "comparison-list-pending")

    # The worker gives up (as comparison_compute_trials records it): the open page reloads by itself.
    page.goto(f"{live_server.url}/comparisons/{comparison.pk}/")
    page.wait_for_selector("#staged")
    PairedComparison.objects.filter(pk=comparison.pk).update(
        state=ComparisonState.FAILED, error=f"trial {champion.pk}'s checkpoint could not be run: no module named torch"
    )
    page.wait_for_selector(".error#comparison-state", timeout=15_000)
    assert "No result was stored" in page.inner_text("#comparison-state")
    assert page.locator("#staged").count() == 0
    assert violations == []
    _shots(page, "comparison-failed")


def test_the_what_if_suggests_thresholds_for_the_intersection(
    page: Any, live_server: Any, dataset_storage: Path, tmp_path: Path
) -> None:
    bob: User = make_user("bob", [Role.ML_ENGINEER])
    rng = np.random.default_rng(3)
    rows = 4000
    gender = rng.choice(["f", "m"], rows)
    age = rng.choice(["young", "old"], rows, p=[0.4, 0.6])
    label = (rng.random(rows) < 0.4).astype(int)
    shift = np.where(gender == "f", -0.1, 0.0) + np.where(age == "old", 0.05, 0.0)
    score = np.clip(rng.normal(0.4 + 0.25 * label + shift, 0.15), 0, 1)
    lines = ["label,score,gender,age"] + [f"{label[i]},{score[i]:.3f},{gender[i]},{age[i]}" for i in range(rows)]
    lines += ["1,0.7,x,young", "1,0.4,x,young", "0,0.3,x,young"]  # a tiny group: 2 positives
    scored = tmp_path / "scores.csv"
    scored.write_text("\n".join(lines) + "\n", encoding="utf-8")
    item = audit_services.whatif_start(
        user=bob,
        source=scored,
        original_name="scores.csv",
        spec=AuditSpec(label="label", score="score", threshold=0.5, attributes=("gender", "age"), intersect=True),
    )
    log_in(page, live_server.url, "bob")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/audits/predictions/whatif/{item.pk}/?attribute=gender%26age")
        page.wait_for_selector("#whatif-forest.figure-drawn")
        assert page.locator("#whatif-intersection-note").count() == 1
        assert page.locator(".threshold-row[data-group]").count() == 5  # f, m by young, old; x&young
        page.click("#whatif-suggest")
        page.wait_for_selector("#whatif-suggestion-coarse")
        assert "x&young" in page.inner_text("#whatif-suggestion-coarse")
        page.click("#whatif-suggestion-apply")
        page.wait_for_function("() => window.location.search.includes('threshold%5Bgender%26age%3Df%26young%5D')")
        assert int(page.evaluate("document.documentElement.scrollWidth")) <= width
        page.screenshot(path=str(ARTIFACTS / f"whatif-intersection-suggestion-{width}.png"), full_page=True)
