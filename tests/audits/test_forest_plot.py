"""The forest plot's data: each comparison where the document puts it, the band, the verdict marks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from auditportal.fairness.figures import palette
from auditportal.fairness.figures.audit import (
    ROW_PX,
    audit_forest_plot,
    forest_plot,
    references,
    verdict_document_forest_plot,
)
from auditportal.fairness.figures.serialize import figure_json
from auditportal.fairness.files.intersections import join_key
from auditportal.fairness.statistics import judge
from auditportal.fairness.statistics.stats import COMPARED
from auditportal.fairness.text.presentation import METRIC_LABELS, document_tolerance

# (tp, fn, fp, tn): "a" is the reference (most rows); "b"'s recall is 0.6 against 0.9 on thousands of
# positives (FAIL), "c" is small (INCONCLUSIVE), "d" is close, "e" has no positives (TPR undefined).
GROUPS = ("a", "b", "c", "d", "e")
COUNTS = np.array([[1800, 200, 200, 1800], [600, 400, 100, 900], [15, 5, 3, 17], [880, 120, 110, 890], [0, 0, 3, 5]])
JUDGED = ("tpr", "fpr")


def _section(tolerance: float = 0.05) -> dict[str, Any]:
    return judge.judge_attribute(
        COUNTS,
        GROUPS,
        unknown=3,
        tolerance=tolerance,
        alpha=0.05,
        columns=("gender",),
        values=[[group] for group in GROUPS],
        metrics=JUDGED,
    )


def _document(tolerance: float = 0.05) -> dict[str, Any]:
    return {"tolerance": tolerance, "policy": {"tolerance": tolerance}, "attributes": {"gender": _section(tolerance)}}


def _drawn(figure: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Each comparison as drawn, keyed (attribute, group, metric)."""
    drawn: dict[tuple[str, str, str], dict[str, Any]] = {}
    for trace in figure["data"]:
        for index, key in enumerate(trace["customdata"]):
            assert tuple(key) not in drawn, f"{key} drawn twice"
            entry: dict[str, Any] = {"axis": trace["xaxis"], "row": trace["y"][index], "text": trace["text"][index]}
            if trace["mode"] != "text":
                x = trace["x"][index]
                entry |= {
                    "x": x,
                    "low": x - trace["error_x"]["arrayminus"][index],
                    "high": x + trace["error_x"]["array"][index],
                    "colour": trace["marker"]["color"],
                    "symbol": trace["marker"]["symbol"],
                    "name": trace["name"],
                }
            drawn[tuple(key)] = entry  # type: ignore[index]
    return drawn


def _comparisons(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for section in document["attributes"].values() for item in section["comparisons"]]


def test_every_comparison_is_drawn_once_at_its_stored_difference_and_interval() -> None:
    document = _document()
    drawn = _drawn(figure_json(audit_forest_plot(document)))
    comparisons = _comparisons(document)
    assert set(drawn) == {("gender", item["group"], item["metric"]) for item in comparisons}
    defined = [item for item in comparisons if item["difference"] is not None]
    assert len(defined) < len(comparisons)  # the test holds an undefined comparison too
    for item in defined:
        point = drawn[("gender", item["group"], item["metric"])]
        assert point["x"] == item["difference"]
        assert point["low"] == pytest.approx(item["ci_low"], abs=1e-12)
        assert point["high"] == pytest.approx(item["ci_high"], abs=1e-12)


def test_one_panel_per_metric_in_the_vocabulary_order_with_its_comparisons_as_rows() -> None:
    document = _document()
    figure = figure_json(audit_forest_plot(document))
    drawn = _drawn(figure)
    metrics = [metric for metric in COMPARED if any(item["metric"] == metric for item in _comparisons(document))]
    assert len(metrics) == 5
    axes = ["x"] + [f"x{index}" for index in range(2, len(metrics) + 1)]
    assert sorted(key for key in figure["layout"] if key.startswith("xaxis")) == sorted(
        axis.replace("x", "xaxis") for axis in axes
    )
    titles = [annotation["text"] for annotation in figure["layout"]["annotations"]]
    assert titles[: len(metrics)] == [f"{METRIC_LABELS[metric]}: 4 comparisons" for metric in metrics]
    for metric, axis in zip(metrics, axes, strict=True):
        assert {point["axis"] for key, point in drawn.items() if key[2] == metric} == {axis}
        yaxis = figure["layout"][axis.replace("x", "yaxis")]
        # Rows top to bottom in document order, labelled by attribute and group.
        assert yaxis["ticktext"] == [f"gender: {group}" for group in GROUPS[1:]]
        assert [drawn[("gender", group, metric)]["row"] for group in GROUPS[1:]] == list(range(4))


def test_each_verdict_has_its_colour_shape_and_name_and_unjudged_metrics_are_hollow() -> None:
    document = _document()
    drawn = _drawn(figure_json(audit_forest_plot(document)))
    seen = set()
    for item in _comparisons(document):
        point = drawn[("gender", item["group"], item["metric"])]
        if item["difference"] is None:
            continue
        verdict = item["verdict"]
        seen.add(verdict)
        assert point["colour"] == palette.VERDICT_COLOURS[verdict]
        assert point["text"] == palette.VERDICT_LABELS[verdict]
        judged = item["metric"] in JUDGED
        assert point["symbol"] == palette.VERDICT_SYMBOLS[verdict] + ("" if judged else "-open")
        assert point["name"] == palette.VERDICT_LABELS[verdict] + ("" if judged else " (not judged)")
    assert seen == {"PASS", "INCONCLUSIVE", "FAIL"}


def test_the_legend_names_each_verdict_once() -> None:
    figure = figure_json(audit_forest_plot(_document()))
    legend = [trace["name"] for trace in figure["data"] if trace.get("showlegend")]
    assert len(legend) == len(set(legend))
    assert {"Fail", "Inconclusive", "Pass", "Fail (not judged)"} <= set(legend)


