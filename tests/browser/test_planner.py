"""The A/B test planner in Chromium: reached from the prediction audits, filled in, the plan's table
and its power curve drawn, a hostile group name shown as text; screenshots at 1280 and 390 px."""

from __future__ import annotations

from typing import Any

import pytest

from auditportal.accounts.models import Role
from tests.browser.conftest import ARTIFACTS, log_in
from tests.factories import make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

HOSTILE = '<img src=x onerror="document.title=1">women'


def test_a_member_plans_an_ab_test_and_sees_the_power_curve(page: Any, live_server: Any) -> None:
    make_user("bob", [Role.ML_ENGINEER])
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    log_in(page, live_server.url, "bob")
    page.goto(f"{live_server.url}/audits/predictions/")
    page.click("#plan-ab-test")
    page.wait_for_selector("#plan-form")
    assert page.locator("#plan-result").count() == 0

    page.fill("#id_difference", "0.05")
    page.fill("#id_power", "0.8")
    page.select_option("#id_unit", "positives")
    for index, (name, share, rate, prevalence) in enumerate(
        [("men", "0.55", "0.8", "0.4"), (HOSTILE, "0.35", "0.75", "0.3"), ("non-binary", "0.1", "0.7", "0.25")]
    ):
        page.fill(f"#id_group-{index}-name", name)
        page.fill(f"#id_group-{index}-share", share)
        page.fill(f"#id_group-{index}-rate", rate)
        page.fill(f"#id_group-{index}-prevalence", prevalence)
    page.click("#plan-form button[type=submit]")

    page.wait_for_selector("#plan-curve.figure-drawn .main-svg")
    assert page.inner_text("#plan-deciding") == "non-binary"
    assert page.locator("#plan-table tbody tr").count() == 3
    assert HOSTILE in page.inner_text("#plan-table")
    # One line per group, and the legend shows the hostile name as its characters.
    assert page.locator("#plan-curve .scatterlayer .trace").count() == 3
    legend = page.eval_on_selector_all("#plan-curve .legend .legendtext", "texts => texts.map(t => t.textContent)")
    assert "non-binary (sets the size)" in legend
    assert any(name.startswith("<img src=x") for name in legend)
    assert page.locator("#plan-curve img").count() == 0
    assert page.title() != "1"
    page.screenshot(path=str(ARTIFACTS / "planner-1280.png"), full_page=True)

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    page.wait_for_selector("#plan-curve.figure-drawn .main-svg")
    page.screenshot(path=str(ARTIFACTS / "planner-390.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert problems == []


def test_a_bad_question_is_answered_on_the_field_at_fault(page: Any, live_server: Any) -> None:
    make_user("carol", [Role.REVIEWER])
    log_in(page, live_server.url, "carol")
    page.goto(f"{live_server.url}/comparisons/plan/")
    page.fill("#id_group-0-name", "a")
    page.fill("#id_group-0-share", "0.5")
    page.fill("#id_group-0-rate", "0.5")
    page.fill("#id_group-1-name", "b")
    page.fill("#id_group-1-share", "0.4")
    page.fill("#id_group-1-rate", "0.5")
    page.click("#plan-form button[type=submit]")
    page.wait_for_selector("#groups-errors")
    assert "The groups' shares must sum to 1; they sum to 0.9." in page.inner_text("#groups-errors")
    assert page.locator("#plan-result").count() == 0
    assert page.input_value("#id_group-1-share") == "0.4"
