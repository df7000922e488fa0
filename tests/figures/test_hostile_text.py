"""Names from users' files and configs reach every figure as text plotly.js shows, never as markup.

plotly.js reads a few HTML tags in any text it draws (``<a href>``, ``<span style>``, ``<b>``, ``<br>``;
titles, tick labels, legend names, hover text, annotations) and fills ``%{...}`` in hover templates:
a group called ``<a href=...>`` would be a link on the page and in the signed PDF, and a ``<span
style="background:url(...)">`` makes the browser that draws it (the worker's Chromium) fetch that URL.
Every figure builder is fed such names here; each must come out escaped (``&lt;`` ...), and must
still read as the original characters once plotly.js decodes the entities.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from auditportal.fairness.figures import audit, dataset, experiment
from auditportal.fairness.figures.planning import power_curve_figure
from auditportal.fairness.figures.serialize import figure_json
from auditportal.fairness.figures.text import plain
from auditportal.fairness.files.intersections import attribute_key, group_key
from auditportal.fairness.statistics import judge
from auditportal.fairness.statistics.planning import GroupInput, plan_ab_test
from tests.figures.group_rows import Group

LINK = '<a href="http://evil.example/">click</a>'
STYLE = '<span style="background:url(http://127.0.0.1:9/x)">y</span>'
TEMPLATE = "%{fullData.uid}!"  # a template of its own: no hover may fill it
ENTITY = "&lt;b&gt;"  # already an entity: must show as these eight characters, not as "<b>"
HOSTILE = (LINK, STYLE, TEMPLATE, ENTITY)
# The markup the portal itself writes into figures' text.
OWN_TAGS = {"<br>", "<b>", "</b>", "<extra>", "</extra>"}

# plotly.js's own decoding of entities in text (lib/svg_text_utils.js, convertEntities), copied from
# the installed plotly.min.js: the names it knows and numeric references.
PLOTLY_ENTITIES = {"mu": "μ", "amp": "&", "lt": "<", "gt": ">", "nbsp": "\xa0", "times": "×", "plusmn": "±", "deg": "°"}
PLOTLY_ENTITY = re.compile(r"&(#\d+|#x[\da-fA-F]+|[a-z]+);")


def shown(text: str) -> str:
    """``text`` as plotly.js draws it (entities decoded; what is left of a tag is not text)."""

    def decode(match: re.Match[str]) -> str:
        name = match.group(1)
        if name.startswith("#"):
            return chr(int(name[2:], 16) if name[1] == "x" else int(name[1:]))
        return PLOTLY_ENTITIES.get(name, match.group(0))

    return PLOTLY_ENTITY.sub(decode, text)


def strings(value: Any) -> Iterator[str]:
    """Every string of a figure's JSON that plotly.js may draw: all of them, but a trace's
    ``customdata`` and ``meta`` that no template of the trace shows (keys for clicks, not text)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        templates = str(value.get("hovertemplate", "")) + str(value.get("texttemplate", ""))
        for key, item in value.items():
            if key in {"customdata", "meta"} and f"%{{{key}" not in templates:
                continue
            yield from strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)


def assert_names_are_text(figure: Any, names: tuple[str, ...] = HOSTILE) -> None:
    assert figure is not None
    drawn = figure_json(figure)
    texts = list(strings(drawn))
    # A layout's ``meta.narrow`` is drawn too: the layout static/js/figures.js applies in a narrow box
    # (fairness/figures/screen.py).
    texts += strings(drawn["layout"].get("meta", {}).get("narrow", {}))
    tags = {tag for text in texts for tag in re.findall(r"<[^<>]*>", text)}
    assert tags <= OWN_TAGS, f"markup from a name reached the figure: {tags - OWN_TAGS}"
    for name in names:
        assert not [text for text in texts if name in text], f"{name!r} is in the figure unescaped"
        assert any(name in shown(text) for text in texts), f"{name!r} is not shown as it is"


# ------------------------------------------------------------------------------------ the helper


@pytest.mark.parametrize("name", [*HOSTILE, "female", "50%", "a & b", "x > 0", "é ü 名"])
def test_plain_text_reads_back_as_the_same_characters_in_plotly(name: str) -> None:
    escaped = plain(name)
    assert not {"<", ">"} & set(escaped)
    assert "%{" not in escaped
    assert shown(escaped) == name


def test_plain_text_is_the_name_unchanged_when_it_has_nothing_to_escape() -> None:
    assert plain("female · 18-29") == "female · 18-29"


# --------------------------------------------------------------------------- every figure builder


