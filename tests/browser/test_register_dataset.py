from __future__ import annotations

import subprocess
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from auditportal.accounts.models import Role
from auditportal.datasets import services as dataset_services
from auditportal.datasets.models import DatasetVersion, StagedStatus, StagedUpload
from tests.browser.conftest import ARTIFACTS, log_in
from tests.datasets.conftest import SMALL_CSV
from tests.factories import make_user
from tests.worker import start_worker_fixture  # noqa: F401 (the start_worker fixture)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fast_polls"),
]

# A worker's first task waits for its start (a few seconds); the pages wait for it.
WORKER_WAIT_MS = 60_000


def test_a_steward_uploads_a_csv_and_the_worker_reads_and_registers_it_while_the_page_shows_progress(
    page: Any, live_server: Any, dataset_storage: Path, tmp_path: Path, start_worker: Callable[..., Any]
) -> None:
    make_user("alice", [Role.DATA_STEWARD])
    csv_file = tmp_path / "loans.csv"
    csv_file.write_text(SMALL_CSV, encoding="utf-8")

    log_in(page, live_server.url, "alice")
    page.click("text=Register a dataset")
    page.fill("#id_name", "loans")
    page.set_input_files("#id_file", str(csv_file))
    page.click("#upload-form button[type=submit]")

    # No worker yet: the page says the upload waits for one, and keeps asking.
    page.wait_for_selector('#staged[data-status="profiling"]')
    assert page.inner_text('[data-field="progress"]') == "Waiting for a worker to start"
    page.wait_for_function("() => document.querySelector('[data-field=\"elapsed\"]').textContent.startsWith('for ')")
    page.screenshot(path=str(ARTIFACTS / "register-dataset-waiting.png"), full_page=True)
    assert StagedUpload.objects.get().status == StagedStatus.PROFILING

    worker: subprocess.Popen[bytes] = start_worker()
    # The worker profiles the file; the page turns into the declaration form by itself.
    page.wait_for_selector("#declare-form", timeout=WORKER_WAIT_MS)
    assert "female" in page.inner_text("#profile")

    page.select_option("#id_label", "approved")
    # The page offers the label's values and guesses the positive one for a 0/1 label.
    assert page.input_value("#id_positive") == "1"
    assert page.locator("#positive-values option").count() == 2
    page.screenshot(path=str(ARTIFACTS / "register-dataset-declare.png"), full_page=True)
    page.check("input[name=attributes][value=gender]")
    page.check("input[name=attributes][value=age_group]")
    page.check("#id_confirm_groups")
    page.click("#declare-form button[type=submit]")

    page.wait_for_selector("section.group-table[data-attribute=gender]", timeout=WORKER_WAIT_MS)
    assert "Registered loans v1 (8 rows)." in page.inner_text("ul.messages")
    page.screenshot(path=str(ARTIFACTS / "register-dataset.png"), full_page=True)
    gender_rows = page.locator("section.group-table[data-attribute=gender] tbody tr")
    cells = [gender_rows.nth(i).locator("td").all_inner_texts() for i in range(gender_rows.count())]
    by_group = {row[0]: row for row in cells}
    assert by_group["female"][1:4] == ["3", "37.5%", "2"]
    assert by_group["unknown"][1] == "2"
    assert page.locator("section.group-table[data-attribute='gender&age_group']").count() == 1

    version = DatasetVersion.objects.get()
    assert version.dataset.name == "loans"
    assert version.path.read_text(encoding="utf-8") == SMALL_CSV
    assert StagedUpload.objects.get().status == StagedStatus.REGISTERED
    assert worker.poll() is None


