from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils.html import escape

from auditportal.accounts.models import User
from auditportal.audits.models import PredictionAudit
from auditportal.datasets.models import DatasetVersion
from auditportal.evidence.models import VerdictDocument
from auditportal.experiments.models import Trial
from auditportal.experiments.services import verdict_document_freeze_trial
from auditportal.fairness.documents.plain import document_plain_summary
from tests.evidence.helpers import trial_with_validations
from tests.factories import PredictionAuditFactory, client_for


@pytest.fixture
def audit(bob: User, dataset_storage: Path) -> PredictionAudit:
    return PredictionAuditFactory.create(created_by=bob)


@pytest.fixture
def document(audit: PredictionAudit) -> VerdictDocument:
    return audit.verdict_documents.get()


@pytest.fixture
def trial(demo_version: DatasetVersion, bob: User) -> Trial:
    return trial_with_validations(demo_version, bob)


def test_the_page_shows_the_hash_the_subject_the_policy_and_the_json(document: VerdictDocument, dave: User) -> None:
    response = client_for(dave).get(reverse("evidence:document", args=[document.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert f'<code class="hash" id="document-sha256">{document.sha256}</code>' in html
    assert f'href="/audits/predictions/{document.prediction_audit_id}/"' in html
    assert "version 1 (δ = 0.05, α = 0.05)" in html
    assert "automatically — frozen when the audit or comparison was made" in html
    assert '<tr data-attribute="gender">' in html
    assert "&quot;kind&quot;: &quot;prediction_audit&quot;" in html
    assert f'href="/documents/{document.pk}/canonical.json"' in html


def test_the_download_is_the_stored_bytes_and_hashes_to_the_documents_sha256(
    document: VerdictDocument, carol: User
) -> None:
    response = client_for(carol).get(reverse("evidence:canonical", args=[document.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert f'filename="verdict-document-{document.pk}-{document.sha256[:12]}.json"' in response["Content-Disposition"]
    assert hashlib.sha256(response.content).hexdigest() == document.sha256
    assert response.content == document.canonical.encode()


def test_the_api_returns_the_metadata_the_document_and_the_exact_bytes(document: VerdictDocument, dave: User) -> None:
    client = client_for(dave)
    response = client.get(reverse("api-verdict-document", args=[document.pk]))
    assert response.status_code == 200
    body = response.json()
    assert body["sha256"] == document.sha256
    assert body["subject"] == {"type": "prediction_audit", "id": document.prediction_audit_id}
    assert (body["kind"], body["step"], body["policy_version"], body["frozen_by"], body["trigger"]) == (
        "prediction_audit",
        None,
        1,
        None,
        "created",
    )
    assert body["document"] == json.loads(document.canonical)
    raw = client.get(body["canonical_url"])
    assert raw.status_code == 200
    assert raw["Content-Type"] == "application/json"
    assert hashlib.sha256(raw.content).hexdigest() == document.sha256


def test_outsiders_get_404_everywhere(document: VerdictDocument, oscar: User) -> None:
    client = client_for(oscar)
    for name in ("evidence:document", "evidence:canonical", "api-verdict-document", "api-verdict-document-canonical"):
        assert client.get(reverse(name, args=[document.pk])).status_code == 404, name


def test_the_audit_page_links_its_document_with_a_short_hash(document: VerdictDocument, carol: User) -> None:
    html = client_for(carol).get(reverse("audits:prediction", args=[document.prediction_audit_id])).content.decode()
    assert (
        f'href="/documents/{document.pk}/" title="SHA-256 {document.sha256}"><code>{document.sha256[:12]}</code>'
        in html
    )


def test_an_engineer_freezes_a_validation_from_the_experiment_page(trial: Trial, bob: User) -> None:
    client = client_for(bob)
    page = client.get(reverse("experiments:detail", args=[trial.experiment_id])).content.decode()
    assert f'action="/documents/trials/{trial.pk}/freeze/"' in page
    assert '<option value="2">step 2</option><option value="4" selected>step 4</option>' in page
    response = client.post(reverse("trial-validation-freeze", args=[trial.pk]), {"step": "2"})
    document = trial.verdict_documents.get()
    assert response.status_code == 302
    assert response["Location"] == f"/documents/{document.pk}/"
    assert (document.step, document.frozen_by, document.trigger) == (2, bob, "requested")
    page = client.get(reverse("experiments:detail", args=[trial.experiment_id])).content.decode()
    headline = document.document["headline"]
    assert f'<code>{document.sha256[:12]}</code></a> <span class="badge verdict-{headline["verdict"]}">' in page
    families = headline["families"]
    assert f"(α 0.05 over {families} famil{'y' if families == 1 else 'ies'}; step 2, policy v1)</small>" in page
    detail = client.get(response["Location"]).content.decode()
    assert f"Trial {trial.number} of {trial.experiment.name}" in detail
    assert "by bob — frozen on request" in detail


def test_a_committee_member_sees_documents_but_no_freeze_action_and_may_not_post_one(
    trial: Trial, dave: User, oscar: User
) -> None:
    client = client_for(dave)
    page = client.get(reverse("experiments:detail", args=[trial.experiment_id])).content.decode()
    assert "Freeze validation" not in page
    assert client.post(reverse("trial-validation-freeze", args=[trial.pk]), {"step": "4"}).status_code == 403
    assert client_for(oscar).post(reverse("trial-validation-freeze", args=[trial.pk]), {"step": "4"}).status_code == 404
    assert not VerdictDocument.objects.exists()


def test_a_tampered_dataset_file_shows_its_message_and_freezes_nothing(trial: Trial, carol: User) -> None:
    path = trial.experiment.dataset_version.path
    path.write_bytes(path.read_bytes() + b"extra\n")
    response = client_for(carol).post(reverse("trial-validation-freeze", args=[trial.pk]), {"step": "4"}, follow=True)
    assert response.redirect_chain == [(f"/experiments/{trial.experiment_id}/", 302)]
    html = response.content.decode()
    assert "The file changed after registration" in html
    assert not VerdictDocument.objects.exists()


def test_a_step_without_validation_is_reported_on_the_experiment_page(trial: Trial, bob: User) -> None:
    response = client_for(bob).post(reverse("trial-validation-freeze", args=[trial.pk]), {"step": "3"}, follow=True)
    assert (
        f"Trial {trial.number} of experiment {trial.experiment_id} has no validation counts at step 3."
        in response.content.decode()
    )


def test_the_admin_only_reads_documents(document: VerdictDocument, django_user_model: type[User]) -> None:
    root = django_user_model.objects.create_superuser("root", "root@example.org", "a long passphrase")
    client = client_for(root)
    assert client.get(f"/admin/evidence/verdictdocument/{document.pk}/change/").status_code == 200  # view only
    assert client.get("/admin/evidence/verdictdocument/add/").status_code == 403
    changed = client.post(f"/admin/evidence/verdictdocument/{document.pk}/change/", {"sha256": "0" * 64})
    assert changed.status_code == 403
    deleted = client.post(f"/admin/evidence/verdictdocument/{document.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 403
    stored = VerdictDocument.objects.get(pk=document.pk)
    assert (stored.sha256, stored.canonical) == (document.sha256, document.canonical)


def test_a_trial_validation_document_draws_its_comparisons_against_its_policys_band(trial: Trial, bob: User) -> None:
    document = verdict_document_freeze_trial(user=bob, trial=trial, step=2)
    response = client_for(bob).get(reverse("evidence:document", args=[document.pk]))
    figure = response.context["forest_plot"]
    comparisons = document.document["attributes"]["gender"]["comparisons"]
    drawn = {tuple(key): x for trace in figure["data"] for key, x in zip(trace["customdata"], trace["x"], strict=True)}
    assert drawn == {("gender", item["group"], item["metric"]): item["difference"] for item in comparisons}
    tolerance = document.document["policy"]["tolerance"]
    assert {(shape["x0"], shape["x1"]) for shape in figure["layout"]["shapes"] if shape["type"] == "rect"} == {
        (-tolerance, tolerance)
    }
    assert 'data-figure-json="forest-plot-data"' in response.content.decode()


def test_the_page_states_the_level_of_the_documents_verdict(document: VerdictDocument, dave: User) -> None:
    html = client_for(dave).get(reverse("evidence:document", args=[document.pk])).content.decode()
    headline = document.document["headline"]
    assert document.schema_version == 2
    families = headline["families"]
    assert f"held at α = 0.05 over all {families} judged famil{'y' if families == 1 else 'ies'}" in html


def test_a_document_of_schema_1_keeps_its_bytes_and_reads_as_the_worst_over_the_families(
    document: VerdictDocument, dave: User
) -> None:
    # What version 1 froze: no headline, its verdict the worst over the families.
    value = {key: item for key, item in document.document.items() if key != "headline"}
    value["schema_version"] = 1
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    old = VerdictDocument.objects.create(
        kind=document.kind,
        prediction_audit=document.prediction_audit,
        schema_version=1,
        canonical=canonical,
        sha256=hashlib.sha256(canonical.encode()).hexdigest(),
        policy=document.policy,
        trigger="requested",
    )
    client = client_for(dave)
    html = client.get(reverse("evidence:document", args=[old.pk])).content.decode()
    assert "the worst of the families' verdicts, each at α within its family (schema version 1: no headline)" in html
    assert "version 1, code" in html
    # Shown and served as stored: the new code re-renders nothing into its bytes.
    served = client.get(reverse("evidence:canonical", args=[old.pk])).content
    assert served == canonical.encode()
    assert hashlib.sha256(served).hexdigest() == old.sha256


def test_the_page_opens_with_the_plain_language_paragraph_and_folds_the_json(
    document: VerdictDocument, dave: User
) -> None:
    html = client_for(dave).get(reverse("evidence:document", args=[document.pk])).content.decode()
    summary = document_plain_summary(document.document)
    assert summary.judged.startswith("This document judged 12 rows of “scores.csv” for “gender”")
    # Before the facts: the first thing on the page after its heading.
    assert html.index('id="plain-summary"') < html.index('id="document-sha256"')
    assert f"<p>{escape(summary.text)}</p>" in html
    assert '<details class="card document-source" id="document-source">' in html
    assert html.index('id="document-source"') < html.index('<pre class="document-json">')