def test_recall_per_group_shows_attribute_and_group_names_as_text() -> None:
    attributes = [
        experiment.AttributeRecall(
            attribute=name,
            verdict="FAIL",
            groups=[
                experiment.GroupRecall(group=group, recall=0.5, low=0.4, high=0.6, positives=10, is_reference=at == 0)
                for at, group in enumerate(HOSTILE)
            ],
        )
        for name in HOSTILE
    ]
    assert_names_are_text(experiment.group_recall(attributes, trial_number=3, step=40))


def test_recall_per_group_of_a_document_shows_its_names_as_text() -> None:
    section = judge.judge_attribute(
        np.array([[80, 20, 10, 90], [50, 50, 10, 90], [60, 40, 20, 80], [70, 30, 10, 90]]),
        HOSTILE,
        unknown=0,
        tolerance=0.05,
        alpha=0.05,
        columns=(LINK,),
        values=[[group] for group in HOSTILE],
        metrics=("tpr",),
    )
    recall = [experiment.attribute_recall(STYLE, section, section.get("verdict"))]
    assert_names_are_text(experiment.group_recall(recall, trial_number=None, step=None), (STYLE, *HOSTILE))


def test_the_worker_share_heat_map_shows_attribute_and_group_names_as_text() -> None:
    rows = [
        experiment.WorkerShareRow(attribute=attribute, group=group, rank=rank, values=[0.5, 0.4, 0.6])
        for attribute in (LINK, STYLE)
        for group in (TEMPLATE, ENTITY)
        for rank in (0, 1)
    ]
    spreads = {name: [0.1, 0.2, 0.1] for name in HOSTILE}
    assert_names_are_text(experiment.worker_share_heatmap([10, 20, 30], rows, spreads, trial_number=2))


def test_the_accuracy_scatter_shows_hyperparameter_names_and_values_as_text() -> None:
    summaries = [
        experiment.TrialSummary(
            trial_id=index, number=index, accuracy=0.8 + index / 100, eod=0.1 - index / 100, verdict="PASS",
            hparams=[(name, value) for name, value in zip(HOSTILE, reversed(HOSTILE), strict=True)],
        )
        for index in range(3)
    ]  # fmt: skip
    assert_names_are_text(experiment.accuracy_scatter(summaries, selected=1))


def test_the_timeline_and_the_bars_show_the_pair_that_set_the_eod_as_text() -> None:
    timeline = experiment.TrialTimeline(trial_id=1, number=1, steps=[10, 20], eod=[0.2, 0.1], verdicts=["FAIL", "PASS"])
    assert_names_are_text(experiment.eod_timeline([timeline], tolerance=0.05, floor=0.02), names=())
    # Keys as the metric points hold them (an "&" inside a name is escaped there).
    pairs = [
        experiment.pair_label(attribute_key([LINK]), STYLE, TEMPLATE),
        experiment.pair_label(attribute_key([ENTITY, LINK]), group_key([STYLE, ENTITY]), group_key([LINK, TEMPLATE])),
    ]
    floor = experiment.EodFloor(trial_id=1, number=1, steps=[10, 20], floors=[0.05, 0.04], pairs=pairs)
    assert_names_are_text(
        experiment.eod_timeline([timeline], tolerance=0.05, eod_floor=floor, selected=1), names=(*pairs, *HOSTILE)
    )
    bars = [
        experiment.TrialSummary(
            trial_id=index,
            number=index,
            lowest_eod=0.1,
            lowest_eod_step=20,
            lowest_eod_floor=0.05,
            lowest_eod_pair=pair,
        )
        for index, pair in enumerate(pairs)
    ]
    assert_names_are_text(experiment.lowest_eod_bars(bars, tolerance=0.05), names=(*pairs, *HOSTILE))


def _audit_section() -> dict[str, Any]:
    return judge.judge_attribute(
        np.array([[1800, 200, 200, 1800], [600, 400, 100, 900], [15, 5, 3, 17], [880, 120, 110, 890]]),
        HOSTILE,
        unknown=3,
        tolerance=0.05,
        alpha=0.05,
        columns=(LINK, STYLE),
        values=[[group, TEMPLATE] for group in HOSTILE],
        metrics=("tpr", "fpr"),
    )


def test_the_forest_plot_shows_attribute_and_group_names_as_text() -> None:
    document = {"tolerance": 0.05, "policy": {"tolerance": 0.05}, "attributes": {ENTITY: _audit_section()}}
    assert_names_are_text(audit.audit_forest_plot(document))
    assert_names_are_text(audit.verdict_document_forest_plot(document))
    panels = audit.forest_plot_panels({ENTITY: _audit_section()}, tolerance=0.05)
    assert panels
    for panel in panels:  # on paper: each panel names every group
        assert_names_are_text(panel.figure)


