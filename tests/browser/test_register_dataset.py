from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from auditportal.accounts.models import Role
from auditportal.datasets.models import DatasetVersion
from tests.browser.conftest import ARTIFACTS, log_in
from tests.datasets.conftest import SMALL_CSV
from tests.factories import make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_steward_uploads_a_csv_and_sees_the_per_group_table(
    page: Any, live_server: Any, dataset_storage: Path, tmp_path: Path
) -> None:
    make_user("alice", [Role.DATA_STEWARD])
    csv_file = tmp_path / "loans.csv"
    csv_file.write_text(SMALL_CSV, encoding="utf-8")

    log_in(page, live_server.url, "alice")
    page.click("text=Register a dataset")

    page.fill("#id_name", "loans")
    page.set_input_files("#id_file", str(csv_file))
    page.click("#upload-form button[type=submit]")
    page.wait_for_selector("#declare-form")
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

    page.wait_for_selector("section.group-table[data-attribute=gender]")
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
