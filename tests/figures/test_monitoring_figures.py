"""The deployment page's figures (fairness/figures/monitoring.py): the values drawn, hostile group
names escaped, long series downsampled."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from auditportal.fairness.figures import monitoring as figures
from auditportal.fairness.figures.downsample import MAX_POINTS
from auditportal.fairness.figures.serialize import figure_json as plotly_json
from tests.figures.plotly_json import decoded

HOSTILE = ("<script>alert(1)</script>", "=cmd|' /C calc'!A0", "%{x}<b>")


def figure_json(figure: Any) -> dict[str, Any]:
    return decoded(plotly_json(figure))  # type: ignore[arg-type,no-any-return]


def rate(group: str, n: int = 3) -> figures.RateSeries:
    return figures.RateSeries(
        group=group,
        seq=list(range(1, n + 1)),
        estimate=[0.02, 0.03, 0.045][:n] + [0.04] * max(n - 3, 0),
        low=[0.0, 0.01, 0.02][:n] + [0.03] * max(n - 3, 0),
        high=[0.2, 0.1, 0.08][:n] + [0.05] * max(n - 3, 0),
        limit=[0.05] * n,
        boundary=[None, 0.3, 0.12][:n] + [0.09] * max(n - 3, 0),
        status=["too_few", "watching", "watching"][:n] + ["watching"] * max(n - 3, 0),
    )


def traces(figure: Any) -> list[dict[str, Any]]:
    return figure_json(figure)["data"]  # type: ignore[no-any-return]


def test_the_rate_figure_draws_the_estimate_its_band_the_limit_and_the_boundary() -> None:
    data = traces(figures.rate_figure([rate("women")], title="gender: FNR", metric_label="FNR"))
    by_name = {trace.get("name"): trace for trace in data}
    assert by_name["women"]["x"] == [1, 2, 3]
    assert by_name["women"]["y"] == [0.02, 0.03, 0.045]
    assert by_name["women"]["customdata"] == [[0.0, 0.2], [0.01, 0.1], [0.02, 0.08]]
    # A step line drawn from where the limit changes and its last point: the same line, fewer points.
    assert by_name["limit"]["x"] == [1, 3]
    assert by_name["limit"]["y"] == [0.05, 0.05]
    assert by_name["women: breach boundary"]["y"] == [None, 0.3, 0.12]
    band = next(trace for trace in data if trace.get("fill") == "toself")
    assert band["x"] == [1, 2, 3, 3, 2, 1]
    assert band["y"] == [0.2, 0.1, 0.08, 0.02, 0.01, 0.0]


def test_the_gap_figure_draws_the_limit_on_both_sides() -> None:
    line = figures.GapSeries(
        group="women",
        reference="men",
        seq=[1, 2],
        difference=[0.01, -0.02],
        low=[-0.1, -0.06],
        high=[0.12, 0.02],
        limit=[0.05, 0.05],
        status=["watching", "watching"],
    )
    data = traces(figures.gap_figure([line], title="gap", metric_label="FNR"))
    limit = next(trace for trace in data if trace.get("name") == "limit")
    assert limit["y"] == [0.05, 0.05, None, -0.05, -0.05]
    assert next(trace for trace in data if trace.get("name") == "women − men")["y"] == [0.01, -0.02]


def test_the_drift_figure_flags_a_group_unseen_in_training() -> None:
    seen = figures.ShareSeries(
        group="men",
        seq=[1, 2],
        production=[0.5, 0.6],
        low=[0.4, 0.5],
        high=[0.6, 0.7],
        training=[0.5, 0.5],
        limit=[0.1, 0.1],
        status=["watching", "breach"],
    )
    unseen = figures.ShareSeries(
        group="robots",
        seq=[2],
        production=[0.05],
        low=[0.0],
        high=[0.1],
        training=[None],
        limit=[0.1],
        status=["unseen"],
        unseen=True,
    )
    figure = figure_json(figures.drift_figure([seen, unseen], title="gender shares"))
    names = [trace.get("name") for trace in figure["data"]]
    assert "robots (unseen in training)" in names
    unseen_trace = figure["data"][names.index("robots (unseen in training)")]
    assert unseen_trace["marker"]["symbol"] == "x"
    assert unseen_trace["y"] == [0.05]
    limits = figure["data"][names.index("training share ± limit")]
    assert limits["y"] == [0.6, 0.6, None, 0.4, 0.4]
    assert any("never had" in annotation["text"] for annotation in figure["layout"]["annotations"])


def test_hostile_group_names_are_shown_never_read() -> None:
    for name in HOSTILE:
        for figure in (
            figures.rate_figure([rate(name)], title=f"{name}: FNR", metric_label="FNR"),
            figures.drift_figure(
                [
                    figures.ShareSeries(
                        group=name,
                        seq=[1],
                        production=[0.1],
                        low=[0.0],
                        high=[0.2],
                        training=[0.1],
                        limit=[0.1],
                        status=["watching"],
                    )
                ],
                title=name,
            ),
        ):
            text = json.dumps(figure_json(figure))
            assert "<script>" not in text
            assert "<b>%{x}" not in text
            assert "%{x}<b>" not in text  # a name's own template is never filled
    text = json.dumps(figure_json(figures.rate_figure([rate(HOSTILE[0])], title="t", metric_label="FNR")))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_a_long_series_keeps_at_most_the_budget_per_line_with_its_extremes() -> None:
    n = 8760
    rng = np.random.default_rng(1)
    estimate = list(np.clip(0.03 + rng.normal(0, 0.005, n), 0, 1))
    estimate[4000] = 0.2  # a spike the chart must keep
    line = figures.RateSeries(
        group="women",
        seq=list(range(1, n + 1)),
        estimate=estimate,
        low=[0.0] * n,
        high=[0.3] * n,
        limit=[0.05] * n,
        boundary=[0.1] * n,
        status=["watching"] * 5000 + ["breach"] * (n - 5000),
    )
    data = traces(figures.rate_figure([line], title="t", metric_label="FNR"))
    for trace in data:
        assert len(trace["x"]) <= 2 * MAX_POINTS  # a band goes out and back
    main = next(trace for trace in data if trace.get("name") == "women")
    assert len(main["x"]) <= MAX_POINTS
    assert 4001 in main["x"]
    assert main["x"][0] == 1
    assert main["x"][-1] == n
    assert 5001 in main["x"]
    assert 5000 in main["x"]


def test_no_look_says_so() -> None:
    figure = figure_json(figures.rate_figure([], title="t", metric_label="FNR"))
    assert figure["layout"]["annotations"][0]["text"] == "No look judged yet"
