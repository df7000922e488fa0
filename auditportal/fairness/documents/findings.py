"""What a committee must settle before approving a verdict document: its judged FAIL and INCONCLUSIVE
comparisons (docs/approvals.md).

A frozen document (docs/verdict-documents.md) holds its comparisons per attribute: a prediction audit's
under ``audit.attributes``, a trial validation's under ``attributes``. Each judged comparison that is not
PASS is a finding: a FAIL blocks approval until a waiver for it is approved; an INCONCLUSIVE one must be
acknowledged, with the label positives it would need (``positives_needed``), by every approving vote.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final

from auditportal.fairness.statistics.stats import Verdict

# The Verdict enum's members (the one vocabulary of verdicts), under the names the approvals use.
FAIL: Final = Verdict.FAIL
INCONCLUSIVE: Final = Verdict.INCONCLUSIVE


@dataclass(frozen=True)
class Finding:
    """One judged comparison of one document that did not PASS.

    ``key`` names it among all findings of any document: a hash of the document's SHA-256, the
    attribute, the metric and the group (forms and the API pass it back to say which comparison).
    """

    key: str
    document_sha256: str
    attribute: str
    metric: str
    group: str
    reference: str
    verdict: str
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    positives_needed: int | None
    needed_reason: str | None
    note: str | None

    @property
    def label(self) -> str:
        """How people read it: ``gender: tpr of female against male``."""
        return f"{self.attribute}: {self.metric} of {self.group} against {self.reference}"

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "label": self.label}


def finding_key(*, document_sha256: str, attribute: str, metric: str, group: str) -> str:
    # NUL cannot occur in a column name or value read from a file (the readers refuse it), so the
    # joined parts never read alike for two different comparisons.
    joined = "\0".join((document_sha256, attribute, metric, group))
    return hashlib.sha256(joined.encode()).hexdigest()[:20]


def document_findings(document: Mapping[str, Any], *, sha256: str) -> list[Finding]:
    """The judged FAIL and INCONCLUSIVE comparisons of a verdict document, in document order
    (attributes as stored, comparisons as listed)."""
    return list(_findings(document, sha256))


def _findings(document: Mapping[str, Any], sha256: str) -> Iterator[Finding]:
    for attribute, section in document_attributes(document).items():
        for comparison in section.get("comparisons") or []:
            verdict = comparison.get("verdict")
            # Documents from before the policy chose its metrics judged every comparison.
            if verdict not in (FAIL, INCONCLUSIVE) or not comparison.get("judged", True):
                continue
            metric, group = str(comparison.get("metric")), str(comparison.get("group"))
            yield Finding(
                key=finding_key(document_sha256=sha256, attribute=attribute, metric=metric, group=group),
                document_sha256=sha256,
                attribute=attribute,
                metric=metric,
                group=group,
                reference=str(comparison.get("reference")),
                verdict=verdict,
                difference=comparison.get("difference"),
                ci_low=comparison.get("ci_low"),
                ci_high=comparison.get("ci_high"),
                positives_needed=comparison.get("positives_needed"),
                needed_reason=comparison.get("needed_reason"),
                note=comparison.get("note"),
            )


def document_attributes(document: Mapping[str, Any]) -> Mapping[str, Any]:
    """The judged sections of a verdict document of either kind, per attribute key: a prediction
    audit's under ``audit.attributes``, a trial validation's under ``attributes``."""
    if document.get("kind") == "prediction_audit":
        audit = document.get("audit") or {}
        return audit.get("attributes") or {}
    return document.get("attributes") or {}
