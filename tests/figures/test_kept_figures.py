"""A figure the pages draw again and again from the same evidence is built once per process
(fairness/figures/serialize.py, ``kept_figure_json``): the kept JSON is the figure's, each caller gets
its own copy, and other arguments are another figure."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import pytest

from auditportal.fairness.figures import serialize
from auditportal.fairness.figures.dataset import group_summary_figure
from auditportal.fairness.figures.serialize import figure_json, kept_figure_json
from tests.figures.group_rows import Group

GROUPS = [Group(("male",), False, 600, 330), Group(("female",), False, 350, 140), Group((), True, 50, 20)]
built: list[tuple[Any, ...]] = []


def bars(document: dict[str, Any], *, colour: str) -> go.Figure | None:
    built.append((document, colour))
    if not document["heights"]:
        return None
    return go.Figure(go.Bar(y=document["heights"], marker={"color": colour}))


def test_a_kept_figure_is_the_figure_built_once_and_each_caller_gets_a_copy() -> None:
    built.clear()
    document = {"heights": [3, 1, 2], "note": "kept"}
    first = kept_figure_json(bars, document, colour="#123456")
    assert first == figure_json(go.Figure(go.Bar(y=[3, 1, 2], marker={"color": "#123456"})))
    assert first is not None
    first["data"][0]["y"].append(99)
    again = kept_figure_json(bars, {"note": "kept", "heights": [3, 1, 2]}, colour="#123456")
    assert again is not None
    assert again["data"][0]["y"] == [3, 1, 2]
    assert len(built) == 1, "the same builder and arguments: built once"

    other = kept_figure_json(bars, document, colour="#654321")
    assert other is not None
    assert other["data"][0]["marker"]["color"] == "#654321"
    assert kept_figure_json(bars, {"heights": [3, 1]}, colour="#123456") != first
    assert len(built) == 3

    assert kept_figure_json(bars, {"heights": []}, colour="#123456") is None
    assert kept_figure_json(bars, {"heights": []}, colour="#123456") is None
    assert len(built) == 4, "nothing to draw is kept too"


def test_a_kept_figure_of_dataclasses_is_the_builders() -> None:
    kept = kept_figure_json(group_summary_figure, GROUPS, columns=("gender",), total_rows=1000, overall_rate=0.49)
    fresh = group_summary_figure(GROUPS, columns=("gender",), total_rows=1000, overall_rate=0.49)
    assert fresh is not None
    assert kept == figure_json(fresh)
    assert kept_figure_json(group_summary_figure, GROUPS[:2], columns=("gender",), total_rows=1000) != kept


def test_only_the_latest_figures_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serialize, "KEPT_FIGURES", 2)
    built.clear()
    for heights in ([1], [2], [3], [1]):
        kept_figure_json(bars, {"heights": heights}, colour="#000000")
    assert [document["heights"] for document, _ in built] == [[1], [2], [3], [1]]


def test_arguments_that_are_not_plain_data_are_refused() -> None:
    with pytest.raises(TypeError, match="not plain data"):
        kept_figure_json(bars, {"heights": [1], "at": object()}, colour="#000000")


def test_arguments_named_by_the_caller_are_kept_under_that_name() -> None:
    built.clear()
    first = kept_figure_json(bars, {"heights": [5, 6]}, colour="#111111", kept_as="sha-of-the-document")
    # The name stands for the arguments (a frozen document's SHA-256): they are not serialised again.
    again = kept_figure_json(bars, {"heights": [5, 6], "at": object()}, colour="#111111", kept_as="sha-of-the-document")
    assert again == first
    assert len(built) == 1
    assert kept_figure_json(bars, {"heights": [5, 6]}, colour="#111111", kept_as="another-document") == first
    assert len(built) == 2, "another name is another figure"