def test_the_dataset_group_figure_shows_group_names_as_text() -> None:
    groups = [Group((name, LINK), False, 100 + index, 40) for index, name in enumerate(HOSTILE)]
    figure = dataset.group_summary_figure(groups, columns=(STYLE, TEMPLATE), total_rows=1000, overall_rate=0.4)
    assert_names_are_text(figure)


def test_the_monitoring_figures_show_group_names_as_text() -> None:
    from auditportal.fairness.figures import monitoring
    from auditportal.fairness.figures.text import shorten

    # Legends shorten a group's name (the page's tables show it whole): what is shown is text.
    shortened = tuple(shorten(name, monitoring.NAME_CHARS) for name in HOSTILE)
    seq, values, status = [1, 2, 3], [0.02, 0.03, 0.04], ["watching"] * 3
    rates = [monitoring.RateSeries(name, seq, values, values, values, [0.05] * 3, values, status) for name in HOSTILE]
    assert_names_are_text(monitoring.rate_figure(rates, title="t", metric_label="FNR"), shortened)
    gaps = [monitoring.GapSeries(name, HOSTILE[0], seq, values, values, values, [0.05] * 3, status) for name in HOSTILE]
    assert_names_are_text(monitoring.gap_figure(gaps, title="t", metric_label="FNR"), shortened)
    shares = [
        monitoring.ShareSeries(name, seq, values, values, values, values, [0.1] * 3, status, unseen=index == 0)
        for index, name in enumerate(HOSTILE)
    ]
    assert_names_are_text(monitoring.drift_figure(shares, title="t"), shortened)


def test_the_paired_forest_plot_shows_group_names_as_text() -> None:
    from auditportal.fairness.figures.paired import paired_forest_plot
    from auditportal.fairness.statistics.paired import compare, joint_cells

    rng = np.random.default_rng(7)
    rows = 4000
    groups = rng.integers(0, len(HOSTILE), rows)
    label, a, b = (rng.integers(0, 2, rows) for _ in range(3))
    cells = joint_cells(label, a, b, groups, len(HOSTILE))
    document = compare({LINK: (list(HOSTILE), cells, 0)}, tolerance=0.05, alpha=0.05)
    assert_names_are_text(paired_forest_plot(document))


def test_the_attribution_figures_show_attribute_group_and_feature_names_as_text() -> None:
    from auditportal.fairness.figures.attributions import attribution_panels, gap_contributions_figure, mean_abs_figure
    from tests.attributions.documents import summary_document

    document = summary_document(attributes={LINK: ("reference", *HOSTILE)}, features=(*HOSTILE, "income"))
    section = document["attributes"][LINK]
    assert_names_are_text(gap_contributions_figure(LINK, section), (LINK, *HOSTILE))
    assert_names_are_text(gap_contributions_figure(LINK, section, kind="recall_gap"), (LINK, *HOSTILE))
    assert_names_are_text(mean_abs_figure(LINK, section), HOSTILE)
    for panel in attribution_panels(document):
        assert_names_are_text(panel.figure, HOSTILE)


def test_every_figure_module_is_fed_hostile_names_here() -> None:
    """A new figure module (or builder) is added to this file, or this test says so."""
    import inspect
    import pkgutil

    import auditportal.fairness.figures as package

    tested = {
        "experiment": {"eod_timeline", "group_recall", "worker_share_heatmap", "accuracy_scatter", "lowest_eod_bars"},
        "audit": {"forest_plot", "audit_forest_plot", "verdict_document_forest_plot"},
        "dataset": {"group_summary_figure"},
        "monitoring": {"rate_figure", "gap_figure", "drift_figure"},
        "planning": {"power_curve_figure"},
        "paired": {"paired_forest_plot"},
        "attributions": {"gap_contributions_figure", "mean_abs_figure"},
    }
    for module in pkgutil.iter_modules(package.__path__):
        loaded = __import__(f"{package.__name__}.{module.name}", fromlist=["_"])
        builders = {
            name
            for name, function in inspect.getmembers(loaded, inspect.isfunction)
            if function.__module__ == loaded.__name__
            and not name.startswith("_")
            and "Figure" in str(inspect.signature(function).return_annotation)
        }
        assert builders <= tested.get(module.name, set()), f"{module.name}: {builders - tested.get(module.name, set())}"


def test_the_planners_power_curve_shows_group_names_as_text() -> None:
    plan = plan_ab_test(
        groups=[GroupInput(name, 0.25, 0.3 + 0.1 * at) for at, name in enumerate(HOSTILE)],
        difference=0.05,
        alpha=0.05,
        power=0.8,
    )
    assert_names_are_text(power_curve_figure(plan))
