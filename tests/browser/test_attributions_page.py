"""A trial's "Why the gaps" page in Chromium at a phone's width (390 px) and a laptop's (1280 px): every
chart drawn, no page wider than the window, nothing the Content-Security-Policy refuses, no console
error (screenshots in test-artifacts/browser/attributions-<width>.png)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import Role
from tests.attributions.conftest import GROUPS_FOR_DOCUMENT, done_attribution, local_trial
from tests.attributions.documents import summary_document
from tests.browser.conftest import ARTIFACTS, log_in
from tests.browser.test_every_page_fits import FIGURES_FITTED, FIGURES_SETTLED, WATCH, WIDEST
from tests.factories import DatasetVersionFactory, make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# Twenty features, as the benchmark has, and a name with no space to break at.
FEATURES = ("zip_density_of_the_applicants_home_postcode_area", *(f"x{index}" for index in range(1, 20)))


def test_the_why_the_gaps_page_fits_a_phone_and_a_laptop(
    page: Any, live_server: Any, settings: SettingsWrapper, tmp_path: Path
) -> None:
    settings.EXPERIMENT_RUN_DIR = tmp_path / "runs"
    (tmp_path / "runs").mkdir()
    bob = make_user("bob", [Role.ML_ENGINEER])
    trial = local_trial(DatasetVersionFactory.create(), tmp_path / "runs")
    document = summary_document(attributes=GROUPS_FOR_DOCUMENT, features=FEATURES, size=2000)
    done_attribution(trial, bob, document=document, sample_size=2000, seed=7)
    page.add_init_script(WATCH)
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, live_server.url, "bob")
    page.set_viewport_size({"width": 390, "height": 900})
    page.goto(f"{live_server.url}/attributions/trials/{trial.pk}/")
    page.wait_for_function(FIGURES_SETTLED)
    # Two attributes, each with its score and recall contributions and its mean |attribution|: six charts.
    assert page.locator(".figure svg.main-svg").count() >= 6
    for width in (390, 1280):
        if width != 390:
            page.set_viewport_size({"width": width, "height": 900})
            page.wait_for_function(FIGURES_FITTED)
        page.screenshot(path=str(ARTIFACTS / f"attributions-{width}.png"), full_page=True)
        scroll_width = int(page.evaluate("document.documentElement.scrollWidth"))
        assert scroll_width <= width, page.evaluate(WIDEST, width)
        assert page.evaluate("window.__violations") == []
        assert errors == []
    # Bars with error bars, and the proxies table beside them.
    assert page.locator("#attribute-1 .errorbar").count() > 0
    assert "beyond chance" in page.inner_text("#attribute-1 table.attribution-proxies")
    assert "seed 7" in page.inner_text("#attribution-sample")
