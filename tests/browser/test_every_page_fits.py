"""Every page kind in Chromium at a phone's width (390 px) and a laptop's (1280 px), as a user who may
see it: no page is wider than the window, nothing the Content-Security-Policy refuses and no console
error; a full-page screenshot of each under test-artifacts/browser/pages/<route>-<width>.png (with
`make screenshots`).

The pages are the URLconf's routes (tests/security/routes.py), so a page added tomorrow is visited
without anyone listing it; each is asked for as the first user class the authorization matrix
(tests/security/matrix.py) answers 200 for a GET, in the world it is built against (world.py). What is
not an HTML page (a .json, .csv, .pdf or .pem, the API's schema) is skipped by its Content-Type, and
routes the matrix answers no GET with 200 for (a POST-only action, a redirect) are never visited."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import Role
from auditportal.approvals.models import ReviewRequest
from auditportal.audits.models import PredictionAudit
from auditportal.datasets.models import Dataset, DatasetVersion, StagedUpload
from auditportal.experiments.ingest import trial_metrics_ingest
from auditportal.experiments.models import Experiment
from auditportal.fairness.files.metricsfile import MetricRecord
from tests.browser.conftest import ARTIFACTS, log_in
from tests.factories import make_user
from tests.security import matrix
from tests.security.routes import Route, fill, url_routes
from tests.security.world import USERNAMES, World, build_world

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]

WIDTHS = (390, 1280)
PAGES = ARTIFACTS / "pages"
# Who asks for a page: the first of these the matrix answers 200, so that a page is seen with the most
# it shows (an engineer sees a trial's log tail; a committee member the vote forms).
PREFERENCE = ("eng", "committee", "steward", "reviewer", "admin", "norole", "anon", "steward2", "eng2", "super")
CHOSEN = {"login": "anon", "policies:page": "admin", "approvals:request": "committee"}
# Django's admin site is Django's own (its templates and styles, responsive by themselves) and for
# staff only; everything else in the URLconf is the portal's.
SKIPPED_PREFIXES = ("admin/",)
# The pages issue 27 names: visiting fewer than these means the route walk went wrong.
REQUIRED = {
    "home",
    "login",
    "datasets:version",
    "experiments:detail",
    "audits:prediction",
    "evidence:document",
    "approvals:queue",
    "approvals:request",
    "reports:list",
    "reports:detail",
    "policies:page",
    "api-docs",
}
# A name with no space to break at (a file name, a dataset's name, a title pasted from elsewhere).
LONG = "credit-applications_" + "0123456789abcdef" * 14
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

WATCH = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) =>
  window.__violations.push(
    `${e.violatedDirective} refused ${e.blockedURI || "inline"} at ${e.sourceFile}:${e.lineNumber}`));
"""
# Every figure drawn by plotly.js (an SVG) or given up on (its text says why).
FIGURES_SETTLED = """() => [...document.querySelectorAll('.figure')].every(
  f => f.querySelector('svg.main-svg') || f.textContent.trim())"""
# The element (or its text) reaching furthest right past the window, outside any box that scrolls or clips it.
WIDEST = r"""width => {
  const clipped = e => {
    for (let a = e.parentElement; a && a !== document.documentElement; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== 'visible') return true;
    }
    return false;
  };
  let widest = null, right = width + 0.5;
  for (const e of document.body.querySelectorAll('*')) {
    // Its box, or what spills out of it (a long word runs past a box that keeps its width).
    const box = e.getBoundingClientRect();
    const spill = getComputedStyle(e).overflowX === 'visible' ? box.left + e.scrollWidth : 0;
    const edge = Math.max(box.right, spill);
    // At an equal edge the later element wins: the descendant the spill comes from, not its ancestors.
    if (edge >= right && !clipped(e)) { widest = e; right = edge; }
  }
  if (widest === null) return 'no single element (margins or a pseudo-element)';
  const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
    + (e.classList.length ? '.' + [...e.classList].join('.') : '');
  const path = [];
  for (let e = widest; e && e !== document.body && path.length < 4; e = e.parentElement) path.unshift(name(e));
  const text = widest.textContent.replace(/\s+/g, ' ').trim().slice(0, 60);
  return `${path.join(' > ')}, right edge at ${Math.round(right)} px: "${text}"`;
}"""
# After the window changes width: every figure drawn for its new width (static/js/figures.js's resize
# handler) and plotly's own resize of each finished, so that the screenshot shows the page as laid out.
FIGURES_FITTED = """async () => {
  const fitted = [...document.querySelectorAll('[data-figure-width]')].every(e => {
    const narrow = e.layout && e.layout.meta && e.layout.meta.narrow;
    return !narrow || e.getAttribute('data-figure-width') === (e.clientWidth < narrow.below_px ? 'narrow' : 'wide');
  });
  if (!fitted) return false;
  await Promise.all([...document.querySelectorAll('.js-plotly-plot')].map(e => window.Plotly.Plots.resize(e)));
  return true;
}"""
HEATMAP_RENDERING = """() => [...document.querySelectorAll('.js-plotly-plot .hm image')].map(
  i => [i.style.imageRendering, getComputedStyle(i).imageRendering])"""


