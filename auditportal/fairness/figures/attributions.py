"""Why a gap exists (docs/attributions.md): a trial's attributions summary as figures.

- :func:`gap_contributions_figure`: per group against its attribute's reference group, the features that
  contribute most to the gap in mean score (or in recall among the true positives), each bar with its
  bootstrap interval; the other features' contributions in one bar, so that the bars add up to the gap.
- :func:`mean_abs_figure`: the features with the largest mean |attribution|, one bar per group.
- :func:`attribution_panels`: the first for paper (the signed report), cut into panels of at most
  ``printing.ROWS_PER_PANEL`` rows.

Plain data in (the summary document of fairness/statistics/attributions.summarise), a plotly figure out;
every user string (attribute, group and feature names come from the dataset's file) through ``text.plain``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from auditportal.fairness.figures import palette, printing
from auditportal.fairness.figures.screen import narrow_meta
from auditportal.fairness.figures.text import plain, shorten

if TYPE_CHECKING:
    import plotly.graph_objects as go

TOP_FEATURES = 6
LABEL_CHARS = 28
TITLE_CHARS = 60
# On a phone (fairness/figures/screen.py): shorter labels and titles, fewer ticks.
NARROW_LABEL_CHARS = 12
NARROW_GROUP_CHARS = 14
NARROW_TICKS = 5
ROW_PX = 26
PANEL_GAP_PX = 64
OTHERS = "other features"
# Bars by the sign of the contribution: towards the group's higher score, towards its lower score.
RAISES = palette.SERIES[0]  # blue
LOWERS = palette.SERIES[5]  # vermillion
OTHERS_COLOUR = palette.MUTED
GAP_KINDS = {"score_gap": "mean score", "recall_gap": "recall among the true positives"}


@dataclass(frozen=True)
class GroupGap:
    """One group's gap against the reference, as bars: (feature, contribution, low, high), largest first,
    the other features last (low and high None); ``beyond``: the features whose interval excludes 0."""

    group: str
    reference: str
    total: float
    bars: tuple[tuple[str, float, float | None, float | None], ...]
    beyond: frozenset[str] = frozenset()
    interval: tuple[float, float] | None = None

    @property
    def title(self) -> str:
        low_high = f" [{self.interval[0]:+.3f}, {self.interval[1]:+.3f}]" if self.interval else ""
        return f"gap {self.total:+.3f}{low_high}"


def group_gaps(section: Mapping[str, Any], *, kind: str = "score_gap", top: int = TOP_FEATURES) -> list[GroupGap]:
    """The groups of one attribute's section (not its reference) with a ``kind`` gap, each with its ``top``
    features by |contribution| and the rest summed, so that the bars add up to the total."""
    reference = str(section.get("reference"))
    gaps = []
    for group, entry in (section.get("groups") or {}).items():
        gap = (entry or {}).get(kind)
        if str(group) == reference or not gap:
            continue
        contributions: Mapping[str, float] = gap.get("contributions") or {}
        intervals: Mapping[str, Sequence[float]] = gap.get("intervals") or {}
        ranked = sorted(contributions, key=lambda feature: (-abs(float(contributions[feature])), feature))
        bars: list[tuple[str, float, float | None, float | None]] = []
        for feature in ranked[:top]:
            low, high = ([*list(intervals.get(feature) or []), None, None])[:2]
            bars.append((feature, float(contributions[feature]), _number(low), _number(high)))
        rest = ranked[top:]
        if rest:
            bars.append((OTHERS, float(sum(float(contributions[feature]) for feature in rest)), None, None))
        interval = gap.get("interval")
        gaps.append(
            GroupGap(
                group=str(group),
                reference=reference,
                total=float(gap.get("total") or 0.0),
                bars=tuple(bars),
                beyond=frozenset(str(feature) for feature in gap.get("beyond_noise") or ()),
                interval=(float(interval[0]), float(interval[1])) if interval and len(interval) == 2 else None,
            )
        )
    return gaps


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def gap_contributions_figure(
    attribute: str,
    section: Mapping[str, Any],
    *,
    kind: str = "score_gap",
    top: int = TOP_FEATURES,
    row_px: int = ROW_PX,
    groups: Sequence[str] | None = None,
) -> go.Figure | None:
    """One panel per group of ``attribute`` against its reference: each top feature's contribution to the
    ``kind`` gap (horizontal bars, with the bootstrap interval as error bars), the other features summed;
    None when no group has that gap. ``groups``: only these groups (the report's panels)."""
    from plotly.subplots import make_subplots

    gaps = [gap for gap in group_gaps(section, kind=kind, top=top) if groups is None or gap.group in groups]
    if not gaps:
        return None
    counts = [len(gap.bars) for gap in gaps]
    plot_px = sum(counts) * row_px + PANEL_GAP_PX * (len(gaps) - 1)
    figure = make_subplots(
        rows=len(gaps),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=PANEL_GAP_PX / plot_px if len(gaps) > 1 else 0.0,
        row_heights=[count / sum(counts) for count in counts],
        subplot_titles=[
            plain(shorten(f"{attribute}: {gap.group} − {gap.reference}", TITLE_CHARS)) + f" ({gap.title})"
            for gap in gaps
        ],
    )
    wide: dict[str, Any] = {}
    narrow: dict[str, Any] = {}
    span = max(
        [abs(gap.total) for gap in gaps]
        + [abs(value) for gap in gaps for _f, c, low, high in gap.bars for value in (c, low, high) if value is not None]
        + [0.01]
    )
    for index, gap in enumerate(gaps, start=1):
        names = [feature for feature, _c, _l, _h in gap.bars]
        values = [c for _f, c, _l, _h in gap.bars]
        figure.add_bar(
            x=values,
            y=list(range(len(names))),
            orientation="h",
            marker={
                "color": [_colour(name, value, name in gap.beyond) for name, value in zip(names, values, strict=True)]
            },
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [0.0 if high is None else max(0.0, high - c) for _f, c, _l, high in gap.bars],
                "arrayminus": [0.0 if low is None else max(0.0, c - low) for _f, c, low, _h in gap.bars],
                "color": palette.INK,
                "thickness": 1.5,
                "width": 4,
            },
            customdata=[
                [
                    plain(feature),
                    ("" if low is None else f"[{low:+.4f}, {high:+.4f}]")
                    + ("" if feature == OTHERS else (" beyond noise" if feature in gap.beyond else " within noise")),
                    plain(f"{attribute}: {gap.group} − {gap.reference}"),
                ]
                for feature, _c, low, high in gap.bars
            ],
            hovertemplate="%{customdata[2]}<br>%{customdata[0]}: %{x:+.4f} %{customdata[1]}<extra></extra>",
            showlegend=False,
            row=index,
            col=1,
        )
        figure.add_vline(x=0, line={"color": palette.MUTED, "width": 1}, row=index, col=1)
        suffix = "" if index == 1 else str(index)
        wide[f"yaxis{suffix}.ticktext"] = [plain(shorten(feature, LABEL_CHARS)) for feature in names]
        narrow[f"yaxis{suffix}.ticktext"] = [plain(shorten(feature, NARROW_LABEL_CHARS)) for feature in names]
        wide[f"xaxis{suffix}.nticks"] = None
        narrow[f"xaxis{suffix}.nticks"] = NARROW_TICKS
        wide[f"annotations[{index - 1}].text"] = figure.layout.annotations[index - 1].text
        narrow[f"annotations[{index - 1}].text"] = (
            plain(shorten(gap.group, NARROW_GROUP_CHARS)) + f" ({gap.total:+.3f})"
        )
        figure.update_yaxes(
            tickmode="array",
            tickvals=list(range(len(names))),
            ticktext=wide[f"yaxis{suffix}.ticktext"],
            range=[len(names) - 0.5, -0.5],
            showgrid=False,
            zeroline=False,
            fixedrange=True,
            row=index,
            col=1,
        )
        figure.update_xaxes(
            range=[-span * 1.1, span * 1.1], showticklabels=True, gridcolor=palette.GRID, zeroline=False,
            tickformat="+.3f", row=index, col=1,
        )  # fmt: skip
    figure.update_xaxes(
        title={"text": f"contribution to the gap in {GAP_KINDS.get(kind, kind)}", "font": {"size": 12}},
        row=len(gaps),
        col=1,
    )
    figure.update_annotations(font={"size": 13, "color": palette.INK}, xanchor="left", x=0)
    figure.update_layout(
        palette.base_layout(
            height=plot_px + 130,
            margin={"l": 10, "r": 20, "t": 50, "b": 60},
            showlegend=False,
            hoverlabel={"align": "left"},
            bargap=0.35,
            meta=narrow_meta(narrow, wide),
        )
    )
    figure.update_yaxes(automargin=True)
    return figure


