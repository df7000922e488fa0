"""A reviewer compares a champion and a challenger through the page and reads the forest plot of the
paired differences per group (screenshot at 1280 px in test-artifacts/browser/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from auditportal.accounts.models import Role
from auditportal.comparisons.models import PairedComparison
from tests.browser.conftest import ARTIFACTS, log_in
from tests.comparisons.conftest import paired_csv_text
from tests.factories import make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_reviewer_compares_two_models_and_sees_the_forest_plot(page: Any, live_server: Any, tmp_path: Path) -> None:
    make_user("carol", [Role.REVIEWER])
    csv_file = tmp_path / "paired.csv"
    csv_file.write_text(paired_csv_text(rows=3000), encoding="utf-8")
    page.set_viewport_size({"width": 1280, "height": 900})
    log_in(page, live_server.url, "carol")
    page.goto(f"{live_server.url}/comparisons/new/")
    page.set_input_files("#id_file", str(csv_file))
    page.fill("#id_label", "label")
    page.fill("#id_champion", "model_a")
    page.fill("#id_challenger", "model_b")
    page.fill("#id_attributes", "gender")
    page.click("#comparison-form button[type=submit]")

    page.wait_for_selector("section.paired-table[data-attribute=gender]")
    page.wait_for_selector("#forest .main-svg")
    comparison = PairedComparison.objects.get()
    assert page.url.endswith(f"/comparisons/{comparison.pk}/")
    # One panel per metric, the groups on each, the verdict's mark on the better side for f's accuracy.
    titles = page.eval_on_selector_all("#forest .annotation-text", "nodes => nodes.map(n => n.textContent)")
    assert any(title.startswith("accuracy") for title in titles)
    assert page.locator("#forest .scatterlayer .point").count() >= 10
    assert int(page.evaluate("document.documentElement.scrollWidth")) <= 1280
    assert "BETTER" in page.inner_text("section.paired-table[data-attribute=gender]")
    page.screenshot(path=str(ARTIFACTS / "paired-comparison-1280.png"), full_page=True)