def _worker_shares(world: World) -> None:
    """Two workers' group shares over forty steps, so that the experiment page draws its heatmap."""
    records = []
    for step in range(1, 41):
        swing = 0.01 * (step % 5 - 2)
        metrics: dict[str, float | None] = {"worker_share_spread/gender": abs(2 * swing)}
        for rank, sign in ((0, -1), (1, 1)):
            metrics[f"worker_share/gender/female/rank{rank}"] = 0.5 + sign * swing
            metrics[f"worker_share/gender/male/rank{rank}"] = 0.5 - sign * swing
        records.append(MetricRecord(kind="training", step=step, metrics=metrics))
    trial_metrics_ingest(trial=world.trial, records=records)


def _long_names(world: World) -> None:
    """Names without a space to break at, as long as their fields allow, where pages show them."""
    Dataset.objects.filter(pk=world.version.dataset_id).update(name=LONG[:120])
    DatasetVersion.objects.filter(pk=world.version.pk).update(original_name=LONG + ".csv")
    PredictionAudit.objects.filter(pk=world.audit.pk).update(original_name=LONG + ".csv")
    Experiment.objects.filter(pk=world.experiment.pk).update(name=LONG[:128])
    ReviewRequest.objects.filter(pk=world.request.pk).update(title=LONG[:200])
    StagedUpload.objects.filter(pk=world.staged.pk).update(original_name=LONG + ".csv", dataset_name=LONG[:120])


def _reader(route: Route) -> str | None:
    """The user class that asks for the page, or None when no GET of it is a page anyone gets."""
    row = matrix.expected(route.key, "GET")
    assert row is not None, f"{route.key} is not in tests/security/matrix.py: add its row"
    readers = [user for user in PREFERENCE if str(row.cells[user]) == "200"]
    chosen = CHOSEN.get(route.key)
    if chosen is not None:
        assert chosen in readers, f"{route.key}: the matrix does not let {chosen} read it"
        return chosen
    return readers[0] if readers else None


@pytest.fixture
def world(settings: SettingsWrapper, tmp_path: Path) -> World:
    settings.DATASET_STORAGE_DIR = tmp_path / "store"
    settings.SHARD_DIR = tmp_path / "shards"
    settings.EXPERIMENT_RUN_DIR = tmp_path / "runs"
    settings.REPORT_STORAGE_DIR = tmp_path / "reports"
    settings.FILE_UPLOAD_TEMP_DIR = str(tmp_path / "uploads")
    for folder in ("uploads", "scratch", "runs"):
        (tmp_path / folder).mkdir()
    built = build_world(tmp_path / "runs", tmp_path / "scratch")
    _worker_shares(built)
    _long_names(built)
    return built


class Visitor:
    """One browser context per user class, logged in once; the page's console errors and CSP
    violations collected per visit."""

    def __init__(self, browser: Any, base_url: str) -> None:
        self.browser = browser
        self.base_url = base_url
        self.pages: dict[str, Any] = {}
        self.errors: list[str] = []

    def page_of(self, user_class: str) -> Any:
        if user_class not in self.pages:
            context = self.browser.new_context(viewport={"width": WIDTHS[-1], "height": 900})
            page = context.new_page()
            page.set_default_timeout(15_000)
            page.add_init_script(WATCH)
            page.on("console", lambda message: self.errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: self.errors.append(str(error)))
            if user_class != "anon":
                log_in(page, self.base_url, USERNAMES[user_class])
            self.pages[user_class] = page
        return self.pages[user_class]

    def close(self) -> None:
        for page in self.pages.values():
            page.context.close()


@pytest.fixture
def visitor(page: Any, live_server: Any) -> Iterator[Visitor]:
    opened = Visitor(page.context.browser, live_server.url)
    try:
        yield opened
    finally:
        opened.close()


def _is_html(page: Any, url: str) -> bool:
    """Whether the URL answers a browser's GET with an HTML page (asked with the page's cookies): a
    whole document, not a fragment a page fetches to swap in (the experiment page's live sections)."""
    response = page.request.get(url, headers={"Accept": BROWSER_ACCEPT}, max_redirects=0)
    content_type = str(response.headers.get("content-type", ""))
    if response.status != 200 or not content_type.startswith("text/html"):
        return False
    return str(response.text()).lstrip()[:15].lower() == "<!doctype html>"


