"""The prediction audit, verdict document and dataset version pages' figures in Chromium at 1280 px:
drawn, without console errors, and without the page growing wider than the window."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from auditportal.accounts.models import Role
from auditportal.fairness.statistics.audit import AuditSpec
from tests.browser.conftest import ARTIFACTS, log_in
from tests.factories import DemoDatasetVersionFactory, PredictionAuditFactory, make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WIDTH = 1280


def predictions_csv() -> str:
    """Gender (three groups, one small) by race (three groups), with unknown values: men's recall 0.85
    against women's 0.70 on thousands of rows (a FAIL), a small non-binary group (INCONCLUSIVE), and
    a race group <c> whose name would be markup if plotly.js read it as such."""
    rng = np.random.default_rng(14)
    lines = ["label,pred,gender,race"]
    for gender, rows, recall in (("female", 3000, 0.70), ("male", 5000, 0.85), ("non-binary", 80, 0.80)):
        race = rng.choice(["a", "b", "<c>", ""], size=rows, p=[0.55, 0.3, 0.12, 0.03])
        label = rng.random(rows) < 0.5
        prediction = np.where(label, rng.random(rows) < recall, rng.random(rows) < 0.1)
        lines += [f"{int(y)},{int(p)},{gender},{r}" for y, p, r in zip(label, prediction, race, strict=True)]
    return "\n".join(lines) + "\n"


def watch_console(page: Any) -> list[str]:
    """Console errors and uncaught exceptions, collected as they happen."""
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


def page_width(page: Any) -> int:
    return int(page.evaluate("document.documentElement.scrollWidth"))


def drawn_figures(page: Any, selector: str) -> int:
    """Wait until every figure under ``selector`` has an SVG from plotly.js, and count them."""
    page.wait_for_function(
        """selector => {
            const figures = document.querySelectorAll(selector);
            return figures.length > 0 && [...figures].every(f => f.querySelector('svg.main-svg'));
        }""",
        arg=selector,
    )
    return int(page.eval_on_selector_all(selector, "figures => figures.length"))


def test_the_audit_page_draws_a_forest_plot_of_every_comparison_and_fits_1280_px(
    page: Any, live_server: Any, dataset_storage: Path
) -> None:
    bob = make_user("bob", [Role.ML_ENGINEER])
    make_user("carol", [Role.REVIEWER])
    audit = PredictionAuditFactory.create(
        created_by=bob,
        content=predictions_csv(),
        spec=AuditSpec(label="label", prediction="pred", attributes=("gender", "race"), intersect=True),
    )
    comparisons = [c for section in audit.result["attributes"].values() for c in section["comparisons"]]
    verdicts = {c["verdict"] for c in comparisons}
    assert {"FAIL", "INCONCLUSIVE"} <= verdicts
    metrics = list(dict.fromkeys(c["metric"] for c in comparisons))

    errors = watch_console(page)
    log_in(page, live_server.url, "carol")
    page.goto(f"{live_server.url}/audits/predictions/{audit.pk}/")
    assert drawn_figures(page, "#forest .figure") == 1
    # One panel (x axis) per metric, one marker or "undefined" text per comparison.
    panels = page.eval_on_selector("#forest .figure", "f => f._fullLayout._subplots.cartesian.length")
    assert panels == len(metrics)
    points = page.eval_on_selector(
        "#forest .figure", "f => f._fullData.filter(t => t.mode !== 'text').reduce((n, t) => n + t.x.length, 0)"
    )
    undefined = page.eval_on_selector(
        "#forest .figure", "f => f._fullData.filter(t => t.mode === 'text').reduce((n, t) => n + t.x.length, 0)"
    )
    assert points + undefined == len(comparisons)
    # Tick labels come from the file; "<c>" is shown as written, not taken for markup.
    ticks = page.eval_on_selector_all("#forest .ytick text", "texts => texts.map(t => t.textContent)")
    assert "race: <c>" in ticks
    legend = page.eval_on_selector_all("#forest .legendtext", "texts => texts.map(t => t.textContent)")
    assert {"Fail", "Inconclusive"} <= set(legend)
    assert page_width(page) <= WIDTH
    # The tables are read, not scrolled: none is wider than its card.
    cut = page.eval_on_selector_all(
        "section.audit-table", "cards => cards.filter(c => c.scrollWidth > c.clientWidth).map(c => c.dataset.attribute)"
    )
    assert cut == []
    page.screenshot(path=str(ARTIFACTS / "dashboard-prediction-audit.png"), full_page=True)

    download = page.get_attribute("#download-comparisons", "href")
    assert download == f"/audits/predictions/{audit.pk}/comparisons.csv"

    document = audit.verdict_documents.get()
    page.goto(f"{live_server.url}/documents/{document.pk}/")
    assert drawn_figures(page, "#forest .figure") == 1
    assert page_width(page) <= WIDTH
    page.screenshot(path=str(ARTIFACTS / "dashboard-verdict-document.png"), full_page=True)
    assert errors == []


def test_the_dataset_version_page_draws_rows_and_positive_rates_per_attribute_and_intersection(
    page: Any, live_server: Any, dataset_storage: Path
) -> None:
    version = DemoDatasetVersionFactory.create(rows=4000)
    make_user("carol", [Role.REVIEWER])
    tables = version.group_summaries.values_list("attribute", flat=True).distinct().count()

    errors = watch_console(page)
    log_in(page, live_server.url, "carol")
    page.goto(f"{live_server.url}/datasets/versions/{version.pk}/")
    assert drawn_figures(page, "section.group-table .figure") == tables
    # The unknown bucket is a bar of its own, named on the axis.
    ticks = page.eval_on_selector_all(
        "section.group-table[data-attribute=gender] .ytick text", "texts => texts.map(t => t.textContent)"
    )
    assert "unknown" in ticks
    assert page_width(page) <= WIDTH
    page.screenshot(path=str(ARTIFACTS / "dashboard-dataset-version.png"), full_page=True)
    assert errors == []
