"""The pages' forest plot laid out for screens (fairness/figures/audit.forest_plot, figures/screen.py):
each text in a band of its own, and a narrow layout for a phone's width that static/js/figures.js
applies (tests/browser/test_forest_plot_widths.py looks at both in Chromium)."""

from __future__ import annotations

import copy
import re
from typing import Any

import numpy as np
import pytest

from auditportal.fairness.figures import audit, screen
from auditportal.fairness.figures.serialize import figure_json
from auditportal.fairness.statistics import judge
from auditportal.fairness.statistics.stats import COMPARED

# (tp, fn, fp, tn) per group: "a" is the reference.
COUNTS = np.array([[1800, 200, 200, 1800], [600, 400, 100, 900], [15, 5, 3, 17], [880, 120, 110, 890]])
LONG = "Native Hawaiian or Other Pacific Islander (self-described)"
GROUPS = ("a", "b", "<c>", LONG)
# The width of the forest plot's box on a 390 px phone (the page's and the card's padding taken off).
PHONE_FIGURE_PX = 332


def _attributes(metrics: tuple[str, ...] = COMPARED) -> dict[str, Any]:
    def section(name: str) -> dict[str, Any]:
        return judge.judge_attribute(
            COUNTS, GROUPS, unknown=0, columns=(name,), values=[[group] for group in GROUPS], metrics=metrics
        )

    return {"gender": section("gender"), "race": section("race")}


def _figure(metrics: tuple[str, ...] = COMPARED) -> dict[str, Any]:
    figure = audit.forest_plot(_attributes(metrics), tolerance=0.05)
    assert figure is not None
    return figure_json(figure)


def _at(layout: dict[str, Any], name: str) -> Any:
    """The value at a Plotly.relayout attribute string ("annotations[2].xshift") of ``layout``."""
    value: Any = layout
    for key in re.sub(r"\[(\d+)\]", r".\1", name).split("."):
        value = value[int(key)] if isinstance(value, list) else value[key]
    return value


def _narrowed(layout: dict[str, Any]) -> dict[str, Any]:
    """``layout`` as figures.js draws it in a narrow box."""
    narrowed = copy.deepcopy(layout)
    for name, value in layout["meta"]["narrow"]["layout"].items():
        keys = re.sub(r"\[(\d+)\]", r".\1", name).split(".")
        target = narrowed
        for key in keys[:-1]:
            target = target[int(key)] if isinstance(target, list) else target.setdefault(key, {})
        target[keys[-1]] = value
    return narrowed


