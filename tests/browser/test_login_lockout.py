from __future__ import annotations

from typing import Any

import pytest

from auditportal.accounts.models import Role
from tests.browser.conftest import ARTIFACTS
from tests.factories import PASSWORD, make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_after_five_wrong_passwords_the_login_page_says_it_is_locked_and_refuses_the_right_one(
    page: Any, live_server: Any
) -> None:
    make_user("alice", [Role.DATA_STEWARD])

    def log_in_with(password: str) -> None:
        page.goto(f"{live_server.url}/login/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", password)
        page.click("button[type=submit]")

    for n in range(4):
        log_in_with(f"wrong-{n}")
        assert "did not match" in page.inner_text("p.error")
    log_in_with("wrong-5")
    assert page.locator("#locked-out").is_visible()
    log_in_with(PASSWORD)
    text = page.inner_text("#locked-out")
    assert "5 wrong passwords for alice: logins are refused for 15 minutes" in text
    assert page.url == f"{live_server.url}/login/"
    page.screenshot(path=str(ARTIFACTS / "login-locked-out.png"), full_page=True)
