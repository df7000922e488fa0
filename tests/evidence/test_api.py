"""The documents in the API (issue 28): GET /api/v1/documents/ lists what the caller may read, filtered
by subject, SHA-256, policy version and kind; every answer that creates or names evidence carries its
documents as refs (id, sha256, url), so that a pipeline with an API token can audit a file and open a
review request with the ids it was given."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from auditportal.accounts import services as account_services
from auditportal.accounts.models import Role, TokenScope, User
from auditportal.accounts.services import role_grant
from auditportal.approvals import services as approval_services
from auditportal.audits.models import PredictionAudit
from auditportal.datasets.models import DatasetVersion
from auditportal.evidence.models import VerdictDocument
from auditportal.experiments import services as experiment_services
from auditportal.experiments.models import Trial
from tests.audits.conftest import PREDICTIONS_CSV
from tests.evidence.helpers import policy_v2, trial_with_validations
from tests.factories import PredictionAuditFactory, client_for

DOCUMENTS = "/api/v1/documents/"
AUDITS = "/api/v1/audits/predictions/"


def _ref(document: VerdictDocument) -> dict[str, Any]:
    return {"id": document.pk, "sha256": document.sha256, "url": f"/api/v1/documents/{document.pk}/"}


def _ids(response: Any) -> list[int]:
    assert response.status_code == 200, response.content.decode()
    return [item["id"] for item in response.json()["results"]]


def _token_client(admin: User, scope: TokenScope, role: Role | None = None) -> Client:
    token = account_services.api_token_create(user=admin, account="ci-bot", name="ci", days=30, scope=scope).secret
    if role is not None:
        role_grant(user=User.objects.get(username="ci-bot"), role=role, granted_by=admin)
    # CSRF checks on, as for any client that is not Django's test client: a token needs none.
    return Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Token {token}")


def _upload() -> SimpleUploadedFile:
    return SimpleUploadedFile("scores.csv", PREDICTIONS_CSV.encode(), content_type="text/csv")


class Subjects:
    """An audit (bob's) with its document; a trial with documents at steps 2 and 4 under policy 1 and
    at step 4 under policy 2; a second experiment's trial with one document."""

    def __init__(self, version: DatasetVersion, bob: User) -> None:
        self.audit: PredictionAudit = PredictionAuditFactory.create(created_by=bob)
        self.audit_document = self.audit.verdict_documents.get()
        self.trial: Trial = trial_with_validations(version, bob)
        self.step2 = experiment_services.verdict_document_freeze_trial(user=bob, trial=self.trial, step=2)
        self.step4 = experiment_services.verdict_document_freeze_trial(user=bob, trial=self.trial, step=4)
        self.other_trial: Trial = trial_with_validations(version, bob)
        self.other = experiment_services.verdict_document_freeze_trial(user=bob, trial=self.other_trial, step=4)
        policy_v2()
        self.step4_v2 = experiment_services.verdict_document_freeze_trial(user=bob, trial=self.trial, step=4)


@pytest.fixture
def subjects(demo_version: DatasetVersion, bob: User, dataset_storage: Path) -> Subjects:
    return Subjects(demo_version, bob)


def test_every_member_lists_every_document_newest_first_without_the_content(subjects: Subjects, dave: User) -> None:
    response = client_for(dave).get(DOCUMENTS)
    everything = list(VerdictDocument.objects.order_by("-frozen_at", "-id"))
    assert _ids(response) == [document.pk for document in everything]
    assert response.json()["count"] == 5
    # Each item is the detail without the frozen document, and names its own detail.
    item = response.json()["results"][-1]
    detail = client_for(dave).get(item["url"]).json()
    assert "document" not in item
    assert item == {key: value for key, value in detail.items() if key != "document"}
    assert item["url"] == reverse("api-verdict-document", args=[item["id"]])
    assert item["sha256"] == hashlib.sha256(everything[-1].canonical_bytes).hexdigest()


def test_each_filter_keeps_only_the_documents_it_names(subjects: Subjects, carol: User) -> None:
    client = client_for(carol)
    s = subjects

    def listed(**query: Any) -> list[int]:
        return _ids(client.get(DOCUMENTS, query))

    assert listed(audit=s.audit.pk) == [s.audit_document.pk]
    assert listed(trial=s.trial.pk) == [s.step4_v2.pk, s.step4.pk, s.step2.pk]
    assert listed(experiment=s.other_trial.experiment_id) == [s.other.pk]
    assert listed(sha256=s.step2.sha256) == [s.step2.pk]
    assert listed(sha256=s.step2.sha256.upper()) == [s.step2.pk]
    assert listed(policy_version=2) == [s.step4_v2.pk]
    assert listed(kind="prediction_audit") == [s.audit_document.pk]
    assert listed(kind="trial_validation", trial=s.trial.pk, policy_version=1) == [s.step4.pk, s.step2.pk]
    # An id that names nothing matches nothing; so do filters that exclude each other.
    assert listed(audit=s.audit.pk + 1000) == []
    assert listed(audit=s.audit.pk, trial=s.trial.pk) == []


def test_the_list_is_paginated_like_the_other_lists(subjects: Subjects, dave: User) -> None:
    body = client_for(dave).get(DOCUMENTS, {"page_size": 2, "page": 2}).json()
    assert body["count"] == 5
    assert len(body["results"]) == 2
    assert (body["previous"], body["next"]) == (
        f"http://testserver{DOCUMENTS}?page_size=2",
        f"http://testserver{DOCUMENTS}?page=3&page_size=2",
    )
    assert client_for(dave).get(DOCUMENTS, {"page": 9}).status_code == 404


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ({"audit": "abc"}, "audit", "A valid integer is required."),
        ({"trial": "0"}, "trial", "Ensure this value is greater than or equal to 1."),
        ({"experiment": str(10**30)}, "experiment", "Ensure this value is less than or equal to"),
        ({"sha256": "f" * 63}, "sha256", "A SHA-256 is 64 hexadecimal digits."),
        ({"sha256": "g" * 64}, "sha256", "A SHA-256 is 64 hexadecimal digits."),
        ({"policy_version": "two"}, "policy_version", "A valid integer is required."),
        ({"kind": "report"}, "kind", '"report" is not a valid choice.'),
        ({"audit_id": "3"}, "audit_id", "Not a filter of this list; the filters are audit, trial, experiment"),
    ],
)
def test_a_bad_filter_is_a_400_naming_it(dave: User, query: dict[str, str], field: str, message: str) -> None:
    response = client_for(dave).get(DOCUMENTS, query)
    assert response.status_code == 400
    body = response.json()
    assert list(body) == [field]
    assert body[field][0].startswith(message), body


