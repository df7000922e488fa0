from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections

from tests.factories import PASSWORD

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


# Chromiums at a time under xdist (`make test`): the browser tests' modules are dealt in turn to this
# many groups, each run by one worker (--dist loadgroup). More would share the two cores with the rest
# of the suite and a page's 15-second wait could run out; one alone made the browser tests the
# suite's longest line (eight minutes of a ten-minute run).
BROWSER_GROUPS = 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    browser_items = [item for item in items if item.get_closest_marker("browser") is not None]
    modules = sorted({item.nodeid.split("::")[0] for item in browser_items})
    for item in browser_items:
        group = modules.index(item.nodeid.split("::")[0]) % BROWSER_GROUPS + 1
        item.add_marker(pytest.mark.xdist_group(f"browser-{group}"))


def chromium_path() -> str | None:
    for candidate in (os.environ.get("CHROMIUM_PATH"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def require_system_tool(reason: str) -> None:
    """Skip locally, but fail in CI, where .ci/run installs every system package the tests need."""
    if os.environ.get("PORTAL_REQUIRE_SYSTEM_TOOLS"):
        pytest.fail(f"{reason} (PORTAL_REQUIRE_SYSTEM_TOOLS is set, so this cannot be skipped)")
    pytest.skip(reason)


@pytest.fixture
def page(live_server: object) -> Iterator[object]:
    executable = chromium_path()
    if executable is None:
        require_system_tool("Debian's chromium is not installed (apt-get install chromium)")
    # Playwright's sync API runs an event loop in this thread; the ORM calls made by the test itself
    # (fixtures, assertions) are synchronous and safe here.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(15_000)
        try:
            yield page
        finally:
            context.close()
            browser.close()
            # While Playwright's event loop runs in this thread, Django gives the test's ORM calls a
            # connection of their own (asgiref's per-context storage, which nothing cleans up): close
            # it here, or it outlives the test and PostgreSQL refuses to drop the test database.
            connections.close_all()


def log_in(page: Any, base_url: str, username: str) -> None:
    """Sign in through the login form (as a user made with the factories' password) and land on the home page."""
    page.goto(f"{base_url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/")
