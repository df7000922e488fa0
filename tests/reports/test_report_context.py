"""The report context: plain data, its JSON form, the plain-language summary and the CSV group tables."""

from __future__ import annotations

import csv
import hashlib
import io
import json

import pytest

from auditportal.audits.models import PredictionAudit
from auditportal.evidence.selectors import verdict_document_of_audit
from auditportal.fairness.documents.canonical import canonical_sha256
from auditportal.fairness.documents.findings import document_attributes
from auditportal.fairness.documents.report_context import (
    Acknowledgement,
    Decision,
    EvidenceDocument,
    ExperimentTrials,
    Person,
    PolicyProvenance,
    ReportContext,
    Subject,
    TrialOverview,
    Vote,
    Waiver,
    checkpoint_label,
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
    with pytest.raises(ValueError, match="report context schema 9 is not one of 1, 2, 3"):
        ReportContext.from_json({**value, "schema_version": 9})


def test_a_version_1_context_is_read_and_keeps_its_json_and_hash(document: EvidenceDocument) -> None:
    # As a report stored before the table of trials was added holds it: no "trials" key.
    value = _context(document).as_json()
    del value["trials"], value["attributions"]
    value["schema_version"] = 1
    stored = canonical_sha256(value)
    again = ReportContext.from_json(value)
    assert again.trials is None
    assert again.as_json() == value
    assert again.sha256 == stored


def test_a_version_2_context_is_read_and_keeps_its_json_and_hash(document: EvidenceDocument) -> None:
    # As a report stored before the attributions were added holds it: no "attributions" key.
    value = _context(document).as_json()
    del value["attributions"]
    value["schema_version"] = 2
    stored = canonical_sha256(value)
    again = ReportContext.from_json(value)
    assert again.attributions == ()
    assert again.as_json() == value
    assert again.sha256 == stored


def _trial(number: int, *, reviewed: bool = False, **extra: object) -> TrialOverview:
    return TrialOverview(number=number, reviewed=reviewed, **extra)  # type: ignore[arg-type]


def test_the_trials_of_an_experiment_have_one_reviewed_trial_and_paired_series() -> None:
    with pytest.raises(ValueError, match="experiment 3: 0 trials are marked as reviewed, not one"):
        ExperimentTrials(label="experiment 3", tolerance=0.05, noise_floor=None, trials=(_trial(1), _trial(2)))
    with pytest.raises(ValueError, match="experiment 3: 2 trials are marked as reviewed, not one"):
        ExperimentTrials(
            label="experiment 3",
            tolerance=0.05,
            noise_floor=None,
            trials=(_trial(1, reviewed=True), _trial(2, reviewed=True)),
        )
    with pytest.raises(ValueError, match="trial 4: 2 steps, 1 eod values and 2 verdicts"):
        _trial(4, steps=(1, 2), eod_series=(0.1,), verdicts=(None, "PASS"))


def test_the_table_of_trials_puts_the_reviewed_one_first_and_the_summary_names_it(
    document: EvidenceDocument,
) -> None:
    trials = ExperimentTrials(
        label="experiment 3 (search)",
        tolerance=0.05,
        noise_floor=0.02,
        trials=(
            _trial(2, eod=0.031, lowest_eod=0.0123, lowest_eod_step=400, latest_step=800, verdict="PASS"),
            _trial(1, hparams=(("lr", "0.01"), ("search_lambda", "0.5"))),
            _trial(3, reviewed=True, accuracy=0.81234, eod=0.02, noise_floor=0.0101),
        ),
    )
    context = _context(document, trials=trials)
    rows = context.trial_rows
    assert [(row.number, row.reviewed) for row in rows] == [(3, True), (1, False), (2, False)]
    assert (rows[0].accuracy, rows[0].eod, rows[0].noise_floor, rows[0].step) == ("0.812", "0.0200", "0.0101", "—")
    assert (rows[2].lowest_eod, rows[2].step, rows[2].verdict) == ("0.0123 (step 400)", "800", "PASS")
    assert rows[1].hparams == "lr=0.01, search_lambda=0.5"
    assert (
        "Only trial 3 was decided on. It is one of 3 trials of experiment 3 (search), which were trained with "
        "different settings"
    ) in " ".join(context.summary)
    assert ReportContext.from_json(json.loads(json.dumps(context.as_json()))) == context


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
    comparisons = f"{len(judged)} comparison{'s' if len(judged) != 1 else ''}"
    assert (
        f"Of {comparisons}, {counts['PASS']} showed no unfair gap (PASS), {counts['FAIL']} showed an "
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


@pytest.mark.parametrize(
    ("checkpoint", "printed"),
    [
        ("5b0c7a3e-1f2d-4c6b-9a8e-0d1c2b3a4f5e", "5b0c7a3e-1f2d-4c6b-9a8e-0d1c2b3a4f5e"),  # Determined: its UUID
        (
            "/work/main/var/runs/exp-3/trial-1/xdg/determined/5b0c7a3e-1f2d-4c6b-9a8e-0d1c2b3a4f5e/",
            "local checkpoint 5b0c7a3e-1f2d-4c6b-9a8e-0d1c2b3a4f5e",
        ),
        ("var/runs/exp-3/ckpt-12", "local checkpoint ckpt-12"),
        ("C:\\runs\\ckpt-12", "local checkpoint ckpt-12"),
        (
            "/srv/runs/exp 3/my checkpoint!",
            "local checkpoint " + hashlib.sha256(b"/srv/runs/exp 3/my checkpoint!").hexdigest()[:12],
        ),
        ("/", "local checkpoint " + hashlib.sha256(b"/").hexdigest()[:12]),
    ],
)
def test_a_checkpoint_prints_without_the_servers_folders(checkpoint: str, printed: str) -> None:
    assert checkpoint_label(checkpoint) == printed
