"""The report context: plain data, its JSON form, the plain-language summary and the CSV group tables."""

from __future__ import annotations

import csv
import io
import json

import pytest

from auditportal.audits.models import PredictionAudit
from auditportal.evidence.selectors import verdict_document_of_audit
from auditportal.fairness.findings import document_attributes
from auditportal.fairness.report_context import (
    Acknowledgement,
    Decision,
    EvidenceDocument,
    Person,
    PolicyProvenance,
    ReportContext,
    Subject,
    Vote,
    Waiver,
    display_time,
    group_table_csv,
)
from tests.reports.helpers import decided_context

pytestmark = pytest.mark.django_db

POLICY = PolicyProvenance(
    version=2, tolerance=0.05, alpha=0.05, metrics=("tpr",), reference_rule="largest", min_group_size=None
)


def _context(document: EvidenceDocument, **extra: object) -> ReportContext:
    return ReportContext(
        title="T",
        organisation="Org",
        subject=Subject(kind="prediction_audit", label="Prediction audit #1", model="m"),
        policy=POLICY,
        documents=(document,),
        **extra,  # type: ignore[arg-type]
    )


@pytest.fixture
def document(audit: PredictionAudit) -> EvidenceDocument:
    stored = verdict_document_of_audit(audit=audit)
    return EvidenceDocument(label="Prediction audit #1", sha256=stored.sha256, canonical=stored.canonical)


def test_the_json_form_round_trips_and_its_hash_is_stable(audit: PredictionAudit, member_dave: object) -> None:
    context = decided_context(audit, None, [member_dave])  # type: ignore[list-item]
    value = json.loads(json.dumps(context.as_json()))
    again = ReportContext.from_json(value)
    assert again == context
    assert again.sha256 == context.sha256
    assert isinstance(again.votes[0], Vote)
    assert isinstance(again.signatories, tuple)


def test_an_unknown_key_or_schema_is_refused(document: EvidenceDocument) -> None:
    value = _context(document).as_json()
    with pytest.raises(ValueError, match="ReportContext: unknown keys colour"):
        ReportContext.from_json({**value, "colour": "red"})
    with pytest.raises(ValueError, match="report context schema 9 is not 1"):
        ReportContext.from_json({**value, "schema_version": 9})


def test_bad_values_are_refused(document: EvidenceDocument) -> None:
    with pytest.raises(ValueError, match="decision outcome 'maybe' is not one of"):
        _context(document, decision=Decision(outcome="maybe", at="2026-01-01T00:00:00Z", requester=None))
    person = Person(key="dave", name="Dave", role="Ethics-committee member")
    with pytest.raises(ValueError, match="a signatory is listed twice"):
        _context(document, signatories=(person, person))
    with pytest.raises(ValueError, match="vote 'yes' of dave is not one of"):
        _context(document, votes=(Vote(member=person, vote="yes", reason="", at=""),))


def test_the_summary_counts_the_judged_comparisons_in_plain_words(document: EvidenceDocument) -> None:
    attributes = document_attributes(document.document)
    judged = [item for section in attributes.values() for item in section["comparisons"] if item.get("judged", True)]
    counts = {
        verdict: sum(item["verdict"] == verdict for item in judged) for verdict in ("PASS", "FAIL", "INCONCLUSIVE")
    }
    summary = _context(
        document,
        waivers=(Waiver(scope="gender: tpr", reason="r", expires="2027-01-01"),),
        acknowledgements=(Acknowledgement(item="gender: fpr", positives_needed="230"),),
    ).summary
    assert summary[0] == "This report describes Prediction audit #1; no decision is recorded in it."
    assert (
        f"Of {len(judged)} comparisons, {counts['PASS']} showed no unfair gap (PASS), {counts['FAIL']} showed an "
        f"unfair gap beyond reasonable doubt (FAIL) and {counts['INCONCLUSIVE']} could not be decided"
    ) in " ".join(summary)
    assert "A gap larger than 5 percentage points counts as unfair (fairness policy version 2)." in " ".join(summary)
    assert "1 failing item was accepted by a waiver" in " ".join(summary)
    assert "1 undecided item was acknowledged by the approving members." in summary


def test_the_group_table_has_every_group_with_unrounded_numbers(document: EvidenceDocument) -> None:
    rows = list(csv.DictReader(io.StringIO(group_table_csv(document))))
    attributes = document_attributes(document.document)
    expected = [(name, group) for name, section in attributes.items() for group in section["groups"]]
    assert [(row["attribute"], row["group"]) for row in rows] == expected
    for row in rows:
        entry = attributes[row["attribute"]]["groups"][row["group"]]
        assert int(row["n"]) == entry["n"]
        assert int(row["positives"]) == entry["positives"]
        assert row["is_reference"] == ("true" if row["group"] == attributes[row["attribute"]]["reference"] else "false")
        for rate in ("tpr", "fpr", "ppv"):
            if entry[rate] is None:
                assert row[rate] == row[f"{rate}_low"] == ""
            else:
                assert float(row[rate]) == entry[rate]
                assert float(row[f"{rate}_low"]) == entry["ci"][rate][0]


def test_times_print_in_utc() -> None:
    assert display_time("2026-11-30T15:05:00+01:00") == "2026-11-30 14:05 UTC"
    assert display_time("2026-11-30T14:05:00Z") == "2026-11-30 14:05 UTC"
    assert display_time("yesterday") == "yesterday"
