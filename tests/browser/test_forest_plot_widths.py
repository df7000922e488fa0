"""The forest plot on the three pages that draw it (a prediction audit, a verdict document, a review
request), in Chromium at a phone's width (390 px) and a laptop's (1280 px): no two of its texts (the
panels' titles, the tolerance label, the tick labels, the axis title, the legend) drawn over each
other, and none cut off at the figure's edge. Screenshots under
test-artifacts/browser/forest/<page>-<width>.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from auditportal.accounts.models import Role
from auditportal.approvals import services as approval_services
from auditportal.audits.models import PredictionAudit
from auditportal.evidence.models import VerdictDocument
from auditportal.evidence.selectors import verdict_document_of_audit
from auditportal.fairness.figures.screen import NARROW_BELOW_PX
from auditportal.fairness.statistics.audit import AuditSpec
from tests.browser.conftest import ARTIFACTS, log_in
from tests.factories import PredictionAuditFactory, make_user

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]

WIDTHS = (390, 1280)
SHOTS = ARTIFACTS / "forest"
# A group name longer than any axis has room for, and one that would be markup if read as such.
LONG_GROUP = "Native Hawaiian or Other Pacific Islander (self-described)"

# Every text of each forest plot on the page that must be read: the layout's title, the annotations
# (the panels' titles, the tolerance label), the tick labels, the axis titles and the legend's names,
# with their boxes on the page; and the box of the figure's SVG. Texts plotly.js hid (a tick label it
# had no room for) or left empty are not drawn, so not counted.
TEXTS = """figure => {
  const svg = figure.querySelector('svg.main-svg');
  const frame = svg.getBoundingClientRect();
  const kinds = {
    'title': '.gtitle', 'annotation': '.annotation-text', 'x tick': '.xtick text', 'y tick': '.ytick text',
    'axis title': 'text[class$="title"]:not(.gtitle)', 'legend': '.legendtext',
  };
  const texts = [];
  for (const [kind, selector] of Object.entries(kinds)) {
    for (const text of figure.querySelectorAll(selector)) {
      const box = text.getBoundingClientRect();
      const shown = getComputedStyle(text).display !== 'none' && getComputedStyle(text).visibility !== 'hidden';
      if (!shown || box.width === 0 || !text.textContent.trim()) continue;
      texts.push({kind, text: text.textContent.trim().slice(0, 50),
                  left: box.left, right: box.right, top: box.top, bottom: box.bottom});
    }
  }
  return {frame: {left: frame.left, right: frame.right, top: frame.top, bottom: frame.bottom}, texts};
}"""
SVG_HEIGHT = "f => f.querySelector('svg.main-svg').getBoundingClientRect().height"
# Boxes may touch: a text's box includes its font's line gap.
SLACK_PX = 1.0


def predictions_csv() -> str:
    """Gender (three groups, one small) by race (three groups, one with a long name, one with a name
    that would be markup): women's recall 0.70 against men's 0.85 on thousands of rows (a FAIL), a
    small non-binary group (INCONCLUSIVE)."""
    rng = np.random.default_rng(27)
    lines = ["label,pred,gender,race"]
    for gender, rows, recall in (("female", 3000, 0.70), ("male", 5000, 0.85), ("non-binary", 120, 0.80)):
        race = rng.choice(["a", "b", "<c>", LONG_GROUP], size=rows, p=[0.55, 0.25, 0.1, 0.1])
        label = rng.random(rows) < 0.5
        prediction = np.where(label, rng.random(rows) < recall, rng.random(rows) < 0.1)
        lines += [f"{int(y)},{int(p)},{gender},{r}" for y, p, r in zip(label, prediction, race, strict=True)]
    return "\n".join(lines) + "\n"


def overlaps(texts: list[dict[str, Any]]) -> list[str]:
    found = []
    for index, one in enumerate(texts):
        for other in texts[index + 1 :]:
            width = min(one["right"], other["right"]) - max(one["left"], other["left"])
            height = min(one["bottom"], other["bottom"]) - max(one["top"], other["top"])
            if width > SLACK_PX and height > SLACK_PX:
                found.append(f"{one['kind']} {one['text']!r} and {other['kind']} {other['text']!r}")
    return found


def clipped(frame: dict[str, float], texts: list[dict[str, Any]]) -> list[str]:
    return [
        f"{text['kind']} {text['text']!r} at {round(text['left'])}..{round(text['right'])} px"
        f" (the figure: {round(frame['left'])}..{round(frame['right'])} px)"
        for text in texts
        if text["left"] < frame["left"] - SLACK_PX
        or text["right"] > frame["right"] + SLACK_PX
        or text["top"] < frame["top"] - SLACK_PX
        or text["bottom"] > frame["bottom"] + SLACK_PX
    ]


def make_audit() -> tuple[PredictionAudit, VerdictDocument]:
    bob = make_user("bob", [Role.ML_ENGINEER])
    make_user("dave", [Role.ETHICS_COMMITTEE])
    audit = PredictionAuditFactory.create(
        created_by=bob,
        content=predictions_csv(),
        spec=AuditSpec(label="label", prediction="pred", attributes=("gender", "race"), intersect=True),
    )
    return audit, verdict_document_of_audit(audit=audit)


def watch_console(page: Any) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


def laid_out(page: Any, width: int, errors: list[str]) -> Any:
    """Wait until the page's first forest plot is drawn with the layout for ``width`` (static/js/
    figures.js) across its whole box, and return it."""
    expected = "narrow" if width < NARROW_BELOW_PX else "wide"
    try:
        page.wait_for_function(
            """expected => [...document.querySelectorAll('.forest-plot')].every(f =>
                f.dataset.figureWidth === expected
                && Math.abs(f.querySelector('svg.main-svg').getBoundingClientRect().width - f.clientWidth) < 1)""",
            arg=expected,
        )
    except Exception as timeout:
        state = page.evaluate(
            """() => [...document.querySelectorAll('.forest-plot')].map(f => [
                f.dataset.figureWidth, f.querySelector('svg.main-svg').getBoundingClientRect().width, f.clientWidth])"""
        )
        raise AssertionError(f"not laid out {expected} at {width} px: {state}; console: {errors}") from timeout
    return page.locator(".forest-plot").first


def problems_of(plot: Any, label: str) -> list[str]:
    drawn = plot.evaluate(TEXTS)
    kinds = {text["kind"] for text in drawn["texts"]}
    assert {"annotation", "x tick", "y tick", "axis title", "legend"} <= kinds, (label, kinds)
    return [f"{label}: overlap: {found}" for found in overlaps(drawn["texts"])] + [
        f"{label}: clipped: {found}" for found in clipped(drawn["frame"], drawn["texts"])
    ]


def test_the_forest_plot_reads_without_overlaps_or_clipping_at_390_and_1280_px(
    page: Any, live_server: Any, dataset_storage: Path
) -> None:
    audit, document = make_audit()
    request = approval_services.review_request_create(
        user=audit.created_by,
        title="Vendor scoring model",
        intended_use="Ranking applications",
        documents=[document],
        model_identifier="vendor-scoring-v1",
    )
    pages = {
        "prediction-audit": f"/audits/predictions/{audit.pk}/",
        "verdict-document": f"/documents/{document.pk}/",
        "review-request": f"/approvals/{request.pk}/",
    }

    errors = watch_console(page)
    log_in(page, live_server.url, "dave")
    SHOTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    for name, url in pages.items():
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(live_server.url + url)
            plot = laid_out(page, width, errors)
            plot.scroll_into_view_if_needed()
            page.locator("section.forest").first.screenshot(path=str(SHOTS / f"{name}-{width}.png"))
            page.screenshot(path=str(SHOTS / f"{name}-{width}-page.png"), full_page=True)
            problems += problems_of(plot, f"{name} at {width} px")
            if page.evaluate("document.documentElement.scrollWidth") > width:
                problems.append(f"{name} at {width} px: the page is wider than the window")
    assert not problems, "\n".join(problems)
    assert errors == []


def test_the_forest_plot_changes_layout_when_the_window_crosses_a_phones_width(
    page: Any, live_server: Any, dataset_storage: Path
) -> None:
    audit, _ = make_audit()
    errors = watch_console(page)
    log_in(page, live_server.url, "dave")
    page.goto(f"{live_server.url}/audits/predictions/{audit.pk}/")
    plot = laid_out(page, 1280, errors)
    wide_ticks = plot.evaluate("f => f.layout.yaxis.ticktext")
    height = plot.evaluate(SVG_HEIGHT)
    assert height > 2000  # 80 comparisons

    page.set_viewport_size({"width": 390, "height": 900})
    plot = laid_out(page, 390, errors)
    assert plot.evaluate("f => f.layout.yaxis.ticktext") != wide_ticks
    assert plot.evaluate(SVG_HEIGHT) == height  # plotly.js's resize keeps the figure's height
    problems = problems_of(plot, "narrowed to 390 px")
    # A comparison's hover, on a phone: drawn without a style attribute the policy refuses.
    point = page.locator(".forest-plot .scatterlayer .point").first
    point.scroll_into_view_if_needed()
    box = point.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_selector(".forest-plot .hoverlayer .hovertext")
    page.screenshot(path=str(SHOTS / "hover-390.png"))

    page.set_viewport_size({"width": 1280, "height": 900})
    plot = laid_out(page, 1280, errors)
    assert plot.evaluate("f => f.layout.yaxis.ticktext") == wide_ticks
    assert plot.evaluate(SVG_HEIGHT) == height
    problems += problems_of(plot, "widened to 1280 px")
    assert not problems, "\n".join(problems)
    assert errors == []
