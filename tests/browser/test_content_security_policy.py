"""The Content-Security-Policy in Chromium: every page's header is the policy the settings write, it allows
no inline script or style, and Django's admin pages (which test_every_page_fits leaves out) need nothing
it blocks. That the portal's own pages need nothing it blocks is test_every_page_fits' check, for every
route at both widths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from auditportal.accounts.models import Role
from auditportal.datasets import services as dataset_services
from auditportal.experiments.models import TrialState
from tests.browser.conftest import ARTIFACTS, log_in
from tests.datasets.conftest import SMALL_CSV
from tests.factories import (
    DemoDatasetVersionFactory,
    ExperimentFactory,
    TrialFactory,
    make_user,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WATCH = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) =>
  window.__violations.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`));
"""


def test_no_page_needs_anything_the_policy_blocks(page: Any, live_server: Any, dataset_storage: Path) -> None:
    steward = make_user("alice", [Role.DATA_STEWARD, Role.ML_ENGINEER])
    make_user("root", [Role.ADMIN]).__class__.objects.filter(username="root").update(is_staff=True, is_superuser=True)
    version = DemoDatasetVersionFactory.create(rows=400)
    experiment = ExperimentFactory.create(dataset_version=version, launched_by=steward, status="running", batches=100)
    TrialFactory.create(experiment=experiment, state=TrialState.RUNNING, steps_done=30, latest_step=25)
    upload = dataset_storage.parent / "in.csv"
    upload.write_text(SMALL_CSV, encoding="utf-8")
    staged = dataset_services.staged_upload_create(
        user=steward, source=upload, original_name="loans.csv", dataset_name="loans"
    )

    headers: list[str] = []

    def keep_header(response: Any) -> None:
        if response.request.resource_type == "document":
            headers.append(response.headers.get("content-security-policy", ""))

    page.on("response", keep_header)
    page.add_init_script(WATCH)
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)

    page.goto(f"{live_server.url}/login/")
    assert page.evaluate("window.__violations") == []
    log_in(page, live_server.url, "alice")
    visited = []
    for path in ("/", f"/experiments/{experiment.pk}/", f"/datasets/new/{staged.pk}/"):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
        visited.append((path, page.evaluate("window.__violations")))
    if "figure" in page.content():
        page.wait_for_selector(".figure-drawn")
    page.goto(f"{live_server.url}/experiments/{experiment.pk}/")
    page.wait_for_selector("#charts[data-version]")
    page.screenshot(path=str(ARTIFACTS / "csp-experiment.png"), full_page=True)
    # Bars are drawn from data attributes, not style attributes.
    assert page.locator('[data-field="bar"]').first.evaluate("e => e.style.width") == "30%"

    page.context.clear_cookies()
    log_in(page, live_server.url, "root")
    for path in ("/admin/login/", "/admin/", "/admin/accounts/user/"):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
        visited.append((path, page.evaluate("window.__violations")))

    assert [(path, found) for path, found in visited if found] == []
    expected = "; ".join(f"{d} {' '.join(s)}" for d, s in settings.CONTENT_SECURITY_POLICY.items())
    assert headers
    assert set(headers) == {expected}
    assert "unsafe-inline" not in expected
    assert [error for error in errors if "Content Security Policy" in error] == []
