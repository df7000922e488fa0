from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from auditportal.accounts.models import Role
from tests.browser.conftest import ARTIFACTS, log_in
from tests.factories import PredictionAuditFactory, make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_reviewer_retires_an_audit_and_the_page_and_list_say_so(
    page: Any, live_server: Any, dataset_storage: Path
) -> None:
    make_user("carol", [Role.REVIEWER])
    audit = PredictionAuditFactory.create()
    url = f"{live_server.url}/audits/predictions/{audit.pk}/"

    log_in(page, live_server.url, "carol")
    page.goto(url)
    assert page.locator(".retired-banner").count() == 0
    page.click("details.retire summary")
    page.click("details.retire button[type=submit]")  # no reason given
    assert page.inner_text("details.retire[open] .error") == "Say why this audit is retired."
    page.fill("#id_reason", "The scores came from the staging model.")
    page.screenshot(path=str(ARTIFACTS / "prediction-audit-retire-form.png"), full_page=True)
    page.click("details.retire button[type=submit]")

    page.wait_for_selector(".retired-banner")
    banner = page.inner_text(".retired-banner")
    assert "by carol: The scores came from the staging model." in banner
    assert page.locator("details.retire").count() == 0
    page.screenshot(path=str(ARTIFACTS / "prediction-audit-retired.png"), full_page=True)
    audit.refresh_from_db()
    assert audit.retired_reason == "The scores came from the staging model."

    page.goto(f"{live_server.url}/audits/predictions/")
    assert page.inner_text("#audits tr.retired .badge.retired") == "retired"
