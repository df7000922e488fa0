from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any

import pytest

from auditportal.accounts.models import Role
from tests.browser.conftest import ARTIFACTS, log_in
from tests.factories import PredictionAuditFactory, make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_committee_member_opens_a_verdict_document_and_downloads_bytes_with_its_hash(
    page: Any, live_server: Any, dataset_storage: Path, tmp_path: Path
) -> None:
    bob = make_user("bob", [Role.ML_ENGINEER])
    make_user("dave", [Role.ETHICS_COMMITTEE])
    audit = PredictionAuditFactory.create(created_by=bob)
    document = audit.verdict_documents.get()

    log_in(page, live_server.url, "dave")
    page.goto(f"{live_server.url}/audits/predictions/{audit.pk}/")
    page.click(f"a.document-link[href='/documents/{document.pk}/']")
    page.wait_for_url(f"{live_server.url}/documents/{document.pk}/")
    assert page.inner_text("#document-sha256") == document.sha256
    assert page.locator("#verdict-summary tr[data-attribute=gender]").is_visible()
    # The JSON is folded below the verdicts (the page opens in plain words); one click unfolds it.
    assert not page.locator("pre.document-json").is_visible()
    page.click("#document-source > summary")
    assert '"kind": "prediction_audit"' in page.inner_text("pre.document-json")
    page.screenshot(path=str(ARTIFACTS / "verdict-document.png"), full_page=True)

    with page.expect_download() as download_info:
        page.click("#download-canonical")
    saved = tmp_path / "document.json"
    download_info.value.save_as(saved)
    assert hashlib.sha256(saved.read_bytes()).hexdigest() == document.sha256
    # What docs/verdict-documents.md tells a reader to run.
    printed = subprocess.run(["sha256sum", str(saved)], capture_output=True, text=True, check=True).stdout
    assert printed.split()[0] == document.sha256
