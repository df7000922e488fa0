"""The experiment page's figure functions, tested on the data they draw (points, bands, Pareto front)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from auditportal.fairness.figures import experiment as fig
from auditportal.fairness.figures.downsample import MAX_POINTS
from auditportal.fairness.figures.palette import VERDICT_SYMBOLS, verdict_colour
from auditportal.fairness.figures.serialize import figure_json
from tests.figures.plotly_json import decoded


def _json(figure: Any) -> dict[str, Any]:
    assert figure is not None
    data: dict[str, Any] = decoded(figure_json(figure))
    return data


def _trace(data: dict[str, Any], name: str) -> dict[str, Any]:
    matches = [trace for trace in data["data"] if trace.get("name") == name]
    assert len(matches) == 1, [trace.get("name") for trace in data["data"]]
    trace: dict[str, Any] = matches[0]
    return trace


def _shape(data: dict[str, Any], name_start: str) -> dict[str, Any]:
    matches = [shape for shape in data["layout"].get("shapes", []) if str(shape.get("name", "")).startswith(name_start)]
    assert len(matches) == 1
    shape: dict[str, Any] = matches[0]
    return shape


# ----------------------------------------------------------------------------- derived values


def test_the_pareto_front_keeps_only_unbeaten_trials_ordered_by_eod() -> None:
    eod = [0.10, 0.05, 0.20, 0.05, 0.02, 0.30]
    accuracy = [0.80, 0.78, 0.85, 0.70, 0.60, 0.84]
    # 3 is beaten by 1 (same eod, lower accuracy); 5 by 2 (higher eod, lower accuracy).
    assert fig.pareto_front(eod, accuracy) == [4, 1, 0, 2]
    assert fig.pareto_front([0.1, 0.1], [0.5, 0.5]) == [0, 1]  # equal points beat neither
    assert fig.pareto_front([], []) == []


def test_the_verdict_in_force_is_the_worst_latest_per_attribute() -> None:
    changes = [
        fig.VerdictChange(step=20, attribute="gender", verdict="PASS"),
        fig.VerdictChange(step=20, attribute="race", verdict="INCONCLUSIVE"),
        fig.VerdictChange(step=40, attribute="race", verdict="PASS"),
        fig.VerdictChange(step=60, attribute="gender", verdict="FAIL"),
        fig.VerdictChange(step=80, attribute="gender", verdict=None),
    ]
    steps = [10, 20, 30, 40, 50, 60, 70, 80]
    assert fig.verdicts_in_force(steps, changes) == [
        None, "INCONCLUSIVE", "INCONCLUSIVE", "PASS", "PASS", "FAIL", "FAIL", "PASS",
    ]  # fmt: skip


def test_the_lowest_eod_and_its_first_step() -> None:
    assert fig.lowest_eod([10, 20, 30, 40], [0.3, None, 0.1, 0.1]) == (0.1, 30)
    assert fig.lowest_eod([10], [None]) == (None, None)


def test_group_recall_reads_the_verdict_documents_groups_and_intervals() -> None:
    document = {
        "reference": "m",
        "groups": {  # as PostgreSQL's jsonb gives them back: not in the document's order
            "m": {"tpr": 0.8, "ci": {"tpr": [0.7, 0.9]}, "positives": 60, "values": ["m"]},
            "f": {"tpr": 0.5, "ci": {"tpr": [0.3, 0.7]}, "positives": 20, "values": ["f"]},
        },
    }
    recall = fig.attribute_recall("gender", document, "FAIL")
    assert [(g.group, g.recall, g.low, g.high, g.positives, g.is_reference) for g in recall.groups] == [
        ("f", 0.5, 0.3, 0.7, 20, False),
        ("m", 0.8, 0.7, 0.9, 60, True),
    ]


# ------------------------------------------------------------------------------------ timeline


def test_the_timeline_draws_every_trial_with_the_tolerance_band_and_the_noise_floor() -> None:
    timelines = [
        fig.TrialTimeline(trial_id=7, number=1, steps=[25, 50, 75], eod=[0.3, 0.2, None]),
        fig.TrialTimeline(trial_id=8, number=2, steps=[25, 50], eod=[0.1, 0.04]),
        fig.TrialTimeline(trial_id=9, number=3, steps=[], eod=[]),  # no validation yet: no line
    ]
    data = _json(fig.eod_timeline(timelines, tolerance=0.05, floor=0.03, selected=8))
    first, second = _trace(data, "trial 1"), _trace(data, "trial 2")
    assert (first["x"], first["y"], first["meta"]) == ([25, 50, 75], [0.3, 0.2, None], 7)
    assert (second["x"], second["y"], second["meta"]) == ([25, 50], [0.1, 0.04], 8)
    assert second["line"]["width"] > first["line"]["width"]  # the selected trial stands out
    assert not [trace for trace in data["data"] if trace.get("name") == "trial 3"]
    band = _shape(data, "tolerance")
    assert (band["y0"], band["y1"], band["showlegend"]) == (0, 0.05, True)
    floor = _shape(data, "noise floor")
    assert (floor["y0"], floor["y1"]) == (0, 0.03)
    edges = [shape for shape in data["layout"]["shapes"] if shape["type"] == "line"]
    assert [(edge["y0"], edge["y1"]) for edge in edges] == [(0.05, 0.05)]


def test_the_timeline_marks_each_verdict_change_with_its_colour_shape_and_name() -> None:
    timeline = fig.TrialTimeline(
        trial_id=3, number=2, steps=[10, 20, 30, 40], eod=[0.2, 0.1, 0.02, 0.03],
        verdicts=[None, "FAIL", "PASS", "PASS"],
    )  # fmt: skip
    data = _json(fig.eod_timeline([timeline], tolerance=0.05, floor=None))
    failed, passed = _trace(data, "verdict became Fail"), _trace(data, "verdict became Pass")
    assert (failed["x"], failed["y"], failed["customdata"]) == ([20], [0.1], [3])
    assert (passed["x"], passed["y"], passed["customdata"]) == ([30], [0.02], [3])
    assert failed["marker"]["color"] == verdict_colour("FAIL")
    assert failed["marker"]["symbol"] == VERDICT_SYMBOLS["FAIL"]
    assert not [shape for shape in data["layout"].get("shapes", []) if "noise" in str(shape.get("name"))]


def test_long_timelines_are_downsampled_keeping_extremes_and_verdict_changes() -> None:
    n = 6_000
    rng = np.random.default_rng(1)
    eod = (0.1 + 0.01 * rng.standard_normal(n)).tolist()
    eod[4_321] = 0.9
    verdicts = ["FAIL"] * 3_000 + ["PASS"] * (n - 3_000)
    steps = list(range(10, 10 * (n + 1), 10))
    timelines = [fig.TrialTimeline(trial_id=i, number=i, steps=steps, eod=eod, verdicts=verdicts) for i in range(1, 4)]
    data = _json(fig.eod_timeline(timelines, tolerance=0.05, floor=None, total_points=3_000))
    for i in range(1, 4):
        trace = _trace(data, f"trial {i}")
        assert len(trace["x"]) <= 1_000
        assert steps[4_321] in trace["x"]
        assert max(trace["y"]) == 0.9
        assert {steps[2_999], steps[3_000]} <= set(trace["x"])
        assert trace["x"][0] == steps[0]
        assert trace["x"][-1] == steps[-1]
    assert _trace(data, "verdict became Pass")["x"] == [steps[3_000]] * 3


def test_each_trace_gets_an_equal_share_of_the_points_but_never_more_than_2000() -> None:
    assert fig.timeline_point_budget(1) == MAX_POINTS
    assert fig.timeline_point_budget(20) == 1_000
    assert fig.timeline_point_budget(1_000) == 100


def test_the_selected_trials_noise_floor_is_shaded_step_by_step_under_the_lines() -> None:
    timelines = [
        fig.TrialTimeline(trial_id=7, number=1, steps=[25, 50, 75], eod=[0.3, 0.2, 0.1]),
        fig.TrialTimeline(trial_id=8, number=2, steps=[25, 50], eod=[0.1, 0.04]),
    ]
    floor = fig.EodFloor(
        trial_id=7, number=1, steps=[25, 50, 75], floors=[0.08, None, 0.031],
        pairs=["race: a − b", "", "gender & race: <f> · b − m · a"],
    )  # fmt: skip
    data = _json(fig.eod_timeline(timelines, tolerance=0.05, eod_floor=floor, selected=7))
    band = data["data"][0]  # first: under every line
    assert band["name"] == "noise floor, trial 1"
    assert (band["x"], band["y"], band["fill"]) == ([25, 50, 75], [0.08, None, 0.031], "tozeroy")
    assert band["text"][2] == "gender &amp; race: &lt;f&gt; · b − m · a"
    assert band["mode"] == "lines+markers"  # a tick at each of few steps: one validation has no area
    assert "eod set by %{text}" in band["hovertemplate"]
    # No band across the whole plot: the largest floor of every comparison is not drawn.
    assert not [shape for shape in data["layout"]["shapes"] if "noise" in str(shape.get("name"))]


def test_the_floor_is_computed_at_the_steps_the_chart_keeps() -> None:
    n = 5_000
    steps = list(range(1, n + 1))
    timelines = [fig.TrialTimeline(trial_id=i, number=i, steps=steps, eod=[0.1] * n) for i in (1, 2)]
    kept = fig.timeline_kept(timelines, total_points=2_000)
    data = _json(fig.eod_timeline(timelines, tolerance=0.05, total_points=2_000))
    assert _trace(data, "trial 1")["x"] == [steps[i] for i in kept[1]]
    assert len(kept[1]) <= 1_000


def test_the_step_axis_runs_from_0_to_the_planned_length() -> None:
    one = [fig.TrialTimeline(trial_id=1, number=1, steps=[100], eod=[0.2])]
    assert _json(fig.eod_timeline(one, tolerance=0.05, max_step=400))["layout"]["xaxis"]["range"] == [0, 400]
    longer = [fig.TrialTimeline(trial_id=1, number=1, steps=[100, 500], eod=[0.2, 0.1])]
    assert _json(fig.eod_timeline(longer, tolerance=0.05, max_step=400))["layout"]["xaxis"]["range"] == [0, 500]
    # Without a planned length, from 0 all the same (one validation is not a range from 99 to 101).
    assert _json(fig.eod_timeline(one, tolerance=0.05))["layout"]["xaxis"]["rangemode"] == "tozero"


def test_a_pair_is_named_by_its_attribute_and_groups_values() -> None:
    assert fig.pair_label("gender", "male", "female") == "gender: male − female"
    assert fig.pair_label("gender&race", "female&b", "male&a%26c") == "gender & race: female · b − male · a&c"


def test_an_experiment_without_validations_gets_a_timeline_that_says_so_on_sane_axes() -> None:
    data = _json(fig.eod_timeline([], tolerance=0.05, floor=None, max_step=400))
    assert data["data"] == []
    assert "No validations yet" in data["layout"]["annotations"][0]["text"]
    assert (data["layout"]["yaxis"]["range"], data["layout"]["yaxis"]["autorange"]) == ([0, 1], False)
    assert data["layout"]["xaxis"]["range"] == [0, 400]
    # Without a planned length the step axis has no numbers rather than made-up ones.
    bare = _json(fig.eod_timeline([], tolerance=0.05))["layout"]["xaxis"]
    assert (bare["range"], bare["showticklabels"]) == ([0, 1], False)


def test_every_empty_chart_says_so_on_fixed_axes_rates_from_0_to_1() -> None:
    empty = [
        (fig.group_recall([], trial_number=1, step=None), "xaxis", [0, 1.02]),
        (fig.accuracy_scatter([fig.TrialSummary(1, 1)], objective="eod"), "xaxis", [0, 1]),
        (fig.accuracy_scatter([fig.TrialSummary(1, 1)], objective="eod"), "yaxis", [0, 1]),
        (fig.accuracy_scatter([], objective="fair_objective"), "yaxis", [0, 1]),
        (fig.lowest_eod_bars([fig.TrialSummary(1, 1)], tolerance=0.05), "yaxis", [0, 1]),
    ]
    for figure, axis, bounds in empty:
        layout = _json(figure)["layout"]
        assert layout[axis]["range"] == bounds
        assert layout[axis]["autorange"] is False
        assert layout["annotations"][0]["text"].startswith("No ")
    # An axis with no meaningful fixed range (fair_objective, the recall chart's groups) shows no numbers.
    assert _json(fig.accuracy_scatter([], objective="fair_objective"))["layout"]["xaxis"]["showticklabels"] is False
    recall = _json(fig.group_recall([], trial_number=1, step=None))["layout"]["yaxis"]
    assert (recall["showticklabels"], "type" in recall) == (False, False)


# ---------------------------------------------------------------------------------- group recall


def test_group_recall_has_one_trace_per_attribute_with_asymmetric_error_bars() -> None:
    attributes = [
        fig.AttributeRecall("gender", "FAIL", [
            fig.GroupRecall("f", 0.5, 0.3, 0.7, 20), fig.GroupRecall("m", 0.8, 0.75, 0.9, 60, is_reference=True),
        ]),
        fig.AttributeRecall("age_group", None, [fig.GroupRecall("young", None, None, None, 0)]),
    ]  # fmt: skip
    data = _json(fig.group_recall(attributes, trial_number=4, step=100))
    gender = _trace(data, "gender: Fail")
    assert gender["y"] == [["gender", "gender"], ["f", "m"]]
    assert gender["x"] == [0.5, 0.8]
    assert gender["error_x"]["array"] == pytest.approx([0.2, 0.1])
    assert gender["error_x"]["arrayminus"] == pytest.approx([0.2, 0.05])
    assert gender["marker"]["symbol"] == ["circle", "square"]  # the reference is a square
    age = _trace(data, "age_group: no verdict")
    assert age["x"] == [None]
    assert data["layout"]["title"]["text"] == "Recall per group, trial 4 (step 100)"
    # The title keeps its own room above the legend, which wraps into rows on a phone.
    title = data["layout"]["title"]
    assert (title["automargin"], title["yref"], data["layout"]["legend"]["yanchor"]) == (True, "container", "bottom")


# ------------------------------------------------------------------------------- worker shares


def test_worker_shares_need_two_workers() -> None:
    rows = [fig.WorkerShareRow("gender", "f", 0, [0.5, 0.5])]
    assert fig.worker_share_heatmap([10, 20], rows, {"gender": [0.0, 0.0]}) is None


def test_worker_shares_are_coloured_by_their_deviation_from_the_workers_mean_share() -> None:
    rows = [
        fig.WorkerShareRow("gender", "m", 1, [0.3, 0.4]),
        fig.WorkerShareRow("gender", "f", 0, [0.6, 0.5]),
        fig.WorkerShareRow("gender", "f", 1, [0.7, 0.6]),
        fig.WorkerShareRow("gender", "m", 0, [0.4, None]),
    ]
    data = _json(fig.worker_share_heatmap([10, 20], rows, {"gender": [0.3, 0.1]}, trial_number=3))
    heatmap = data["data"][0]
    assert heatmap["type"] == "heatmap"
    assert heatmap["y"] == ["gender=f · rank 0", "gender=f · rank 1", "gender=m · rank 0", "gender=m · rank 1"]
    # share − the mean of the workers' shares of the group at the step (a missing rank left out).
    assert heatmap["z"] == [[-0.05, -0.05], [0.05, 0.05], [0.05, None], [-0.05, 0.0]]
    assert heatmap["customdata"] == [[0.6, 0.5], [0.7, 0.6], [0.4, None], [0.3, 0.4]]  # the share itself
    assert "share %{customdata:.3g}" in heatmap["hovertemplate"]
    assert "against the workers' mean %{z:+.2g}" in heatmap["hovertemplate"]
    # A diverging scale centred at 0, as far as the data reaches.
    assert (heatmap["zmin"], heatmap["zmax"]) == (pytest.approx(-0.05), pytest.approx(0.05))
    assert heatmap["colorscale"][0][1] != heatmap["colorscale"][-1][1]
    assert heatmap["x"] == [10, 20]
    assert data["layout"]["title"]["text"].startswith("Worker share of each group, trial 3")
    # Every row labelled, not every other one (which would leave out rank 1 entirely).
    assert data["layout"]["yaxis"]["dtick"] == 1
    assert data["layout"]["yaxis"]["automargin"] is True
    spread = _trace(data, "spread gender")
    assert (spread["x"], spread["y"]) == ([10, 20], [0.3, 0.1])


def test_worker_share_differences_under_two_hundredths_take_the_whole_colour_scale() -> None:
    rows = [
        fig.WorkerShareRow("gender", "f", 0, [0.501, 0.502]),
        fig.WorkerShareRow("gender", "f", 1, [0.499, 0.498]),
    ]
    heatmap = _json(fig.worker_share_heatmap([10, 20], rows, {}))["data"][0]
    assert heatmap["zmax"] == fig.SHARE_DEVIATION_MIN  # 0.002 off the mean: the scale's minimum reach
    assert heatmap["z"][0][1] / heatmap["zmax"] == pytest.approx(0.4, abs=1e-3)  # plainly coloured
    wide = [fig.WorkerShareRow("a", "x", rank, [0.5 + 0.1 * (1 - 2 * rank)]) for rank in (0, 1)]
    assert _json(fig.worker_share_heatmap([10], wide, {}))["data"][0]["zmax"] == pytest.approx(0.1)


def test_long_worker_share_series_are_averaged_into_at_most_max_columns() -> None:
    steps = list(range(1, 1_001))
    rows = [fig.WorkerShareRow("a", "x", rank, [float(rank)] * 500 + [0.5] * 500) for rank in (0, 1)]
    data = _json(fig.worker_share_heatmap(steps, rows, {}, max_columns=10))
    heatmap = data["data"][0]
    assert heatmap["x"] == list(range(100, 1_001, 100))
    assert heatmap["customdata"][1] == [1.0] * 5 + [0.5] * 5
    assert heatmap["z"][1] == [0.5] * 5 + [0.0] * 5


# ------------------------------------------------------------------------ scatter and bar charts


SUMMARIES = [
    fig.TrialSummary(1, 1, accuracy=0.80, eod=0.10, fair_objective=0.6, lowest_eod=0.08, lowest_eod_step=50,
                     noise_floor=0.3, verdict="FAIL", hparams=[("learning_rate", "0.0007631")],
                     lowest_eod_floor=0.04, lowest_eod_pair="gender: m − f"),
    fig.TrialSummary(2, 2, accuracy=0.78, eod=0.05, fair_objective=0.5, lowest_eod=0.03, lowest_eod_step=75,
                     noise_floor=0.3, verdict="PASS", lowest_eod_floor=0.05, lowest_eod_pair="race: a − b"),
    fig.TrialSummary(3, 3, accuracy=0.70, eod=0.07, fair_objective=0.4, lowest_eod=0.07, lowest_eod_step=25,
                     verdict="INCONCLUSIVE"),
    fig.TrialSummary(4, 4),  # no validation yet
]  # fmt: skip


def test_the_scatter_marks_the_pareto_front_and_colours_trials_by_verdict() -> None:
    data = _json(fig.accuracy_scatter(SUMMARIES, objective="eod", selected=2))
    front = _trace(data, "Pareto front")
    assert (front["x"], front["y"]) == ([0.05, 0.1], [0.78, 0.8])  # trial 3 is beaten by trial 2
    passed = _trace(data, "Pass")
    assert (passed["x"], passed["y"], passed["customdata"]) == ([0.05], [0.78], [2])
    assert passed["marker"]["color"] == verdict_colour("PASS")
    assert passed["marker"]["line"]["width"] == [3]  # selected
    failed = _trace(data, "Fail")
    assert "learning_rate=0.0007631" in failed["hovertext"][0]
    assert data["layout"]["xaxis"]["title"]["text"].startswith("eod")


def test_the_scatter_can_use_fair_objective_instead() -> None:
    data = _json(fig.accuracy_scatter(SUMMARIES, objective="fair_objective"))
    front = _trace(data, "Pareto front")
    assert (front["x"], front["y"]) == ([0.4, 0.5, 0.6], [0.7, 0.78, 0.8])


def test_the_bars_show_each_trials_lowest_eod_with_the_tolerance_and_the_floor_of_the_pair_that_set_it() -> None:
    data = _json(fig.lowest_eod_bars(SUMMARIES, tolerance=0.05, selected=1))
    bars = _trace(data, "lowest eod")
    assert bars["x"] == ["trial 1", "trial 2", "trial 3"]
    assert (bars["y"], bars["customdata"]) == ([0.08, 0.03, 0.07], [1, 2, 3])
    floors = _trace(data, "noise floor of the pair that set it")
    # The pair's floor, not the trial's widest (0.3): trial 3's counts are unknown, so it has none.
    assert (floors["x"], floors["y"]) == (["trial 1", "trial 2"], [0.04, 0.05])
    assert floors["text"] == ["gender: m − f", "race: a − b"]
    assert _shape(data, "tolerance")["y1"] == 0.05
    assert bars["marker"]["color"][0] != bars["marker"]["color"][1]  # the selected bar stands out


def _boxes(xs: list[float], ys: list[float], placed: dict[int, str]) -> list[tuple[float, float, float, float]]:
    """Each placed number's box, as label_positions measures it (fractions of the data's range)."""
    x = (np.asarray(xs) - min(xs)) / (max(xs) - min(xs))
    y = (np.asarray(ys) - min(ys)) / (max(ys) - min(ys))
    offsets = {name: (dx, dy) for name, dx, dy in fig.LABEL_PLACES}
    boxes = []
    for i, name in placed.items():
        dx, dy = offsets[name]
        boxes.append((
            x[i] + dx * (fig.MARK_RADIUS + fig.LABEL_HALF_WIDTH), y[i] + dy * (fig.MARK_RADIUS + fig.LABEL_HALF_HEIGHT),
            fig.LABEL_HALF_WIDTH, fig.LABEL_HALF_HEIGHT,
        ))  # fmt: skip
    return boxes


def test_crowded_trials_get_at_most_a_few_numbers_none_on_another_number_or_mark() -> None:
    rng = np.random.default_rng(3)
    xs = (0.05 + 0.01 * rng.standard_normal(30)).tolist()
    ys = (0.80 + 0.01 * rng.standard_normal(30)).tolist()
    front = fig.pareto_front(xs, ys)
    placed = fig.label_positions(xs, ys, [17, *front])
    assert 17 in placed  # the selected trial, asked first, is numbered
    assert 1 <= len(placed) <= fig.MAX_LABELS
    boxes = _boxes(xs, ys, placed)
    x = (np.asarray(xs) - min(xs)) / (max(xs) - min(xs))
    y = (np.asarray(ys) - min(ys)) / (max(ys) - min(ys))
    marks = [(float(px), float(py), fig.MARK_RADIUS, fig.MARK_RADIUS) for px, py in zip(x, y, strict=True)]
    for index, box in enumerate(boxes):
        for other in boxes[index + 1 :] + marks:
            assert not (
                abs(box[0] - other[0]) < box[2] + other[2] - 1e-9 and abs(box[1] - other[1]) < box[3] + other[3] - 1e-9
            )


def test_the_scatter_numbers_only_the_placed_trials_and_says_every_number_in_the_hover() -> None:
    summaries = [
        fig.TrialSummary(i, i, accuracy=0.8 + 0.001 * (i % 3), eod=0.05 + 0.001 * i, verdict="FAIL")
        for i in range(1, 21)
    ]
    data = _json(fig.accuracy_scatter(summaries, objective="eod", selected=20))
    failed = _trace(data, "Fail")
    assert failed["mode"] == "markers"
    assert all(hover.startswith(f"trial {i}") for i, hover in enumerate(failed["hovertext"], start=1))
    numbers = _trace(data, "trial numbers")
    assert (numbers["mode"], numbers["hoverinfo"], numbers["showlegend"], numbers["cliponaxis"]) == (
        "markers+text", "skip", False, False,
    )  # fmt: skip
    assert numbers["marker"]["opacity"] == 0
    assert "20" in numbers["text"]
    assert 1 <= len(numbers["text"]) <= fig.MAX_LABELS
    assert len(numbers["textposition"]) == len(numbers["text"])
    at = {text: (x, y) for text, x, y in zip(numbers["text"], numbers["x"], numbers["y"], strict=True)}
    assert at["20"] == (pytest.approx(0.07), pytest.approx(0.802))


def test_the_selected_trial_is_numbered_even_amid_marks_but_never_over_another_number() -> None:
    # Trial 0 sits in the middle of a tight ring of marks: no place beside it is free of them.
    angles = np.linspace(0, 2 * np.pi, 12, endpoint=False)
    xs = [0.5, *(0.5 + 0.03 * np.cos(angles)).tolist(), 0.0, 1.0]
    ys = [0.5, *(0.5 + 0.03 * np.sin(angles)).tolist(), 0.0, 1.0]
    assert 0 not in fig.label_positions(xs, ys, [0])
    placed = fig.label_positions(xs, ys, [0, 13, 14, *range(1, 13)], always=[0])
    assert 0 in placed
    boxes = _boxes(xs, ys, placed)
    for index, box in enumerate(boxes):
        for other in boxes[index + 1 :]:
            assert not (abs(box[0] - other[0]) < 2 * box[2] - 1e-9 and abs(box[1] - other[1]) < 2 * box[3] - 1e-9)