def test_only_members_see_documents_and_an_api_token_lists_them(subjects: Subjects, oscar: User, erin: User) -> None:
    # An account without a role sees no audit and no experiment, so no document, and no filter finds one.
    outsider = client_for(oscar)
    assert outsider.get(DOCUMENTS).json()["count"] == 0
    assert _ids(outsider.get(DOCUMENTS, {"audit": subjects.audit.pk})) == []
    assert _ids(outsider.get(DOCUMENTS, {"sha256": subjects.audit_document.sha256})) == []
    assert Client().get(DOCUMENTS).status_code == 401
    # A machine account with an API token: as a person with its roles; none, nothing.
    bare = _token_client(erin, TokenScope.API)
    assert bare.get(DOCUMENTS).json()["count"] == 0
    role_grant(user=User.objects.get(username="ci-bot"), role=Role.ML_ENGINEER, granted_by=erin)
    assert _ids(bare.get(DOCUMENTS, {"audit": subjects.audit.pk})) == [subjects.audit_document.pk]


def test_a_gate_token_does_not_list_documents(subjects: Subjects, erin: User) -> None:
    response = _token_client(erin, TokenScope.GATE).get(DOCUMENTS)
    assert response.status_code == 401
    assert "scope" in response.json()["detail"]


def test_a_pipeline_audits_a_file_and_requests_review_with_the_documents_it_was_given(
    erin: User, dataset_storage: Path
) -> None:
    """An API token, no browser session: the audit's answer names its document; the document, its
    bytes, the list and the review request all agree on the id and the SHA-256."""
    client = _token_client(erin, TokenScope.API, Role.ML_ENGINEER)
    data = {"file": _upload(), "label": "label", "prediction": "pred", "attributes": ["gender"]}
    created = client.post(AUDITS, data)
    assert created.status_code == 201, created.content.decode()
    audit = PredictionAudit.objects.get()
    document = audit.verdict_documents.get()
    refs = created.json()["documents"]
    assert refs == [_ref(document)]
    assert refs[0]["sha256"] == hashlib.sha256(document.canonical_bytes).hexdigest()

    detail = client.get(refs[0]["url"])
    assert detail.status_code == 200
    assert (detail.json()["id"], detail.json()["sha256"]) == (document.pk, document.sha256)
    canonical = client.get(detail.json()["canonical_url"])
    assert hashlib.sha256(canonical.content).hexdigest() == refs[0]["sha256"]
    assert _ids(client.get(DOCUMENTS, {"sha256": refs[0]["sha256"]})) == [document.pk]

    request = client.post(
        "/api/v1/review-requests/",
        {"title": "Scores v1", "intended_use": "Triage", "documents": [refs[0]["id"]], "model_identifier": "scores:1"},
        content_type="application/json",
    )
    assert request.status_code == 201, request.content.decode()
    (named,) = request.json()["documents"]
    assert named == {**refs[0], "kind": "prediction_audit", "verdict": document.document["verdict"]}
    assert request.json()["document_sha256"] == [document.sha256]


