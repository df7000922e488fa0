from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from auditportal.accounts.models import Role
from tests.browser.conftest import ARTIFACTS, log_in
from tests.datasets.conftest import flip_labels
from tests.factories import DatasetVersionFactory, make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_steward_checks_a_version_sees_it_fail_after_tampering_and_retires_it(
    page: Any, live_server: Any, dataset_storage: Path
) -> None:
    alice = make_user("alice", [Role.DATA_STEWARD])
    version = DatasetVersionFactory.create(created_by=alice, name="loans")
    log_in(page, live_server.url, "alice")
    page.goto(f"{live_server.url}/datasets/versions/{version.pk}/")
    assert "not checked since registration" in page.inner_text("#integrity")

    page.click("text=Check integrity now")
    page.wait_for_selector("#integrity .integrity-ok")
    assert page.locator("#integrity-failed").count() == 0
    page.screenshot(path=str(ARTIFACTS / "dataset-version-integrity-ok.png"), full_page=True)

    flip_labels(version)
    page.click("text=Check integrity now")
    banner = page.wait_for_selector("#integrity-failed")
    text = banner.inner_text()
    assert "This version failed its integrity check on" in text
    assert f"registered {version.sha256}" in text
    page.screenshot(path=str(ARTIFACTS / "dataset-version-integrity-failed.png"), full_page=True)

    page.click("text=Retire this version")
    page.fill("#id_reason", "The stored file was altered after registration.")
    page.click("text=Retire v1")
    retired = page.wait_for_selector("#retired")
    assert "by alice: The stored file was altered after registration." in retired.inner_text()
    assert page.locator("text=Retire this version").count() == 0
    page.screenshot(path=str(ARTIFACTS / "dataset-version-retired.png"), full_page=True)
