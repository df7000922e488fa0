"""The deployment page in Chromium: its charts drawn by plotly.js (no CSP violation, no console
error), the alert near the FNR limit, and the page within the window at 1280 and 390 px."""

from __future__ import annotations

from typing import Any

import pytest

from auditportal.accounts.models import User
from auditportal.monitoring import services
from auditportal.monitoring.models import Deployment
from tests.browser.conftest import ARTIFACTS, log_in
from tests.browser.test_dashboard_audits import drawn_figures, page_width, watch_console
from tests.monitoring.conftest import Approve, approve, deployment, frank
from tests.monitoring.test_pages import _counted

__all__ = ["approve", "deployment", "frank"]

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_deployment_page_draws_its_charts_and_warns_near_the_limit(
    page: Any, live_server: Any, deployment: Deployment, approve: Approve, bob: User, dave: User
) -> None:
    approve("credit:4")
    serving = services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob)
    for index in range(12):
        _counted(serving, bob, index, women_fn=3)  # f: 5% of the qualified refused, at its limit
    errors = watch_console(page)
    log_in(page, live_server.url, "dave")
    page.goto(f"{live_server.url}/monitoring/credit-scoring/prod/")
    charts = drawn_figures(page, "#monitor-charts .monitor-figure")
    assert charts >= 3
    assert page.locator("#monitor-charts .monitor-figure[data-kind=rate] .scatterlayer .trace").count() >= 4
    alert = page.inner_text("#monitor-alerts")
    assert "Near its limit" in alert
    assert page.inner_text("#monitor-alerts h2") == "Alerts at look 12"
    assert "gender = f" in alert
    assert page.locator("#batch-table tbody tr").count() == 12
    assert page_width(page) <= 1280
    page.screenshot(path=str(ARTIFACTS / "monitoring-deployment-1280.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    drawn_figures(page, "#monitor-charts .monitor-figure")
    assert page_width(page) <= 390
    page.screenshot(path=str(ARTIFACTS / "monitoring-deployment-390.png"), full_page=True)
    assert errors == []
