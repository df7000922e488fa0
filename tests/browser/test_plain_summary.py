"""The audit and verdict document pages open with their plain-language paragraph, readable at 1280 and
390 px: first on the page, within the window, the method folded below; screenshots kept as artifacts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from auditportal.accounts.models import Role
from auditportal.fairness.documents.plain import document_plain_summary
from auditportal.fairness.statistics.audit import AuditSpec
from tests.browser.conftest import ARTIFACTS, log_in
from tests.browser.test_dashboard_audits import predictions_csv, watch_console
from tests.factories import PredictionAuditFactory, make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LONG_NAME = "a-group-name-that-goes-on-" * 6  # one word of 156 characters: it must wrap, not widen the page


def _csv() -> str:
    # The dashboard's file (a FAIL, a small INCONCLUSIVE group, a race named <c>) and a group whose name
    # is one long word.
    rows = [f"1,1,{LONG_NAME},a"] * 3 + [f"1,0,{LONG_NAME},a"] * 2 + [f"0,0,{LONG_NAME},b"] * 4
    return predictions_csv() + "\n".join(rows) + "\n"


def _check(page: Any, width: int, name: str) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.reload()
    summary = page.locator("#plain-summary")
    summary.wait_for()
    box = summary.bounding_box()
    assert box is not None
    assert box["x"] >= 0
    assert box["x"] + box["width"] <= width  # the paragraph fits the window, long names wrapped
    assert page.eval_on_selector("#plain-summary p", "p => p.scrollWidth <= p.clientWidth")
    page.screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"), full_page=False)
    page.screenshot(path=str(ARTIFACTS / f"{name}-{width}-full.png"), full_page=True)


def test_the_audit_and_document_pages_open_with_a_readable_plain_language_paragraph(
    page: Any, live_server: Any, dataset_storage: Path
) -> None:
    bob = make_user("bob", [Role.ML_ENGINEER])
    make_user("carol", [Role.REVIEWER])
    audit = PredictionAuditFactory.create(
        created_by=bob, content=_csv(), spec=AuditSpec(label="label", prediction="pred", attributes=("gender", "race"))
    )
    summary = document_plain_summary(audit.result)
    assert "shows an unfair gap" in summary.outcome or "show an unfair gap" in summary.outcome
    assert "cannot be decided yet" in summary.undecided

    errors = watch_console(page)
    log_in(page, live_server.url, "carol")
    page.goto(f"{live_server.url}/audits/predictions/{audit.pk}/")
    assert page.inner_text("#plain-summary p") == summary.text
    assert "<c>" in page.inner_text("#plain-summary p") or "<c>" not in summary.text  # shown as text, not markup
    # First on the page below the heading, the method folded (closed) below the facts.
    assert page.locator("#plain-summary").bounding_box()["y"] < page.locator("dl.facts").bounding_box()["y"]  # type: ignore[index]
    assert page.eval_on_selector("details.method", "d => !d.open")
    assert not page.locator("details.method .legend").first.is_visible()
    for width in (1280, 390):
        _check(page, width, "audit-plain-summary")

    document = audit.verdict_documents.get()
    page.goto(f"{live_server.url}/documents/{document.pk}/")
    assert page.inner_text("#plain-summary p") == document_plain_summary(document.document).text
    assert page.eval_on_selector("#document-source", "d => !d.open")
    for width in (1280, 390):
        _check(page, width, "document-plain-summary")
    assert errors == []