def _colour(feature: str, value: float, beyond: bool) -> str:
    if feature == OTHERS:
        return OTHERS_COLOUR
    colour = RAISES if value >= 0 else LOWERS
    # A contribution within its sampling noise (its interval holds 0) is drawn pale.
    return colour if beyond else _pale(colour)


def _pale(colour: str) -> str:
    red, green, blue = (int(colour[at : at + 2], 16) for at in (1, 3, 5))
    return f"rgba({red}, {green}, {blue}, 0.35)"


def mean_abs_features(section: Mapping[str, Any], *, top: int = TOP_FEATURES) -> list[str]:
    """The ``top`` features of one attribute's section by their largest mean |attribution| over its groups."""
    largest: dict[str, float] = {}
    for entry in (section.get("groups") or {}).values():
        for feature, value in ((entry or {}).get("mean_abs") or {}).items():
            largest[feature] = max(largest.get(feature, 0.0), float(value))
    return sorted(largest, key=lambda feature: (-largest[feature], feature))[:top]


def mean_abs_figure(attribute: str, section: Mapping[str, Any], *, top: int = TOP_FEATURES) -> go.Figure | None:
    """The ``top`` features by mean |attribution|, one bar per group of ``attribute`` (the reference
    group's too); None when there are none."""
    import plotly.graph_objects as go

    features = mean_abs_features(section, top=top)
    groups = section.get("groups") or {}
    if not features or not groups:
        return None
    figure = go.Figure()
    reference = str(section.get("reference"))
    for index, (group, entry) in enumerate(groups.items()):
        values = (entry or {}).get("mean_abs") or {}
        mark = " (reference)" if str(group) == reference else ""
        name = plain(shorten(str(group), LABEL_CHARS)) + mark
        figure.add_bar(
            x=[float(values.get(feature, 0.0)) for feature in features],
            y=list(range(len(features))),
            orientation="h",
            name=name,
            marker={"color": palette.series_colour(index)},
            customdata=[plain(feature) for feature in features],
            hovertemplate=f"{plain(group)}{mark}<br>%{{customdata}}: %{{x:.4f}}<extra></extra>",
        )
    rows = len(features) * max(1, len(groups))
    figure.update_layout(
        palette.base_layout(
            height=min(900, 120 + rows * 14 + len(features) * 10),
            margin={"l": 10, "r": 20, "t": 20, "b": 50},
            barmode="group",
            legend={"orientation": "h", "x": 0, "y": 1, "yref": "container", "yanchor": "top"},
            hoverlabel={"align": "left"},
            meta=narrow_meta(
                {"yaxis.ticktext": [plain(shorten(feature, NARROW_LABEL_CHARS)) for feature in features]},
                {"yaxis.ticktext": [plain(shorten(feature, LABEL_CHARS)) for feature in features]},
            ),
        )
    )
    figure.update_yaxes(
        tickmode="array",
        tickvals=list(range(len(features))),
        ticktext=[plain(shorten(feature, LABEL_CHARS)) for feature in features],
        range=[len(features) - 0.5, -0.5],
        automargin=True,
        fixedrange=True,
        showgrid=False,
    )
    figure.update_xaxes(title={"text": "mean |attribution|", "font": {"size": 12}}, rangemode="tozero")
    return figure