def _lines(ticktext: str) -> list[str]:
    """A tick label's lines as read (the figure's own <br> between them, entities decoded)."""
    return [line.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&") for line in ticktext.split("<br>")]


def _panels(layout: dict[str, Any]) -> int:
    return sum(1 for key in layout if re.fullmatch(r"yaxis\d*", key))


def test_each_panel_has_its_title_and_above_it_its_tolerance_label_in_bands_of_their_own() -> None:
    layout = _figure()["layout"]
    panels = _panels(layout)
    assert panels == 5
    titles, tolerances = layout["annotations"][:panels], layout["annotations"][panels:]
    assert len(tolerances) == panels
    for index, (title, tolerance) in enumerate(zip(titles, tolerances, strict=True), start=1):
        domain = "y domain" if index == 1 else f"y{index} domain"
        assert (title["yref"], title["y"], title["yanchor"]) == (domain, 1, "bottom")
        assert (tolerance["yref"], tolerance["y"], tolerance["yanchor"]) == (domain, 1, "bottom")
        assert tolerance["text"] == "tolerance ±0.05"
        # The tolerance label (11 px text, a line of about 14 px) sits between the plot and the title.
        assert tolerance["yshift"] + 14 <= title["yshift"] == audit.TOLERANCE_BAND_PX
        assert title["font"]["size"] + 4 <= audit.TITLE_BAND_PX
        assert tolerance["font"]["size"] + 4 <= audit.TOLERANCE_BAND_PX
    # Between two panels: the upper one's x tick labels, the lower one's title and tolerance label.
    plot_px = layout["height"] - layout["margin"]["t"] - layout["margin"]["b"]
    for upper, lower in zip(range(1, panels), range(2, panels + 1), strict=True):
        above = layout[f"yaxis{'' if upper == 1 else upper}"]["domain"][0]
        below = layout[f"yaxis{lower}"]["domain"][1]
        assert (above - below) * plot_px == pytest.approx(
            audit.TICKS_BAND_PX + audit.TITLE_BAND_PX + audit.TOLERANCE_BAND_PX
        )
    # Above the first panel: the legend, one entry a line, then the title and the tolerance label.
    entries = sum(1 for trace in _figure()["data"] if trace.get("showlegend"))
    assert entries == 3
    assert layout["legend"]["orientation"] == "v"
    assert (layout["legend"]["xref"], layout["legend"]["yref"]) == ("container", "container")
    assert (layout["legend"]["x"], layout["legend"]["y"], layout["legend"]["yanchor"]) == (0, 1, "top")
    assert layout["margin"]["t"] == (
        audit.LEGEND_PAD_PX + entries * audit.LEGEND_LINE_PX + audit.TITLE_BAND_PX + audit.TOLERANCE_BAND_PX
    )
    # Below the last: its tick labels and the axis title.
    assert layout["margin"]["b"] == audit.TICKS_BAND_PX + audit.AXIS_TITLE_BAND_PX
    assert layout["xaxis5"]["title"]["text"] == "difference, group − reference"


def test_a_legend_of_more_entries_gets_a_taller_band() -> None:
    # Metrics the policy does not judge get entries of their own ("Fail (not judged)").
    judged_two = _figure(metrics=("tpr", "fpr"))
    entries = sum(1 for trace in judged_two["data"] if trace.get("showlegend"))
    assert entries > 3
    assert judged_two["layout"]["margin"]["t"] - _figure()["layout"]["margin"]["t"] == (
        (entries - 3) * audit.LEGEND_LINE_PX
    )


def test_the_titles_start_at_the_figures_left_edge_above_the_tick_labels_in_both_layouts() -> None:
    layout = _figure()["layout"]
    panels = _panels(layout)
    for shown in (layout, _narrowed(layout)):
        for title in shown["annotations"][:panels]:
            assert (title["xref"], title["x"], title["xanchor"]) == ("paper", 0, "left")
            # x = 0 is the plot's left edge: shifted back by the left margin, to the figure's.
            assert title["xshift"] == audit.TITLE_INSET_PX - shown["margin"]["l"]
    titles = [title["text"] for title in layout["annotations"][:panels]]
    assert titles[0] == "TPR (equal opportunity): 6 comparisons"
    narrow_titles = [title["text"] for title in _narrowed(layout)["annotations"][:panels]]
    assert narrow_titles == [
        "TPR: 6 comparisons",
        "FPR: 6 comparisons",
        "Equalized odds: 6 comparisons",
        "Selection rate: 6 comparisons",
        "PPV: 6 comparisons",
    ]
    # Each fits a phone's figure, in 13 px bold (a generous estimate).
    for title in narrow_titles:
        assert audit.TITLE_INSET_PX + screen.text_px(len(title), 13 * 1.1) <= PHONE_FIGURE_PX


def test_wide_tick_labels_are_one_line_cut_at_48_characters_and_narrow_ones_two_lines_of_18() -> None:
    layout = _figure()["layout"]
    narrowed = _narrowed(layout)
    for index in range(1, _panels(layout) + 1):
        axis = "yaxis" if index == 1 else f"yaxis{index}"
        wide, narrow = layout[axis]["ticktext"], narrowed[axis]["ticktext"]
        assert len(wide) == len(narrow) == 6
        assert all(len(_lines(label)) == 1 and len(_lines(label)[0]) <= audit.LABEL_CHARS for label in wide)
        assert all(len(_lines(label)) <= 2 and all(len(line) <= 18 for line in _lines(label)) for label in narrow)
        assert (layout[axis]["tickfont"]["size"], narrowed[axis]["tickfont"]["size"]) == (13, 11)
        assert (layout[axis]["automargin"], layout[axis]["tickmode"]) == (False, "array")
    race = layout["yaxis"]["ticktext"][3:]
    assert race == ["race: b", "race: &lt;c&gt;", "race: " + LONG[:41] + "…"]
    assert [_lines(label) for label in narrowed["yaxis"]["ticktext"][3:]] == [
        ["race: b"],
        ["race: <c>"],
        ["race: Native", "Hawaiian or Other…"],
    ]


def test_the_left_margin_holds_the_longest_tick_label_line_in_each_layout() -> None:
    layout = _figure()["layout"]
    narrowed = _narrowed(layout)
    for shown, font_px in ((layout, 13), (narrowed, 11)):
        longest = max(len(line) for label in shown["yaxis"]["ticktext"] for line in _lines(label))
        assert shown["margin"]["l"] == screen.text_px(longest, font_px) + 2 * audit.LABEL_PAD_PX
    # On a phone the labels leave the plot more than half the figure.
    plot_px = PHONE_FIGURE_PX - narrowed["margin"]["l"] - narrowed["margin"]["r"]
    assert plot_px > PHONE_FIGURE_PX / 2
    assert layout["margin"]["l"] > narrowed["margin"]["l"]


def test_the_narrow_layout_shortens_the_axis_title_and_the_x_tick_labels() -> None:
    layout = _figure()["layout"]
    narrowed = _narrowed(layout)
    assert narrowed["xaxis5"]["title"]["text"] == "group − reference"
    assert {narrowed[f"xaxis{index}"]["tickformat"] for index in ("", 2, 3, 4, 5)} == {"+.2~f"}
    assert {layout[f"xaxis{index}"]["tickformat"] for index in ("", 2, 3, 4, 5)} == {"+.2f"}


def test_the_narrow_layout_names_what_it_changes_and_the_wide_values_are_the_figures_own() -> None:
    layout = _figure()["layout"]
    narrow = layout["meta"]["narrow"]
    assert narrow["below_px"] == screen.NARROW_BELOW_PX == 760
    assert set(narrow["layout"]) == set(narrow["wide"])
    for name, value in narrow["wide"].items():
        assert _at(layout, name) == value, name  # relaying out with "wide" draws the figure as made
        assert narrow["layout"][name] != value, name  # only what changes is sent
    # Never the size: Plotly.relayout of a height fixes the figure's width too.
    assert not {"height", "width", "autosize", "margin.t", "margin.b"} & set(narrow["layout"])
    assert {"margin.l", "yaxis.ticktext", "annotations[0].text", "annotations[0].xshift"} <= set(narrow["layout"])


def test_dense_rows_keep_one_line_labels_when_narrow() -> None:
    rng = np.random.default_rng(3)
    groups = [f"group-with-a-long-name-{index:02d}" for index in range(40)]
    section = judge.judge_attribute(rng.integers(20, 200, size=(40, 4)), groups, unknown=0)
    figure = audit.forest_plot({"group": section}, tolerance=0.05)
    assert figure is not None
    layout = figure_json(figure)["layout"]
    narrowed = _narrowed(layout)
    assert layout["yaxis"]["tickfont"]["size"] == narrowed["yaxis"]["tickfont"]["size"] == 10
    assert all("<br>" not in label and len(label) <= 22 for label in narrowed["yaxis"]["ticktext"])
    # Cut in the middle, so that names differing at their end stay apart.
    assert narrowed["yaxis"]["ticktext"][:2] == ["group: group-w…name-00", "group: group-w…name-01"]
    assert len(set(narrowed["yaxis"]["ticktext"])) == 39


@pytest.mark.parametrize(
    ("text", "width", "lines", "expected"),
    [
        ("gender: female", 18, 2, ["gender: female"]),
        ("race: Native Hawaiian or Other Pacific Islander", 18, 2, ["race: Native", "Hawaiian or Other…"]),
        ("credit-applications_0123456789abcdefgh", 18, 2, ["credit-application", "s_0123456789abcde…"]),
        ("a  b   c", 18, 1, ["a b c"]),
        ("one two three", 5, 3, ["one", "two", "three"]),
        ("one two three four", 5, 3, ["one", "two", "thre…"]),
        ("", 18, 2, [""]),
    ],
)
def test_wrap_breaks_at_spaces_cuts_long_words_and_ends_what_it_cuts_with_an_ellipsis(
    text: str, width: int, lines: int, expected: list[str]
) -> None:
    assert screen.wrap(text, width, lines) == expected


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [("gender: female", 22, "gender: female"), ("group: group-with-a-long-name-07", 22, "group: group-w…name-07")],
)
def test_shorten_middle_keeps_a_names_start_and_end(text: str, limit: int, expected: str) -> None:
    assert screen.shorten_middle(text, limit) == expected
    assert len(screen.shorten_middle(text, limit)) <= limit


def test_wrap_refuses_a_line_too_short_to_hold_anything() -> None:
    with pytest.raises(ValueError, match="width=1"):
        screen.wrap("text", 1, 2)
    with pytest.raises(ValueError, match="lines=0"):
        screen.wrap("text", 18, 0)


def test_a_narrow_layout_may_not_change_other_attributes_than_the_wide_one_or_the_size() -> None:
    with pytest.raises(ValueError, match="different attributes"):
        screen.narrow_meta({"margin.l": 100}, {"margin.r": 20})
    with pytest.raises(ValueError, match="height"):
        screen.narrow_meta({"height": 100}, {"height": 200})
    assert screen.narrow_meta({"margin.l": 1, "margin.r": 2}, {"margin.l": 3, "margin.r": 2}) == {
        "narrow": {"below_px": 760, "layout": {"margin.l": 1}, "wide": {"margin.l": 3}}
    }
