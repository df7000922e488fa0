"""One review request in Chromium, from the audit page to the gate: the engineer requests a review and
submits it, a reviewer takes it into review, two committee members each log in, acknowledge the
INCONCLUSIVE comparisons, re-enter their password and vote; the gate then answers approved for a
pipeline's token. No console errors; the queue and the request page fit 1280 px."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests

from auditportal.accounts import services as account_services
from auditportal.accounts.models import Role
from auditportal.approvals.models import RequestState, ReviewRequest, ReviewVote
from tests.browser.conftest import ARTIFACTS, log_in
from tests.browser.test_dashboard_audits import drawn_figures, page_width, watch_console
from tests.factories import PASSWORD, PredictionAuditFactory, make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WIDTH = 1280
MODEL = "vendor-score:2.1"


def _gate(base_url: str, token: str) -> dict[str, Any]:
    response = requests.get(
        f"{base_url}/api/v1/gate/", params={"model": MODEL}, headers={"Authorization": f"Token {token}"}, timeout=10
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _switch_to(page: Any, base_url: str, username: str) -> None:
    """Log out (the login page's first submit button would be the header's "Log out") and in as another."""
    page.context.clear_cookies()
    log_in(page, base_url, username)


def _open_from_queue(page: Any, base_url: str, table: str, request_id: int) -> None:
    page.click("#nav-reviews")
    page.wait_for_url(f"{base_url}/approvals/")
    page.click(f"#{table} tr[data-request='{request_id}'] a")
    page.wait_for_url(f"{base_url}/approvals/{request_id}/")


def _vote(page: Any, *, password: str) -> None:
    page.check("#vote-form input[name=choice][value=approve]")
    page.check("#vote-form input[name=acknowledge_all]")  # one box for every INCONCLUSIVE comparison
    page.fill("#vote-form textarea[name=reason]", "Fit for ranking applications for manual review.")
    page.fill("#vote-form input[name=password]", password)
    page.click("#cast-vote")
    page.wait_for_load_state()


def test_a_request_goes_from_the_audit_page_to_an_approval_the_gate_reports(
    page: Any, live_server: Any, dataset_storage: Path
) -> None:
    bob = make_user("bob", [Role.ML_ENGINEER])
    make_user("carol", [Role.REVIEWER])
    make_user("dave", [Role.ETHICS_COMMITTEE])
    make_user("frank", [Role.ETHICS_COMMITTEE])
    erin = make_user("erin", [Role.ADMIN])
    audit = PredictionAuditFactory.create(created_by=bob)
    document = audit.verdict_documents.get()
    errors = watch_console(page)
    base = live_server.url

    # The engineer requests a review from the audit page and submits the draft.
    log_in(page, base, "bob")
    page.goto(f"{base}/audits/predictions/{audit.pk}/")
    page.click("#request-review")
    page.wait_for_url(f"{base}/approvals/new/?audit={audit.pk}")
    assert page.is_checked(f"input[name=documents][value='{document.pk}']")
    page.fill("#id_title", "Vendor scoring model")
    page.fill("#id_intended_use", "Ranking applications for manual review")
    page.fill("#id_model_identifier", MODEL)
    page.click("form.request-form button[type=submit]")
    page.wait_for_url(f"{base}/approvals/*/")
    request = ReviewRequest.objects.get()
    assert page.inner_text("#request-state") == "Draft"
    page.click("#submit-request")
    page.wait_for_url(f"{base}/approvals/{request.pk}/")
    assert page.inner_text("#request-state") == "Submitted"

    # A reviewer finds it in the queue and takes it into review.
    _switch_to(page, base, "carol")
    _open_from_queue(page, base, "to-start", request.pk)
    page.click("#start-review")
    page.wait_for_url(f"{base}/approvals/{request.pk}/")
    assert page.inner_text("#request-state") == "In review"

    # The first committee member: the queue, the request page with the document and its plot.
    _switch_to(page, base, "dave")
    page.click("#nav-reviews")
    page.wait_for_url(f"{base}/approvals/")
    assert page.is_visible(f"#to-vote tr[data-request='{request.pk}']")
    assert page_width(page) <= WIDTH
    page.screenshot(path=str(ARTIFACTS / "approvals-queue.png"), full_page=True)
    page.click(f"#to-vote tr[data-request='{request.pk}'] a")
    page.wait_for_url(f"{base}/approvals/{request.pk}/")
    assert drawn_figures(page, "#documents .figure") == 1
    assert page.inner_text(f"[data-document='{document.pk}'] [data-sha256]") == document.sha256
    inconclusive = page.query_selector_all("#findings table.inconclusive tr[data-finding]")
    assert inconclusive, "the audit of 12 rows has INCONCLUSIVE comparisons"
    assert len(page.query_selector_all("#vote-form input[name=acknowledged]")) == len(inconclusive)  # hidden
    assert len(page.query_selector_all("#vote-form input[name=acknowledge_all]")) == 1
    assert page_width(page) <= WIDTH
    page.screenshot(path=str(ARTIFACTS / "approvals-request.png"), full_page=True)

    # A wrong password signs nothing, and the address bar stays on the request page; the right one
    # casts the vote.
    _vote(page, password="not-my-password")
    page.wait_for_url(f"{base}/approvals/{request.pk}/#vote-form")
    assert "That password is not correct" in page.inner_text("#vote-form")
    assert page.input_value("#vote-form input[name=password]") == ""
    assert not ReviewVote.objects.exists()
    _vote(page, password=PASSWORD)
    page.wait_for_url(f"{base}/approvals/{request.pk}/#votes")
    assert page.inner_text("#tally [data-count=approve]") == "1"
    assert "Your current vote: Approve" in page.inner_text("#my-vote")

    # The second committee member's vote meets the quorum.
    _switch_to(page, base, "frank")
    _open_from_queue(page, base, "to-vote", request.pk)
    _vote(page, password=PASSWORD)
    page.wait_for_url(f"{base}/approvals/{request.pk}/#votes")
    assert page.inner_text("#request-state") == "Approved"
    assert "Approved" in page.inner_text("#decision-banner")
    assert "It decided the request: approved." in page.inner_text("body")
    assert "reload" not in page.inner_text("#reports").lower()
    assert page_width(page) <= WIDTH
    page.screenshot(path=str(ARTIFACTS / "approvals-approved.png"), full_page=True)

    request.refresh_from_db()
    assert request.state == RequestState.APPROVED
    assert sorted(ReviewVote.objects.values_list("voter__username", flat=True)) == ["dave", "frank"]
    issued = account_services.api_token_create(user=erin, account="deploy-bot", name="release pipeline", days=30)
    answer = _gate(base, issued.secret)
    assert answer["approved"] is True
    assert answer["request"] == request.pk
    assert answer["document_sha256"] == [document.sha256]
    assert errors == []