def test_a_declaration_the_worker_refuses_brings_the_form_back_with_the_row_and_column(
    page: Any, live_server: Any, dataset_storage: Path, tmp_path: Path, start_worker: Callable[..., Any]
) -> None:
    make_user("alice", [Role.DATA_STEWARD])
    start_worker()
    csv_file = tmp_path / "loans.csv"
    # A value far longer than a group name may be, in row 7 of gender.
    csv_file.write_text(SMALL_CSV.replace("west,unknown", "west," + "g" * 300), encoding="utf-8")

    log_in(page, live_server.url, "alice")
    page.goto(f"{live_server.url}/datasets/new/")
    page.fill("#id_name", "loans")
    page.set_input_files("#id_file", str(csv_file))
    page.click("#upload-form button[type=submit]")
    page.wait_for_selector("#declare-form", timeout=WORKER_WAIT_MS)
    page.select_option("#id_label", "approved")
    page.check("input[name=attributes][value=gender]")
    page.check("#id_confirm_groups")
    page.click("#declare-form button[type=submit]")

    page.wait_for_selector("#declare-form", state="detached", timeout=WORKER_WAIT_MS)  # the waiting page first
    page.wait_for_selector("#declare-form", timeout=WORKER_WAIT_MS)  # then the form again
    error = page.inner_text("div.error[role=alert]")
    assert error.startswith("loans.csv, row 6, column 'gender': the value 'ggg")
    # The declaration is shown again as it was submitted.
    assert page.input_value("#id_positive") == "1"
    assert page.is_checked("input[name=attributes][value=gender]")
    page.screenshot(path=str(ARTIFACTS / "register-dataset-refused.png"), full_page=True)
    assert not DatasetVersion.objects.exists()


def test_the_waiting_page_says_when_no_worker_takes_the_upload_and_the_failure_page_says_why(
    page: Any, live_server: Any, dataset_storage: Path
) -> None:
    alice = make_user("alice", [Role.DATA_STEWARD])
    source = dataset_storage.parent / "in.csv"
    source.write_text(SMALL_CSV, encoding="utf-8")
    staged = dataset_services.staged_upload_create(
        user=alice, source=source, original_name="loans.csv", dataset_name="loans"
    )
    # Declared, and queued 40 seconds ago for a worker that never came.
    StagedUpload.objects.filter(pk=staged.pk).update(
        status=StagedStatus.REGISTERING,
        declaration={"label": "approved", "positive": "1", "attributes": ["gender", "age_group"]},
        progress_at=timezone.now() - timedelta(seconds=40),
    )
    log_in(page, live_server.url, "alice")
    page.goto(f"{live_server.url}/datasets/new/{staged.pk}/")
    page.wait_for_selector("#no-worker", state="visible")
    assert page.inner_text('[data-field="elapsed"]').startswith("for 4")
    assert page.inner_text("dl.declared").split("\n")[:2] == ["Label", "approved, positive value 1"]
    page.screenshot(path=str(ARTIFACTS / "register-dataset-no-worker.png"), full_page=True)

    # The worker reports a step: the page shows it without a reload, and the hint goes.
    StagedUpload.objects.filter(pk=staged.pk).update(
        progress=dataset_services.REGISTER_STEP_INSPECT, progress_at=timezone.now()
    )
    page.wait_for_function(
        "text => document.querySelector('[data-field=\"progress\"]').textContent === text",
        arg=dataset_services.REGISTER_STEP_INSPECT,
    )
    page.wait_for_selector("#no-worker", state="hidden")
    page.screenshot(path=str(ARTIFACTS / "register-dataset-registering.png"), full_page=True)

    # A file the worker could not read.
    StagedUpload.objects.filter(pk=staged.pk).update(
        status=StagedStatus.FAILED,
        error="loans.csv, row 3, column 'gender': byte 0xE4 is not valid UTF-8; the file is not UTF-8 (e.g. Latin-1): "
        "save it as UTF-8",
    )
    page.wait_for_selector("#staged-error")  # the page reloads by itself when the status changes
    assert "row 3, column 'gender'" in page.inner_text("#staged-error")
    page.screenshot(path=str(ARTIFACTS / "register-dataset-failed.png"), full_page=True)
    page.goto(f"{live_server.url}/")
    assert "Could not be read" in page.inner_text("#staged-uploads")
    page.screenshot(path=str(ARTIFACTS / "datasets-home-uploads.png"), full_page=True)