@dataclass(frozen=True)
class AttributionPanel:
    """One printed panel: one attribute, some of its groups against the reference."""

    attribute: str
    title: str
    figure: go.Figure
    height: int


def attribution_panels(
    document: Mapping[str, Any], *, top: int = 5, max_rows: int = printing.ROWS_PER_PANEL
) -> list[AttributionPanel]:
    """The score-gap contributions of every attribute for paper: each attribute's groups in panels of at most
    ``max_rows`` bars (a group's bars kept together), rows ``printing.ROW_PX`` high."""
    panels = []
    for attribute, section in (document.get("attributes") or {}).items():
        gaps = group_gaps(section, top=top)
        rows = [(gap.group, bar) for gap in gaps for bar in gap.bars]
        chunks = printing.panels(rows, block=lambda row: row[0], max_rows=max_rows, max_blocks=max_rows)
        for number, chunk in enumerate(chunks, start=1):
            groups = list(dict.fromkeys(group for group, _bar in chunk))
            figure = gap_contributions_figure(str(attribute), section, top=top, row_px=printing.ROW_PX, groups=groups)
            if figure is None:
                continue
            part = f" ({number} of {len(chunks)})" if len(chunks) > 1 else ""
            panels.append(
                AttributionPanel(
                    attribute=str(attribute),
                    title=f"{attribute}{part}",
                    figure=figure,
                    height=int(figure.layout.height),
                )
            )
    return panels