def test_the_audits_answers_name_their_documents(subjects: Subjects, bob: User, carol: User) -> None:
    audit, expected = subjects.audit, [_ref(subjects.audit_document)]
    client = client_for(carol)
    assert client.get(reverse("api-prediction-audit", args=[audit.pk])).json()["documents"] == expected
    listed = client.get(AUDITS).json()["results"]
    assert [row["documents"] for row in listed] == [expected]
    retired = client_for(bob).post(
        reverse("api-prediction-audit-retire", args=[audit.pk]),
        {"reason": "wrong file"},
        content_type="application/json",
    )
    assert retired.status_code == 200
    assert retired.json()["documents"] == expected


def test_a_review_requests_documents_keep_their_keys_and_gain_their_url(subjects: Subjects, bob: User) -> None:
    document = subjects.audit_document
    created = approval_services.review_request_create(
        user=bob, title="Scores", intended_use="Triage", documents=[document], model_identifier="scores:1"
    )
    body = client_for(bob).get(reverse("api-review-request", args=[created.pk])).json()
    assert body["documents"] == [
        {**_ref(document), "kind": "prediction_audit", "verdict": document.document["verdict"]}
    ]


def test_a_page_of_documents_or_audits_costs_the_same_queries_however_long(
    subjects: Subjects, carol: User, bob: User
) -> None:
    PredictionAuditFactory.create(created_by=bob)
    client = client_for(carol)
    client.get(DOCUMENTS)  # the session's first request reads more (the login's bookkeeping)

    def queries(path: str, size: int) -> int:
        with CaptureQueriesContext(connection) as captured:
            response = client.get(path, {"page_size": size})
        assert len(response.json()["results"]) == size
        # The list reads neither a document's content nor its audit's row.
        assert not [q["sql"] for q in captured.captured_queries if '"canonical"' in q["sql"] and path == DOCUMENTS]
        return len(captured.captured_queries)

    assert queries(DOCUMENTS, 1) == queries(DOCUMENTS, 5)
    assert queries(AUDITS, 1) == queries(AUDITS, 2)
