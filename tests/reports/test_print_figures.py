"""The report's figures for paper (docs/reports.md, "Figures on paper"): the forest plot and the recall
figure cut into panels of one metric and at most ROWS_PER_PANEL rows, rows and text of the stated size
once printed, every figure's fonts raised, each figure within a page. Built from the figures' JSON; the
rendered PDF is measured in test_trial_report_pages.py."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np
import plotly.graph_objects as go
import pytest

from auditportal.fairness.documents.findings import document_attributes
from auditportal.fairness.figures import experiment, printing
from auditportal.fairness.figures.audit import ForestPanel, forest_plot, forest_plot_panels
from auditportal.fairness.figures.serialize import figure_json
from auditportal.fairness.statistics import judge
from auditportal.fairness.statistics.stats import COMPARED
from auditportal.reports import figures
from auditportal.reports.rendering import static_dir
from tests.reports.trial_world import COMPARISONS, eighty_comparison_document


def _panels(max_rows: int = printing.ROWS_PER_PANEL) -> list[ForestPanel]:
    attributes = document_attributes(eighty_comparison_document())
    return forest_plot_panels(attributes, tolerance=0.05, max_rows=max_rows)


def _keys(spec: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Each comparison drawn in ``spec``: (attribute, group, metric)."""
    return [(key[0], key[1], key[2]) for trace in spec["data"] for key in trace.get("customdata") or []]


def _rows(spec: dict[str, Any]) -> list[str]:
    """The groups drawn in ``spec``, top row first."""
    drawn = [(row, key[1]) for trace in spec["data"] for row, key in zip(trace["y"], trace["customdata"], strict=True)]
    return [group for _, group in sorted(drawn)]


def _row_px(spec: dict[str, Any]) -> float:
    layout = spec["layout"]
    plot_px = layout["height"] - layout["margin"]["t"] - layout["margin"]["b"]
    bottom, top = layout["yaxis"]["range"]
    return float(plot_px / (bottom - top))


def test_the_stated_sizes_are_legible_on_paper_at_the_width_the_stylesheet_prints_a_figure() -> None:
    css = (static_dir() / "css" / "report-pdf.css").read_text()
    page = re.search(r"@page \{\s*size: A4;\s*margin: (\d+)mm (\d+)mm (\d+)mm (\d+)mm;", css)
    assert page is not None
    assert 210 - int(page.group(2)) - int(page.group(4)) == figures.PRINT_WIDTH_MM
    assert re.search(r"figure img \{ width: 100%; \}", css)
    assert figures.px_to_mm(printing.ROW_PX) >= figures.MIN_ROW_MM == 7
    assert figures.px_to_pt(printing.MIN_FONT_PX) >= figures.MIN_FONT_PT == 8
    assert figures.px_to_pt(printing.MIN_FONT_PX - 1) < figures.MIN_FONT_PT  # the minimum is the least that does


def test_an_80_comparison_document_prints_one_metric_per_panel_with_every_comparison_once() -> None:
    panels = _panels()
    assert [panel.metric for panel in panels] == list(COMPARED)
    drawn: Counter[tuple[str, str, str]] = Counter()
    for panel in panels:
        assert (panel.first, panel.last, panel.total, panel.rows) == (1, 16, 16, 16)
        spec = figure_json(panel.figure)
        keys = _keys(spec)
        assert {metric for _, _, metric in keys} == {panel.metric}
        assert len(spec["layout"]["yaxis"]["ticktext"]) == panel.rows <= printing.ROWS_PER_PANEL
        assert spec["layout"]["title"]["text"] == f"<b>{panel.title}</b>"
        assert panel.references == ("age_group = 45-64", "gender = female", "gender & age_group = female · 45-64")
        drawn.update(keys)
    assert len(drawn) == COMPARISONS
    assert set(drawn.values()) == {1}
    # Every panel on the same x range, so that panels compare.
    assert len({tuple(figure_json(panel.figure)["layout"]["xaxis"]["range"]) for panel in panels}) == 1


def test_each_panel_has_rows_and_text_of_the_stated_size_and_fits_a_page() -> None:
    for panel in _panels():
        spec = figure_json(panel.figure)
        assert _row_px(spec) == pytest.approx(printing.ROW_PX, abs=0.5)
        assert figures.px_to_mm(_row_px(spec)) >= figures.MIN_ROW_MM
        sizes = printing.font_sizes(spec)
        assert spec["layout"]["font"]["size"] in sizes
        assert min(sizes) >= printing.MIN_FONT_PX
        assert figures.px_to_pt(min(sizes)) >= figures.MIN_FONT_PT
        assert figures.px_to_mm(spec["layout"]["height"]) <= figures.MAX_HEIGHT_MM


