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

from auditportal.fairness.documents.verdict_documents import PAIRED_COMPARISON
from auditportal.fairness.statistics.stats import Verdict

# The Verdict enum's members (the one vocabulary of verdicts), under the names the approvals use.
FAIL: Final = Verdict.FAIL
INCONCLUSIVE: Final = Verdict.INCONCLUSIVE
# A paired comparison's group verdicts that are findings (fairness/statistics/paired.py).
PAIRED_WORSE: Final = "WORSE"
PAIRED_INCONCLUSIVE: Final = "INCONCLUSIVE"


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
    (attributes as stored, comparisons as listed); a paired comparison's WORSE and INCONCLUSIVE groups
    (``paired_findings``)."""
    if document.get("kind") == PAIRED_COMPARISON:
        return list(paired_findings(document, sha256=sha256))
    return list(_findings(document, sha256))


def paired_findings(document: Mapping[str, Any], *, sha256: str) -> Iterator[Finding]:
    """What the committee must settle before "challenger B replaces champion A": each group the
    challenger is WORSE for (a FAIL: blocks approval until a waiver covers it), and each group left
    INCONCLUSIVE (acknowledged by every approving vote, with the rows that would decide it).

    One finding per group, named by the metric that decides it: for a WORSE group, its first metric
    judged WORSE; for an INCONCLUSIVE group, the undecided metric that needs the most rows. The
    ``reference`` is the champion; ``positives_needed`` the rows needed in that metric's denominator.
    """
    comparison = document.get("comparison") or {}
    champion = str((document.get("champion") or comparison.get("champion") or {}).get("column"))
    challenger = str((document.get("challenger") or comparison.get("challenger") or {}).get("column"))
    for attribute, section in (comparison.get("attributes") or {}).items():
        metrics: Mapping[str, Any] = section.get("metrics") or {}
        for group, verdict in (section.get("verdicts") or {}).items():
            if verdict not in (PAIRED_WORSE, PAIRED_INCONCLUSIVE):
                continue
            rows = [(metric, block, (block.get("groups") or {}).get(group) or {}) for metric, block in metrics.items()]
            if verdict == PAIRED_WORSE:
                chosen = [row for row in rows if row[2].get("verdict") == PAIRED_WORSE]
            else:
                chosen = sorted(
                    (row for row in rows if row[2].get("verdict") == PAIRED_INCONCLUSIVE),
                    key=lambda row: -(row[2].get("rows_needed") or 0),
                )
            metric, block, row = (chosen or rows or [("all", {}, {})])[0]
            needed = row.get("rows_needed") if verdict == PAIRED_INCONCLUSIVE else None
            denominator = str(block.get("denominator") or "rows")
            yield Finding(
                key=finding_key(document_sha256=sha256, attribute=attribute, metric=metric, group=str(group)),
                document_sha256=sha256,
                attribute=attribute,
                metric=metric,
                group=str(group),
                reference=f"champion {champion}",
                verdict=FAIL if verdict == PAIRED_WORSE else INCONCLUSIVE,
                difference=row.get("difference"),
                ci_low=row.get("low"),
                ci_high=row.get("high"),
                positives_needed=needed,
                needed_reason=(
                    f"{denominator} of the group (the metric's denominator), compared on the same rows"
                    if needed is not None
                    else None
                ),
                note=(
                    f"challenger {challenger} is worse than champion {champion} for this group"
                    if verdict == PAIRED_WORSE
                    else f"undecided whether challenger {challenger} is better or worse than champion {champion}"
                ),
            )


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
