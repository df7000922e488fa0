"""A trial's attributions summary as the page shows it: per attribute its figures (as the JSON plotly.js
draws), its groups' gaps in a table and its proxy features in another."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from auditportal.fairness.figures import attributions as figures
from auditportal.fairness.figures.serialize import kept_figure_json

# The proxies table lists every feature; the strongest proxies first.
PROXY_ORDER = "auc"


@dataclass(frozen=True)
class GroupRow:
    group: str
    is_reference: bool
    sample: Any
    population: Any
    positives: Any
    score_gap: float | None
    recall_gap: float | None
    top_feature: str  # the largest contribution to its score gap, with its value
    beyond_noise: list[str]  # the features whose contribution to its score gap lies beyond sampling noise


@dataclass(frozen=True)
class ProxyRow:
    feature: str
    auc: float | None
    mutual_information: float | None
    auc_group: str  # the group the feature tells apart best
    auc_chance: float | None  # what an unrelated feature reaches by sampling alone (95%)
    mutual_information_chance: float | None

    @property
    def beyond_chance(self) -> bool:
        return _above(self.auc, self.auc_chance) or _above(self.mutual_information, self.mutual_information_chance)


def _above(value: float | None, chance: float | None) -> bool:
    return value is not None and chance is not None and value > chance


@dataclass(frozen=True)
class AttributeView:
    name: str
    slug: str  # the attribute's position, for element ids (names come from a file)
    reference: str
    groups: list[GroupRow]
    proxies: list[ProxyRow]
    score_figure: dict[str, Any] | None
    recall_figure: dict[str, Any] | None
    mean_abs_figure: dict[str, Any] | None

    # The ids of the figures' JSON script elements.
    @property
    def score_id(self) -> str:
        return f"{self.slug}-score"

    @property
    def recall_id(self) -> str:
        return f"{self.slug}-recall"

    @property
    def mean_abs_id(self) -> str:
        return f"{self.slug}-mean-abs"


def attribute_views(document: Mapping[str, Any]) -> list[AttributeView]:
    views = []
    for index, (name, section) in enumerate((document.get("attributes") or {}).items(), start=1):
        reference = str(section.get("reference"))
        rows = []
        for group, entry in (section.get("groups") or {}).items():
            entry = entry or {}
            score = entry.get("score_gap") or {}
            recall = entry.get("recall_gap") or {}
            contributions: Mapping[str, float] = score.get("contributions") or {}
            top = max(contributions, key=lambda feature: abs(float(contributions[feature])), default=None)
            rows.append(
                GroupRow(
                    group=str(group),
                    is_reference=str(group) == reference,
                    sample=entry.get("sample"),
                    population=entry.get("population"),
                    positives=entry.get("positives"),
                    score_gap=score.get("total"),
                    recall_gap=recall.get("total"),
                    top_feature="" if top is None else f"{top} ({float(contributions[top]):+.3f})",
                    beyond_noise=[str(feature) for feature in score.get("beyond_noise") or []],
                )
            )
        proxies = [
            ProxyRow(
                feature=str(feature),
                auc=value.get("auc"),
                mutual_information=value.get("mutual_information"),
                auc_group="" if value.get("auc_group") is None else str(value.get("auc_group")),
                auc_chance=value.get("auc_chance"),
                mutual_information_chance=value.get("mutual_information_chance"),
            )
            for feature, value in (section.get("proxies") or {}).items()
        ]
        proxies.sort(key=lambda row: (-(row.auc if row.auc is not None else -1.0), row.feature))
        views.append(
            AttributeView(
                name=str(name),
                slug=f"attribute-{index}",
                reference=reference,
                groups=rows,
                proxies=proxies,
                score_figure=kept_figure_json(figures.gap_contributions_figure, str(name), section, kind="score_gap"),
                recall_figure=kept_figure_json(figures.gap_contributions_figure, str(name), section, kind="recall_gap"),
                mean_abs_figure=kept_figure_json(figures.mean_abs_figure, str(name), section),
            )
        )
    return views
