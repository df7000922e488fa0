"""A paired comparison frozen as a verdict document (docs/verdict-documents.md, kind paired_comparison):
in the comparison's transaction, canonical, its SHA-256 stable, named in the API's answer."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from django.test import Client

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.comparisons import services
from auditportal.comparisons.models import PairedComparison
from auditportal.evidence.models import DocumentKind, FreezeTrigger, VerdictDocument
from auditportal.fairness.documents import verdict_documents
from auditportal.fairness.statistics.paired_file import PairedSpec

SPEC = PairedSpec.from_input(label="label", attributes="gender", champion="model_a", challenger="model_b")


def compare(user: User, path: Path, spec: PairedSpec = SPEC) -> PairedComparison:
    return services.comparison_create(user=user, source=path, original_name="paired.csv", spec=spec)


@pytest.mark.django_db
def test_a_comparison_is_frozen_with_its_document_in_the_same_transaction(bob: User, paired_csv: Path) -> None:
    comparison = compare(bob, paired_csv)
    document = VerdictDocument.objects.get()
    assert document.kind == DocumentKind.PAIRED_COMPARISON
    assert document.paired_comparison_id == comparison.pk
    assert document.trial_id is None
    assert document.prediction_audit_id is None
    assert document.step is None
    assert document.trigger == FreezeTrigger.CREATED
    assert document.policy_id == comparison.policy_id
    assert hashlib.sha256(document.canonical_bytes).hexdigest() == document.sha256
    value = document.document
    assert value["kind"] == "paired_comparison"
    assert value["schema_version"] == verdict_documents.SCHEMA_VERSION
    assert value["champion"] == {"column": "model_a", "threshold": None}
    assert value["challenger"] == {"column": "model_b", "threshold": None}
    assert value["file"] == {"name": "paired.csv", "sha256": comparison.sha256, "rows": comparison.num_rows}
    assert value["policy"]["version"] == comparison.policy.version  # type: ignore[union-attr]
    assert value["policy"]["tolerance"] == comparison.policy.tolerance  # type: ignore[union-attr]
    assert value["comparison"] == comparison.result
    # Group f: the challenger is better; m: undecided, with the rows that would decide it.
    gender = value["comparison"]["attributes"]["gender"]
    assert gender["verdicts"] == {"f": "BETTER", "m": "INCONCLUSIVE"}
    accuracy_m = gender["metrics"]["accuracy"]["groups"]["m"]
    assert accuracy_m["rows_needed"] > 0
    assert 0 <= accuracy_m["p_value"] <= 1
    assert value["paired_verdict"] == "INCONCLUSIVE"
    assert value["verdict"] == "INCONCLUSIVE"
    event = Event.objects.get(verb=Verb.VERDICT_DOCUMENT_FROZEN)
    assert event.data["subject"] == f"comparisons.pairedcomparison:{comparison.pk}"
    assert event.data["sha256"] == document.sha256


@pytest.mark.django_db
def test_the_canonical_bytes_and_their_sha256_are_stable(bob: User, paired_csv: Path) -> None:
    first, second = compare(bob, paired_csv), compare(bob, paired_csv)
    one, two = (VerdictDocument.objects.get(paired_comparison=c) for c in (first, second))
    # The same file, parameters and policy: byte-identical documents (no time, no id inside).
    assert one.sha256 == two.sha256
    assert one.canonical == two.canonical
    value = json.loads(one.canonical)
    again = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert again == one.canonical
    # Rebuilt from the stored comparison, the document hashes the same; freezing again stores nothing new.
    assert services.verdict_document_freeze_paired_comparison(comparison=first).pk == one.pk
    assert VerdictDocument.objects.count() == 2


def test_the_document_verdict_is_the_committees_word_for_the_worst_group() -> None:
    def result(*verdicts: str) -> dict[str, object]:
        return {"attributes": {"a": {"verdicts": {str(i): v for i, v in enumerate(verdicts)}}}}

    assert verdict_documents.paired_headline(result("BETTER", "WORSE", "INCONCLUSIVE")) == "FAIL"
    assert verdict_documents.paired_headline(result("BETTER", "INCONCLUSIVE")) == "INCONCLUSIVE"
    assert verdict_documents.paired_headline(result("BETTER", "EQUIVALENT", "DIFFERENT")) == "PASS"
    assert verdict_documents.paired_headline({"attributes": {}}) is None


@pytest.mark.django_db
def test_the_api_answer_names_the_document_by_its_ref(bob: User, paired_csv: Path) -> None:
    client = Client()
    client.force_login(bob)
    with paired_csv.open("rb") as handle:
        answer = client.post(
            "/api/v1/comparisons/",
            {
                "file": handle,
                "label": "label",
                "attributes": ["gender"],
                "champion": "model_a",
                "challenger": "model_b",
            },
        )
    assert answer.status_code == 201, answer.content
    document = VerdictDocument.objects.get()
    assert answer.json()["documents"] == [
        {"id": document.pk, "sha256": document.sha256, "url": f"/api/v1/documents/{document.pk}/"}
    ]
    detail = client.get(f"/api/v1/documents/{document.pk}/").json()
    assert detail["kind"] == "paired_comparison"
    assert detail["subject"] == {"type": "paired_comparison", "id": answer.json()["id"]}
    assert client.get(f"/api/v1/comparisons/{answer.json()['id']}/").json()["documents"] == answer.json()["documents"]