def test_an_undefined_comparison_is_written_at_its_row_not_drawn_as_a_point() -> None:
    drawn = _drawn(figure_json(audit_forest_plot(_document())))
    undefined = drawn[("gender", "e", "tpr")]
    assert "x" not in undefined
    assert undefined["text"].startswith("undefined")
    assert undefined["row"] == 3


@pytest.mark.parametrize("tolerance", [0.05, 0.1])
def test_every_panel_has_the_tolerance_band_of_the_policy_and_the_same_x_range(tolerance: float) -> None:
    document = _document(tolerance)
    figure = figure_json(audit_forest_plot(document))
    axes = sorted({trace["xaxis"] for trace in figure["data"]})
    bands = [shape for shape in figure["layout"]["shapes"] if shape["type"] == "rect"]
    assert sorted(band["xref"] for band in bands) == axes
    for band in bands:
        assert (band["x0"], band["x1"]) == (-tolerance, tolerance)
        assert band["yref"].endswith(" domain")
        assert (band["y0"], band["y1"]) == (0, 1)
    edges = [shape for shape in figure["layout"]["shapes"] if shape["type"] == "line" and shape["line"].get("dash")]
    assert sorted((edge["xref"], edge["x0"]) for edge in edges) == sorted(
        (axis, sign * tolerance) for axis in axes for sign in (-1, 1)
    )
    ranges = {tuple(figure["layout"][axis.replace("x", "xaxis")]["range"]) for axis in axes}
    assert len(ranges) == 1
    low, high = ranges.pop()
    bounds = [v for item in _comparisons(document) for v in (item["ci_low"], item["ci_high"]) if v is not None]
    assert low <= min(*bounds, -tolerance)
    assert high >= max(*bounds, tolerance)


def test_the_tolerance_is_the_policys_and_older_documents_use_their_own() -> None:
    assert document_tolerance({"tolerance": 0.05, "policy": {"tolerance": 0.02}}) == 0.02
    assert document_tolerance({"tolerance": 0.05}) == 0.05


def test_intersection_groups_are_labelled_by_their_values_and_names_are_not_read_as_markup() -> None:
    values = [("a", "b&c"), ("a&b", "c"), ("<b>x</b>", "c")]
    counts = np.array([[50, 50, 50, 50], [40, 60, 50, 50], [30, 10, 10, 30]])
    section = judge.judge_attribute(
        counts, [join_key(v) for v in values], unknown=0, columns=("gender", "race"), values=[list(v) for v in values]
    )
    figure = figure_json(forest_plot({join_key(("gender", "race")): section}, tolerance=0.05))
    assert figure["layout"]["yaxis"]["ticktext"] == [
        "gender &amp; race: a&amp;b · c",
        "gender &amp; race: &lt;b&gt;x&lt;/b&gt; · c",
    ]
    # A narrow figure's labels are wrapped with a <br> of the figure's own, the names still as text.
    assert figure["layout"]["meta"]["narrow"]["layout"]["yaxis.ticktext"] == [
        "gender &amp; race:<br>a&amp;b · c",
        "gender &amp; race:<br>&lt;b&gt;x&lt;/b&gt; · c",
    ]
    # The reference groups are the page's caption (plain text, which the template escapes).
    assert references({join_key(("gender", "race")): section}) == ["gender & race = a · b&c"]
    assert not any("reference" in annotation["text"] for annotation in figure["layout"]["annotations"])


def test_nothing_to_compare_gives_no_figure() -> None:
    section = judge.judge_attribute(np.array([[5, 5, 5, 5]]), ["a"], unknown=0)
    assert section["comparisons"] == []
    assert forest_plot({"gender": section}, tolerance=0.05) is None


def test_a_large_intersection_gets_dense_rows_whose_marks_keep_colour_and_shape() -> None:
    # 40 groups: 39 comparisons per metric, 195 in all, beyond DENSE_ABOVE.
    rng = np.random.default_rng(3)
    counts = rng.integers(20, 200, size=(40, 4))
    groups = [f"g{index:02d}" for index in range(40)]
    section = judge.judge_attribute(counts, groups, unknown=0)
    dense = figure_json(forest_plot({"group": section}, tolerance=0.05))
    points = [trace for trace in dense["data"] if trace["mode"] != "text"]
    assert {trace["mode"] for trace in points} == {"markers"}
    assert all(trace["marker"]["symbol"].startswith(tuple(palette.VERDICT_SYMBOLS.values())) for trace in points)
    assert {trace["name"] for trace in points if trace["showlegend"]} >= {"Inconclusive"}
    assert dense["layout"]["height"] < 195 * ROW_PX  # about half the height of named rows
    assert sum(len(trace["x"]) for trace in points) == sum(
        1 for item in section["comparisons"] if item["difference"] is not None
    )


def test_a_frozen_verdict_document_of_either_kind_is_drawn_from_its_judged_sections() -> None:
    # A trial validation keeps its sections under "attributes", a prediction audit's under "audit".
    trial = {"kind": "trial_validation", "policy": {"tolerance": 0.05}, "attributes": {"gender": _section()}}
    audit = {"kind": "prediction_audit", "policy": {"tolerance": 0.05}, "audit": _document()}
    expected = figure_json(forest_plot({"gender": _section()}, tolerance=0.05))
    for document in (trial, audit):
        figure = verdict_document_forest_plot(document)
        assert figure is not None
        assert figure_json(figure) == expected
    wider = verdict_document_forest_plot({**trial, "policy": {"tolerance": 0.2}})
    assert wider is not None
    assert figure_json(wider) != expected  # the band is the document's own policy's
