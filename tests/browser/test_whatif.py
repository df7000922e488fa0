"""The what-if page in Chromium: a group's threshold moved with the arrow keys changes the table and
the verdict at once (through the API); screenshots at 1280 and 390 px."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from auditportal.accounts.models import Role
from auditportal.audits import services
from auditportal.fairness.statistics.audit import AuditSpec
from tests.browser.conftest import ARTIFACTS, log_in
from tests.factories import make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _scores(path: Path) -> Path:
    """Group f's positives score 0.495, just under the threshold of 0.5; m's score 0.8."""
    lines = ["label,score,gender"]
    for group, positive in (("f", "0.495"), ("m", "0.8")):
        lines += [f"1,{positive},{group}"] * 400 + [f"0,0.2,{group}"] * 600
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _tpr_verdict(page: Any) -> str:
    return str(page.inner_text('#whatif-comparisons tr[data-metric="tpr"][data-group="m"] .badge'))


def test_moving_a_groups_threshold_by_keyboard_changes_the_table_and_the_verdict(
    page: Any, live_server: Any, dataset_storage: Path, tmp_path: Path
) -> None:
    bob = make_user("bob", [Role.ML_ENGINEER])
    item = services.whatif_start(
        user=bob,
        source=_scores(tmp_path / "scores.csv"),
        original_name="scores.csv",
        spec=AuditSpec(label="label", score="score", threshold=0.5, attributes=("gender",)),
    )
    log_in(page, live_server.url, "bob")
    page.goto(f"{live_server.url}/audits/predictions/whatif/{item.pk}/")
    assert page.inner_text("#exploratory") == "Exploratory"
    page.wait_for_selector("#whatif-forest.figure-drawn")
    assert _tpr_verdict(page) == "FAIL"
    assert page.inner_text("#whatif-headline") == "FAIL"

    f_row = page.locator('.threshold-row[data-group="f"]')
    slider = f_row.locator("input[type=range]")
    slider.focus()
    step = float(slider.get_attribute("step"))
    for _ in range(round(0.006 / step)):
        page.keyboard.press("ArrowLeft")
    box_value = float(f_row.locator("input[type=number]").input_value())
    assert box_value < 0.495
    page.wait_for_function(
        '() => document.querySelector(\'#whatif-comparisons tr[data-metric="tpr"][data-group="m"] .badge\')'
        ".textContent === 'PASS'"
    )
    assert "threshold%5Bgender%3Df%5D" in page.url or "threshold[gender=f]" in page.url
    assert page.inner_text("#whatif-accuracy") == "100.0%"
    page.screenshot(path=str(ARTIFACTS / "whatif-1280.png"), full_page=True)

    # Typing in the global box moves every group without a threshold of its own.
    page.fill("#threshold-global-box", "0.9")
    page.wait_for_function("() => document.querySelector('#whatif-predicted').textContent === '400'")

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    page.wait_for_selector("#whatif-forest.figure-drawn")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390
    page.screenshot(path=str(ARTIFACTS / "whatif-390.png"), full_page=True)

    # Freeze: a real audit at these thresholds.
    page.click("#whatif-freeze")
    page.wait_for_url(f"{live_server.url}/audits/predictions/*/")
    assert "Frozen as prediction audit" in page.inner_text(".messages")
