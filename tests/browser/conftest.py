from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections

from auditportal.reports.figures import HEADLESS_SHELL
from tests.factories import PASSWORD

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "browser"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


# Screenshots are for people to look at (no test reads them back), and taking them was a third of the
# browser tests' Chromium time (every_page_fits: 41 s of the machine's CPU with them, 25 s without).
# `make screenshots` (PORTAL_TEST_SCREENSHOTS=1) takes every one the tests ask for, under ARTIFACTS;
# otherwise a test's screenshot calls take nothing, and a browser test that fails gets a full-page
# screenshot of each page it had open, under ARTIFACTS/failed/, named in its report.
SCREENSHOTS = os.environ.get("PORTAL_TEST_SCREENSHOTS", "") not in ("", "0")
FAILED = ARTIFACTS / "failed"
# Playwright's own Page.screenshot, for the screenshots of a failure (kept by the fixture below).
_TAKE: list[Any] = []


def _not_taken(self: object, *args: object, **kwargs: object) -> bytes:
    return b""


@pytest.fixture(scope="session", autouse=True)
def _screenshots_on_request() -> Iterator[None]:
    from playwright.sync_api import ElementHandle, Locator, Page

    _TAKE.append(Page.screenshot)
    if SCREENSHOTS:
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        for kind in (Page, Locator, ElementHandle):
            patch.setattr(kind, "screenshot", _not_taken)
        yield


def _failure_screenshots(nodeid: str) -> list[str]:
    """A full-page screenshot of every page the browser has open; the paths written (or why not)."""
    take = _TAKE[0]
    taken: list[str] = []
    stem = re.sub(r"[^\w.-]+", "_", nodeid)[-120:]
    FAILED.mkdir(parents=True, exist_ok=True)
    pages = [page for context in CHROMIUM.browser.contexts for page in context.pages]
    for number, page in enumerate(pages, start=1):
        path = FAILED / f"{stem}-{number}.png"
        try:
            take(page, path=str(path), full_page=True)
        except Exception as error:  # a closed page or a crashed browser: say so, keep the report
            taken.append(f"{page.url}: no screenshot ({error})")
        else:
            taken.append(f"{page.url}: {path}")
    return taken


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    browser = CHROMIUM.browser
    if report.when != "teardown" and report.failed and _TAKE and browser is not None and browser.is_connected():
        report.sections.append(("screenshots of the open pages", "\n".join(_failure_screenshots(item.nodeid))))
    return report


# How often the pages that poll ask the server in the tests that use fast_polls (static/js reads
# window.PortalPollMs).
POLL_MS = 250

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


NO_CHROMIUM = "neither Debian's chromium-headless-shell nor its chromium is installed (apt-get install one)"


def chromium_path() -> str | None:
    """A Chromium on this machine: ``CHROMIUM_PATH``, else Debian's chromium-headless-shell, else its
    chromium. The browser tests drive it; kaleido (the reports' figures) starts the shell or chromium
    by itself (auditportal/reports/figures.py)."""
    for candidate in (
        os.environ.get("CHROMIUM_PATH"),
        str(HEADLESS_SHELL),
        "/usr/bin/chromium",
        shutil.which("chromium"),
    ):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def require_system_tool(reason: str) -> None:
    """Skip locally, but fail in CI, where .ci/run installs every system package the tests need."""
    if os.environ.get("PORTAL_REQUIRE_SYSTEM_TOOLS"):
        pytest.fail(f"{reason} (PORTAL_REQUIRE_SYSTEM_TOOLS is set, so this cannot be skipped)")
    pytest.skip(reason)


