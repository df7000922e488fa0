"""What the document page shows besides the JSON: the verdicts, summarised per attribute."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from auditportal.evidence.models import VerdictDocument
from auditportal.fairness.documents.findings import document_attributes


@dataclass(frozen=True)
class AttributeSummary:
    name: str
    verdict: str | None
    reference: str | None
    counts: dict[str, int]
    groups: int


def attribute_summaries(document: VerdictDocument, value: dict[str, Any]) -> list[AttributeSummary]:
    attributes = document_attributes(value)
    return [
        AttributeSummary(
            name=name,
            verdict=section.get("verdict"),
            reference=section.get("reference"),
            counts=section.get("verdicts", {}),
            groups=len(section.get("groups", {})),
        )
        for name, section in attributes.items()
    ]


def pretty(value: dict[str, Any]) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
