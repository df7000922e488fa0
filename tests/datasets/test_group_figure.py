"""The dataset version page's figures: rows (with the unknown bucket) and positive rates with Wilson
intervals, per attribute and for the intersection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse
from statsmodels.stats.proportion import proportion_confint

from auditportal.accounts.models import User
from auditportal.datasets import selectors
from auditportal.datasets.models import DatasetVersion
from auditportal.fairness.figures import palette
from auditportal.fairness.figures.dataset import group_summary_figure
from auditportal.fairness.figures.serialize import figure_json
from auditportal.fairness.text import numbers
from tests.factories import DatasetVersionFactory, client_for
from tests.figures.group_rows import Group

GROUPS = [
    Group(("male",), False, 600, 330),
    Group(("female",), False, 350, 140),
    Group(("<i>x</i>",), False, 0, 0),
    Group((), True, 50, 20),
]
TOTAL = 1000


def _figure(**changes: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {"columns": ("gender",), "total_rows": TOTAL, "overall_rate": 0.49, **changes}
    figure = group_summary_figure(GROUPS, **arguments)
    assert figure is not None
    return figure_json(figure)


def test_the_rows_panel_has_a_bar_per_group_and_the_unknown_bucket_in_grey_with_its_share() -> None:
    bars = _figure()["data"][0]
    assert bars["type"] == "bar"
    assert bars["x"] == [600, 350, 0, 50]
    assert bars["text"] == ["600 (60.0%)", "350 (35.0%)", "0 (0%)", "50 (5.00%)"]  # 3 significant digits
    assert bars["marker"]["color"] == [palette.series_colour(0)] * 3 + [palette.MUTED]
    assert bars["marker"]["pattern"]["shape"] == ["", "", "", "/"]


def test_the_rates_are_positives_over_rows_with_wilson_intervals() -> None:
    rates = _figure()["data"][1]
    assert rates["xaxis"] == "x2"
    # The group without rows has no rate: no point at its row (2).
    assert rates["y"] == [0, 1, 3]
    assert rates["x"] == pytest.approx([330 / 600, 140 / 350, 20 / 50])
    for index, (positives, rows) in enumerate([(330, 600), (140, 350), (20, 50)]):
        low, high = proportion_confint(positives, rows, alpha=0.05, method="wilson")
        x = rates["x"][index]
        assert x - rates["error_x"]["arrayminus"][index] == pytest.approx(low, abs=1e-12)
        assert x + rates["error_x"]["array"][index] == pytest.approx(high, abs=1e-12)


def test_another_alpha_gives_wider_intervals_and_says_so() -> None:
    wide = _figure(alpha=0.01)
    low, high = proportion_confint(330, 600, alpha=0.01, method="wilson")
    rates = wide["data"][1]
    assert rates["x"][0] - rates["error_x"]["arrayminus"][0] == pytest.approx(low, abs=1e-12)
    assert rates["x"][0] + rates["error_x"]["array"][0] == pytest.approx(high, abs=1e-12)
    assert rates["error_x"]["array"][0] > _figure()["data"][1]["error_x"]["array"][0]
    assert any(annotation["text"] == "Positive rate (99%)" for annotation in wide["layout"]["annotations"])


def test_the_groups_share_one_axis_labelled_in_order_with_names_written_out() -> None:
    figure = _figure()
    assert figure["layout"]["yaxis"]["ticktext"] == ["male", "female", "&lt;i&gt;x&lt;/i&gt;", "unknown"]
    assert figure["layout"]["yaxis"]["range"] == [3.5, -0.5]  # the first group on top


def test_the_overall_rate_is_a_dotted_line_on_the_rates_panel() -> None:
    (line,) = _figure()["layout"]["shapes"]
    assert (line["xref"], line["x0"], line["x1"], line["line"]["dash"]) == ("x2", 0.49, 0.49, "dot")
    assert _figure()["layout"]["xaxis2"]["title"]["text"] == "dotted: all rows, 0.490"
    assert "shapes" not in _figure(overall_rate=None)["layout"]
    assert "title" not in _figure(overall_rate=None)["layout"]["xaxis2"]


def test_intersection_groups_are_labelled_by_their_values() -> None:
    groups = [Group(("female", "18-29"), False, 10, 4), Group(("male", "65+"), False, 12, 6)]
    figure = group_summary_figure(groups, columns=("gender", "age_group"), total_rows=22)
    assert figure is not None
    assert figure_json(figure)["layout"]["yaxis"]["ticktext"] == ["female · 18-29", "male · 65+"]


def test_no_groups_give_no_figure() -> None:
    assert group_summary_figure([], columns=("gender",), total_rows=10) is None


# --------------------------------------------------------------------------- the page


@pytest.fixture
def version(alice: User, dataset_storage: Path) -> DatasetVersion:
    return DatasetVersionFactory.create(created_by=alice, name="loans")


def test_the_version_page_has_a_figure_per_table_with_the_selectors_rows(carol: User, version: DatasetVersion) -> None:
    response = client_for(carol).get(reverse("datasets:version", args=[version.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    tables = selectors.dataset_version_group_tables(version=version)
    assert [table.attribute for table, _, _ in response.context["group_tables"]] == [t.attribute for t in tables]
    for index, (table, figure_id, figure) in enumerate(response.context["group_tables"], start=1):
        assert figure_id == f"group-figure-{index}"
        assert f'data-figure-json="{figure_id}"' in html
        assert f'<script id="{figure_id}" type="application/json">' in html
        assert figure["data"][0]["x"] == [row.rows for row in table.rows]
    assert "vendor/plotly/plotly.min.js" in html
    assert "js/figures.js" in html


def test_the_table_shows_each_rate_with_its_wilson_interval_and_the_unknown_share(
    carol: User, version: DatasetVersion
) -> None:
    html = client_for(carol).get(reverse("datasets:version", args=[version.pk])).content.decode()
    gender = next(t for t in selectors.dataset_version_group_tables(version=version) if t.attribute == "gender")
    female = next(row for row in gender.rows if row.values == ("female",))
    low, high = proportion_confint(female.positives, female.rows, alpha=0.05, method="wilson")
    assert female.positive_interval == pytest.approx((low, high))
    assert numbers.interval(low, high, signed=False) in html
    share = f"{numbers.percent(gender.unknown / sum(row.rows for row in gender.rows))} unknown"
    assert gender.unknown > 0
    assert f'<small class="muted unknown-share">{share}</small>' in html