class Chromium:
    """One Playwright driver and one Chromium for a run of browser tests in a row, each test in a fresh
    browser context of its own (its own cookies, storage and cache: the isolation a new browser gave).
    Launching both for every test cost over a second of each test's wall time.

    Playwright's sync API marks its event loop as running in this thread (after each call). A test's
    fixtures set up before ``page`` and torn down after it ran without it, as when each test launched
    its own: they may call ``asyncio.run`` (a report's PDF signature), and their ORM calls use the
    thread's connections, not the per-context ones Django hands out while a loop runs. So between
    tests the loop is hidden (``asyncio._set_running_loop``, as Playwright itself sets it), and both
    stop as soon as the next test is not a browser test (pytest_runtest_teardown below)."""

    def __init__(self) -> None:
        self.playwright: Any = None
        self.browser: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def launched(self) -> Any:
        self.show()
        if self.browser is not None and not self.browser.is_connected():
            self.stop()  # a crashed Chromium is not handed to the next test
        if self.browser is None:
            executable = chromium_path()
            if executable is None:
                require_system_tool(NO_CHROMIUM)
            # The ORM calls made by the test itself (fixtures, assertions) while Playwright's loop runs
            # are synchronous and safe here.
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
            from playwright.sync_api import sync_playwright

            self.playwright = sync_playwright().start()
            self.loop = asyncio.get_running_loop()
            # The full browser needs its headless mode named; the headless shell has only one.
            args = CHROMIUM_FLAGS if executable == str(HEADLESS_SHELL) else ["--headless=new", *CHROMIUM_FLAGS]
            self.browser = self.playwright.chromium.launch(executable_path=executable, args=args)
        return self.browser

    def hide(self) -> None:
        """Between tests: the loop is not running in this thread (nothing runs it until the next call)."""
        if self.loop is not None:
            asyncio._set_running_loop(None)

    def show(self) -> None:
        """Before the next call: the dispatcher greenlet runs the loop inside run_forever()."""
        if self.loop is not None:
            asyncio._set_running_loop(self.loop)

    def stop(self) -> None:
        if self.playwright is None:
            return
        self.show()
        try:
            if self.browser.is_connected():
                self.browser.close()
        finally:
            self.playwright.stop()
            self.playwright = self.browser = self.loop = None
            asyncio._set_running_loop(None)


CHROMIUM = Chromium()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    try:
        return (yield)
    finally:
        if nextitem is None or "page" not in getattr(nextitem, "fixturenames", ()):
            CHROMIUM.stop()


# How long a login may take to land on the home page (see log_in).
LANDING_MS = 60_000


@pytest.fixture
def page(live_server: object) -> Iterator[object]:
    browser = CHROMIUM.launched()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)
        yield page
    finally:
        CHROMIUM.show()
        context.close()
        # While Playwright's event loop runs in this thread, Django gives the test's ORM calls a
        # connection of their own (asgiref's per-context storage, which nothing cleans up): close it
        # here, or it outlives the test and PostgreSQL refuses to drop the test database.
        connections.close_all()
        CHROMIUM.hide()


@pytest.fixture
def fast_polls(page: Any) -> None:
    """The pages that follow work in progress (an experiment, an upload, a comparison, a decision's
    report) ask the server every POLL_MS instead of every 1.5 to 30 s, in a test that waits for what it
    changed to show: a poll a second or two away was most of that wait. (Not for a test that waits for
    the network to be idle: a page asking four times a second never is.)"""
    page.context.add_init_script(f"window.PortalPollMs = {POLL_MS};")


def log_in(page: Any, base_url: str, username: str) -> None:
    """Sign in through the login form (as a user made with the factories' password) and land on the home page."""
    page.goto(f"{base_url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    # A login answers a redirect home; anything else (a refused form, a lockout) fails here with what
    # the page said. The wait is longer than an action's: under a full suite on two cores, a login can
    # meet a worker rendering a report and two Chromiums (CI once took more than 15 s to land home).
    with page.expect_response(
        lambda response: response.request.method == "POST" and response.url.endswith("/login/"), timeout=LANDING_MS
    ) as answered:
        page.click("button[type=submit]")
    response = answered.value
    assert response.status == 302, (
        f"logging in as {username!r} answered {response.status}, not a redirect home:\n{response.text()[:2000]}"
    )
    page.wait_for_url(f"{base_url}/", timeout=LANDING_MS)
