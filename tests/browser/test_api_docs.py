"""The API page in Chromium: Swagger UI from static files lists every operation under a strict
Content-Security-Policy (no inline script or style), fits 1280 px, and "Try it out" works with the
session and the CSRF token."""

from __future__ import annotations

from typing import Any

import pytest

from auditportal.accounts.models import Role
from auditportal.policies.models import FairnessPolicy
from tests.api.schemas import portal_schema
from tests.browser.conftest import ARTIFACTS, log_in
from tests.browser.test_dashboard_audits import page_width, watch_console
from tests.factories import make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# What the portal's production policy allows (issue 18): its own files only, nothing inline.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)


def with_csp(page: Any) -> None:
    def add_header(route: Any) -> None:
        response = route.fetch(max_redirects=0)
        route.fulfill(response=response, headers={**response.headers, "content-security-policy": CSP})

    page.route("**/*", add_header)


def test_the_api_page_lists_every_operation_under_a_strict_csp_and_tries_one_with_the_session(
    page: Any, live_server: Any
) -> None:
    make_user("erin", [Role.ADMIN])
    errors = watch_console(page)
    with_csp(page)
    log_in(page, live_server.url, "erin")
    page.click("nav >> text=API")
    page.wait_for_url(f"{live_server.url}/api/v1/docs/")
    page.wait_for_selector("#swagger-ui .opblock")
    operations = sum(len(item) for item in portal_schema()["paths"].values())
    assert page.locator("#swagger-ui .opblock").count() == operations
    assert page_width(page) <= 1280
    page.screenshot(path=str(ARTIFACTS / "api-docs.png"))

    # The administrator creates the next policy version from the page: a POST with the CSRF token.
    block = page.locator("#operations-policies-policy_post")
    block.locator(".opblock-summary").click()
    block.locator("button.try-out__btn").click()
    block.locator("textarea.body-param__text").fill('{"reason": "Tried from the API page", "tolerance": 0.04}')
    block.locator("button.execute").click()
    block.locator(".live-responses-table tbody .response-col_status").first.wait_for()
    assert block.locator(".live-responses-table tbody .response-col_status").first.inner_text().strip() == "201"
    policy = FairnessPolicy.objects.order_by("-version").first()
    assert policy is not None
    assert (policy.version, policy.reason, policy.tolerance) == (2, "Tried from the API page", 0.04)
    page.screenshot(path=str(ARTIFACTS / "api-docs-try-it-out.png"), full_page=False)
    assert [e for e in errors if "Content Security Policy" in e or "Refused" in e] == []
    assert errors == []
