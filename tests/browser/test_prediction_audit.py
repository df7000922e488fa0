from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from auditportal.accounts.models import Role
from auditportal.audits.models import PredictionAudit
from tests.browser.conftest import ARTIFACTS, log_in
from tests.factories import make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _predictions_csv(path: Path) -> None:
    rng = np.random.default_rng(7)
    lines = ["label,prediction,group"]
    # recall 0.90 for "a" and 0.60 for "b" over thousands of positives; "c" is a handful of rows
    for group, rows, recall in (("a", 4000, 0.9), ("b", 4000, 0.6), ("c", 24, 0.75)):
        label = rng.random(rows) < 0.5
        hit = rng.random(rows) < recall
        false_alarm = rng.random(rows) < 0.1
        prediction = np.where(label, hit, false_alarm)
        lines += [f"{int(y)},{int(p)},{group}" for y, p in zip(label, prediction, strict=True)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_a_reviewer_audits_uploaded_predictions_and_sees_the_verdicts(
    page: Any, live_server: Any, tmp_path: Path
) -> None:
    make_user("carol", [Role.REVIEWER])
    csv_file = tmp_path / "scores.csv"
    _predictions_csv(csv_file)

    log_in(page, live_server.url, "carol")
    page.goto(f"{live_server.url}/audits/predictions/new/")
    page.set_input_files("#id_file", str(csv_file))
    # The form reads the CSV header in the browser: the file's columns are offered for the label,
    # prediction and score fields, and as one checkbox per column for the attributes.
    page.wait_for_selector("#attribute-picker input[data-column=group]")
    offered = page.eval_on_selector_all("#audit-columns option", "options => options.map(o => o.value)")
    assert offered == ["label", "prediction", "group"]
    assert page.get_attribute("#id_label", "list") == "audit-columns"
    page.fill("#id_label", "label")
    page.dispatch_event("#id_label", "change")
    values = page.eval_on_selector_all("#audit-label-values option", "options => options.map(o => o.value)")
    assert values == ["0", "1"]
    page.fill("#id_prediction", "prediction")
    page.dispatch_event("#id_prediction", "change")
    assert page.is_disabled("#attribute-picker input[data-column=prediction]")  # taken as the output
    assert page.is_disabled("#attribute-picker input[data-column=label]")
    page.check("#attribute-picker input[data-column=group]")
    assert page.input_value("#id_attributes") == "group"
    page.screenshot(path=str(ARTIFACTS / "prediction-audit-form.png"), full_page=True)
    page.click("#audit-form button[type=submit]")

    page.wait_for_selector("section.audit-table[data-attribute=group]")
    page.screenshot(path=str(ARTIFACTS / "prediction-audit.png"), full_page=True)
    table = page.locator("section.audit-table[data-attribute=group]")
    b_recall = table.locator('tr[data-metric="tpr"][data-group="b"]')
    c_recall = table.locator('tr[data-metric="tpr"][data-group="c"]')
    assert "FAIL" in b_recall.inner_text()
    assert "INCONCLUSIVE" in c_recall.inner_text()
    audit = PredictionAudit.objects.get()
    assert audit.created_by.username == "carol"
    assert audit.result["attributes"]["group"]["reference"] in {"a", "b"}