def _wide_attribute(groups: int) -> dict[str, Any]:
    """One attribute of ``groups`` groups (``groups`` - 1 comparisons per metric)."""
    rng = np.random.default_rng(groups)
    counts = rng.integers(40, 400, size=(groups, 4))
    names = [f"region-{index:02d}" for index in range(groups)]
    return {"region": judge.judge_attribute(counts, names, unknown=0, tolerance=0.05, alpha=0.05)}


def test_a_metric_beyond_the_row_limit_is_cut_into_even_panels_and_the_fullest_still_fits_a_page() -> None:
    panels = forest_plot_panels(_wide_attribute(46), tolerance=0.05)  # 45 comparisons per metric
    tpr = [panel for panel in panels if panel.metric == "tpr"]
    assert [(panel.first, panel.last) for panel in tpr] == [(1, 15), (16, 30), (31, 45)]
    assert [panel.title for panel in tpr] == [
        "TPR (equal opportunity), comparisons 1–15 of 45",
        "TPR (equal opportunity), comparisons 16–30 of 45",
        "TPR (equal opportunity), comparisons 31–45 of 45",
    ]
    assert [group for panel in tpr for group in _rows(figure_json(panel.figure))] == [
        f"region-{index:02d}" for index in range(46) if f"region-{index:02d}" != _reference(_wide_attribute(46))
    ]
    [full] = [panel for panel in forest_plot_panels(_wide_attribute(21), tolerance=0.05) if panel.metric == "tpr"]
    assert full.rows == printing.ROWS_PER_PANEL
    assert figures.px_to_mm(figure_json(full.figure)["layout"]["height"]) <= figures.MAX_HEIGHT_MM


def _reference(attributes: dict[str, Any]) -> str:
    return str(attributes["region"]["reference"])


def test_attributes_stay_whole_in_a_panel_where_they_fit() -> None:
    # 16 rows a metric: age group (3), gender (2), their intersection (11), by 10 rows: 5, then 6 and 5.
    tpr = [panel for panel in _panels(max_rows=10) if panel.metric == "tpr"]
    assert [(panel.first, panel.last) for panel in tpr] == [(1, 5), (6, 11), (12, 16)]
    attributes = [{attribute for attribute, _, _ in _keys(figure_json(panel.figure))} for panel in tpr]
    assert attributes == [{"age_group", "gender"}, {"gender&age_group"}, {"gender&age_group"}]
    assert tpr[1].references == ("gender & age_group = female · 45-64",)


def test_the_title_the_tolerance_label_the_axis_title_and_the_legend_each_have_a_band() -> None:
    spec = figure_json(_panels()[0].figure)
    layout = spec["layout"]
    # The title in the figure's top left corner, in the top margin, above the tolerance label...
    assert (layout["title"]["xref"], layout["title"]["yref"], layout["title"]["yanchor"]) == (
        "container",
        "container",
        "top",
    )
    [tolerance] = [note for note in layout["annotations"] if note["text"].startswith("tolerance")]
    assert (tolerance["yref"], tolerance["y"], tolerance["yanchor"]) == ("y domain", 1, "bottom")
    title_bottom = layout["title"]["pad"]["t"] + 1.5 * layout["title"]["font"]["size"]
    tolerance_top = tolerance["yshift"] + 1.5 * tolerance["font"]["size"]
    assert title_bottom + tolerance_top <= layout["margin"]["t"]
    # ... the x axis title below the tick labels, and the legend, placed in the figure's coordinates so
    # that it moves no margin, below both.
    assert layout["xaxis"]["automargin"] is False
    legend = layout["legend"]
    assert (legend["xref"], legend["yref"], legend["yanchor"]) == ("container", "container", "top")
    legend_top_below_plot = layout["margin"]["b"] - legend["y"] * layout["height"]
    axis_title_bottom = (
        1.5 * layout["xaxis"]["tickfont"]["size"]
        + layout["xaxis"]["title"]["standoff"]
        + 1.5 * (layout["xaxis"]["title"]["font"]["size"])
    )
    assert legend_top_below_plot >= axis_title_bottom
    entries = [trace["name"] for trace in spec["data"] if trace.get("showlegend")]
    assert entries == ["Fail", "Inconclusive", "Pass"]  # one line's worth
    assert layout["height"] * legend["y"] >= 1.5 * legend["font"]["size"]