def test_every_page_fits_a_phone_and_a_laptop_without_a_csp_violation_or_console_error(
    world: World, visitor: Visitor, live_server: Any
) -> None:
    PAGES.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    visited: set[str] = set()
    skipped: list[str] = []
    for route in url_routes():
        if route.pattern.startswith(SKIPPED_PREFIXES):
            continue
        reader = _reader(route)
        if reader is None:
            continue
        page = visitor.page_of(reader)
        url = live_server.url + fill(route, world.kwargs)
        if not _is_html(page, url):
            skipped.append(route.key)
            continue
        visited.add(route.key)
        # One load per page, at the phone's width first; then the window widens to the laptop's (the
        # server renders the same page for both; the figures relay out as they do when a user widens it).
        visitor.errors.clear()
        page.set_viewport_size({"width": WIDTHS[0], "height": 900})
        # goto waits for the load event; what a page fetches after it is its figures' data, which
        # FIGURES_SETTLED waits for (drawn, or the reason given). Waiting for the network to be idle
        # besides cost half a second a page and found nothing more.
        page.goto(url)
        page.wait_for_function(FIGURES_SETTLED)
        for width in WIDTHS:
            label = f"{route.key} at {width} px as {reader}"
            if width != WIDTHS[0]:
                page.set_viewport_size({"width": width, "height": 900})
                page.wait_for_function(FIGURES_FITTED)
            page.screenshot(path=str(PAGES / f"{route.key.replace(':', '-')}-{width}.png"), full_page=True)
            scroll_width = int(page.evaluate("document.documentElement.scrollWidth"))
            if scroll_width > width:
                problems.append(f"{label}: {scroll_width} px wide; widest: {page.evaluate(WIDEST, width)}")
            problems.extend(f"{label}: CSP: {found}" for found in page.evaluate("window.__violations"))
            problems.extend(f"{label}: console: {error}" for error in visitor.errors)
            visitor.errors.clear()
            page.evaluate("window.__violations = []")
            if route.key == "experiments:detail":
                # The worker-share heatmap's cells stay sharp: its image-rendering applied, not refused.
                rendering = page.evaluate(HEATMAP_RENDERING)
                if not rendering or any(
                    inline != "pixelated" or computed != "pixelated" for inline, computed in rendering
                ):
                    problems.append(f"{label}: heatmap image-rendering (inline, computed): {rendering}")

    assert visited >= REQUIRED, f"not visited: {sorted(REQUIRED - visited)} (skipped as not an HTML page: {skipped})"
    assert not problems, "\n".join(problems)


def test_the_menu_folds_behind_its_button_on_a_phone_and_shows_in_full_on_a_laptop(page: Any, live_server: Any) -> None:
    make_user("alice", [Role.DATA_STEWARD, Role.ML_ENGINEER])
    log_in(page, live_server.url, "alice")
    links = page.locator(".topbar nav a")
    toggle = page.locator(".topbar .menu-toggle")

    assert toggle.is_hidden()
    assert links.count() == sum(link.is_visible() for link in links.all()) >= 5

    page.set_viewport_size({"width": 390, "height": 800})
    assert toggle.is_visible()
    assert toggle.get_attribute("aria-expanded") == "false"
    assert not any(link.is_visible() for link in links.all())
    assert page.locator(".topbar .who").is_hidden()

    toggle.click()
    assert toggle.get_attribute("aria-expanded") == "true"
    assert all(link.is_visible() for link in links.all())
    # Every link is a row inside the window, tall enough to tap.
    for link in links.all():
        box = link.bounding_box()
        assert box is not None
        assert box["x"] >= 0
        assert box["x"] + box["width"] <= 390
        assert box["height"] >= 40
    page.screenshot(path=str(ARTIFACTS / "menu-open-390.png"))
    page.keyboard.press("Escape")
    assert toggle.get_attribute("aria-expanded") == "false"
    assert not any(link.is_visible() for link in links.all())
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_without_javascript_the_menu_stays_open_on_a_phone(page: Any, live_server: Any) -> None:
    make_user("alice", [Role.DATA_STEWARD])
    log_in(page, live_server.url, "alice")
    context = page.context.browser.new_context(
        viewport={"width": 390, "height": 800}, java_script_enabled=False, storage_state=page.context.storage_state()
    )
    try:
        bare = context.new_page()
        bare.goto(f"{live_server.url}/")
        assert bare.locator(".topbar .menu-toggle").is_hidden()
        assert all(link.is_visible() for link in bare.locator(".topbar nav a").all())
    finally:
        context.close()