def test_a_legend_of_more_entries_gets_room_for_two_lines() -> None:
    # Under a policy that judges TPR only, the other metrics' comparisons are drawn hollow, "(not judged)".
    attributes = document_attributes(eighty_comparison_document(metrics=("tpr",)))
    for panel in forest_plot_panels(attributes, tolerance=0.05):
        spec = figure_json(panel.figure)
        entries = [trace["name"] for trace in spec["data"] if trace.get("showlegend")]
        lines = 1 if len(entries) <= 3 else 2
        legend = spec["layout"]["legend"]
        assert spec["layout"]["height"] * legend["y"] >= lines * 1.5 * legend["font"]["size"]
    entries = [trace.name for panel in forest_plot_panels(attributes, tolerance=0.05) for trace in panel.figure.data]
    assert "Inconclusive (not judged)" in entries


def test_the_page_figure_stays_one_figure_of_every_metric() -> None:
    figure = forest_plot(document_attributes(eighty_comparison_document()), tolerance=0.05)
    assert figure is not None
    spec = figure_json(figure)
    assert len(_keys(spec)) == COMPARISONS
    assert sorted(key for key in spec["layout"] if key.startswith("yaxis")) == [
        "yaxis",
        "yaxis2",
        "yaxis3",
        "yaxis4",
        "yaxis5",
    ]


def test_the_recall_figure_is_cut_the_same_way_with_rows_of_the_stated_height() -> None:
    attributes = document_attributes(eighty_comparison_document())
    recall = [
        experiment.attribute_recall(name, section, section.get("verdict")) for name, section in attributes.items()
    ]
    [page] = figures.recall_panels(recall)
    assert [len(attribute.groups) for attribute in page] == [4, 3, 12]
    pages = figures.recall_panels(recall, max_rows=10)
    assert [[(attribute.attribute, len(attribute.groups)) for attribute in panel] for panel in pages] == [
        [("age_group", 4), ("gender", 3)],
        [("gender&age_group", 6)],
        [("gender&age_group", 6)],
    ]
    assert [group for panel in pages for attribute in panel for group in attribute.groups] == [
        group for attribute in recall for group in attribute.groups
    ]
    rows = sum(len(attribute.groups) for attribute in page)
    drawing = figures.print_recall(experiment.group_recall(page, trial_number=3, step=4), rows=rows)
    spec = figure_json(drawing.figure)
    layout = spec["layout"]
    plot_px = drawing.height - layout["margin"]["t"] - layout["margin"]["b"]
    assert plot_px / rows == printing.ROW_PX
    assert figures.px_to_mm(drawing.height) <= figures.MAX_HEIGHT_MM
    assert (layout["legend"]["xref"], layout["legend"]["yref"]) == ("container", "container")
    assert layout["xaxis"]["automargin"] is False


def test_every_figure_is_exported_with_no_font_under_the_minimum() -> None:
    figure = go.Figure(go.Scatter(x=[1, 2], y=[1, 2], mode="markers+text", text=["a", "b"], marker={"size": 6}))
    figure.update_traces(textfont={"size": [9, 14]})
    figure.update_layout(font={"size": 10}, legend={"font": {"size": 8}}, title={"text": "t", "font": {"size": 11}})
    figure.update_xaxes(tickfont={"size": 9})
    figure.add_annotation(text="note", x=1, y=1, font={"size": 7})
    spec = printing.raise_fonts(figure.to_dict())
    assert min(printing.font_sizes(spec)) == printing.MIN_FONT_PX
    assert spec["data"][0]["textfont"]["size"] == [printing.MIN_FONT_PX, 14]
    assert spec["data"][0]["marker"]["size"] == 6  # a marker is not text
    assert spec["layout"]["annotations"][0]["font"]["size"] == printing.MIN_FONT_PX
    assert figure.layout.font.size == 10  # the figure itself is not changed


def test_panels_keep_the_order_and_the_limits() -> None:
    rows = [("a", 1), ("a", 2), ("b", 1), ("c", 1), ("c", 2), ("c", 3), ("d", 1), ("e", 1)]
    cut = printing.panels(rows, block=lambda row: row[0], max_rows=4, max_blocks=2)
    assert cut == [[("a", 1), ("a", 2), ("b", 1)], [("c", 1), ("c", 2), ("c", 3), ("d", 1)], [("e", 1)]]
    assert printing.panels([], block=lambda row: row, max_rows=4) == []
    with pytest.raises(ValueError, match="max_rows=0"):
        printing.panels(rows, block=lambda row: row[0], max_rows=0)
