"""Reports through the API (issue 28): a decided request's answer names its reports; the list (newest
first, by request, model and signing state), a report's signatories and revisions, its PDF (the newest
or the one asked for) and signing with the member's password in their own session, never with a token."""

from __future__ import annotations

import hashlib
import importlib
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from auditportal.accounts import services as account_services
from auditportal.accounts.models import Role, TokenScope, User
from auditportal.activity.models import Event, Verb
from auditportal.approvals.models import ReviewRequest
from auditportal.approvals.services import REPORT_GENERATE_TASK
from auditportal.fairness.documents.canonical import canonical_json, canonical_sha256
from auditportal.fairness.documents.report_context import ReportContext
from auditportal.outbox.models import OutboxMessage
from auditportal.reports import rules, services
from auditportal.reports.models import Report
from tests.approvals.conftest import approved, audit_request, frank
from tests.factories import PASSWORD, client_for
from tests.reports.helpers import SignedReport

__all__ = ["audit_request", "frank"]

pytestmark = pytest.mark.django_db

REPORTS = "/api/v1/reports/"
MODEL = "vendor-score:2.1"  # audit_request's model identifier


@pytest.fixture
def decided(audit_request: ReviewRequest, carol: User, member_dave: User, frank: User) -> Report:
    """bob's request, approved by dave and frank, and its report as the worker stores it (rendered here,
    without figures): certified, for dave and frank to sign."""
    request = approved(audit_request, carol, [member_dave, frank])
    [message] = OutboxMessage.objects.filter(name=REPORT_GENERATE_TASK)
    return services.report_generate(context=ReportContext.from_json(message.args[0]), review_request_id=request.pk)


def _ids(response: Any) -> list[int]:
    assert response.status_code == 200, response.content
    return [item["id"] for item in response.json()["results"]]


def _pdf(response: Any) -> bytes:
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/pdf"
    return b"".join(response.streaming_content)


def _token_client(erin: User, role: Role | None, scope: TokenScope = TokenScope.API) -> Client:
    account = f"{scope}-bot"
    issued = account_services.api_token_create(user=erin, account=account, name="pipeline", days=30, scope=scope)
    if role is not None:
        account_services.role_grant(user=issued.token.user, role=role, granted_by=erin)
    # CSRF checks on, as for any client that is not Django's test client: a token needs none.
    return Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Token {issued.secret}")


def _csrf_session(user: User) -> tuple[Client, str]:
    """A browser's session that checks CSRF, and its token (send it back as X-CSRFToken)."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/login/")  # sets the CSRF cookie
    return client, client.cookies["csrftoken"].value


def test_a_decided_requests_answer_names_its_report_and_the_api_reads_it(decided: Report, carol: User) -> None:
    client = client_for(carol)
    request = decided.review_request
    assert request is not None
    record = client.get(f"/api/v1/review-requests/{request.pk}/").json()
    url = f"{REPORTS}{decided.pk}/"
    assert record["reports"] == [{"id": decided.pk, "decision": "approved", "state": "awaiting_signatures", "url": url}]

    body = client.get(url).json()
    assert [person["username"] for person in body["signatories"]] == ["dave", "frank"]
    certified = decided.revisions.get()
    pdf_url = f"{REPORTS}{decided.pk}/pdf"
    assert body == {
        "id": decided.pk,
        "title": request.title,
        "subject": decided.subject_label,
        "model": MODEL,
        "review_request": request.pk,
        "decision": "approved",
        "deployment": None,
        "period": None,
        "state": "awaiting_signatures",
        "created_at": decided.created_at.isoformat(),
        "latest_revision": 1,
        "sha256": certified.sha256,
        "url": url,
        "pdf_url": pdf_url,
        "page_url": f"/reports/{decided.pk}/",
        "pages": decided.pages,
        "signatories": [
            {
                "username": person["key"],
                "name": person["name"],
                "role": person["role"],
                "signed": False,
                "signed_at": None,
                "revision": None,
            }
            for person in decided.context["signatories"]
        ],
        "revisions": [
            {
                "number": 1,
                "kind": "certified",
                "signer": None,
                "sha256": certified.sha256,
                "size_bytes": certified.size_bytes,
                "created_at": certified.created_at.isoformat(),
                "pdf_url": f"{pdf_url}?revision=1",
            }
        ],
    }
    served = client.get(pdf_url)
    assert hashlib.sha256(_pdf(served)).hexdigest() == body["sha256"] == served["X-Content-SHA256"]
    page_download = client.get(reverse("reports:revision", args=[decided.pk, 1]))
    assert served["Content-Disposition"] == page_download["Content-Disposition"]
    assert f"review-request-{request.pk}-vendor-scoring-model-approved-r1.pdf" in served["Content-Disposition"]


def test_the_list_is_newest_first_and_filters_by_request_model_and_state(
    signed_report: SignedReport, decided: Report, carol: User
) -> None:
    client = client_for(carol)
    signed = signed_report.report
    request = decided.review_request
    assert request is not None
    assert _ids(client.get(REPORTS)) == [decided.pk, signed.pk]
    first, second = client.get(REPORTS).json()["results"]
    assert (first["state"], first["model"], first["review_request"], first["decision"]) == (
        "awaiting_signatures",
        MODEL,
        request.pk,
        "approved",
    )
    assert (second["state"], second["model"], second["review_request"], second["latest_revision"]) == (
        "signed",
        None,
        None,
        3,
    )
    assert second["sha256"] == signed_report.newest.sha256
    assert _ids(client.get(REPORTS, {"request": request.pk})) == [decided.pk]
    assert _ids(client.get(REPORTS, {"request": request.pk + 1000})) == []
    assert _ids(client.get(REPORTS, {"model": MODEL})) == [decided.pk]
    assert _ids(client.get(REPORTS, {"model": "vendor-score:2.2"})) == []
    assert _ids(client.get(REPORTS, {"state": "signed"})) == [signed.pk]
    assert _ids(client.get(REPORTS, {"state": "awaiting_signatures"})) == [decided.pk]
    assert _ids(client.get(REPORTS, {"state": "signed", "model": MODEL})) == []
    page = client.get(REPORTS, {"page_size": 1}).json()
    assert (page["count"], [item["id"] for item in page["results"]]) == (2, [decided.pk])
    assert page["next"] is not None


@pytest.mark.parametrize(
    ("query", "field", "detail"),
    [
        ({"request": "abc"}, "request", "The request is a review request's number, not 'abc'."),
        ({"request": "0"}, "request", "The request is a review request's number, not '0'."),
        ({"request": "²"}, "request", "The request is a review request's number, not '²'."),
        ({"state": "done"}, "state", "The state is one of awaiting_signatures, signed, not 'done'."),
        ({"model": "a\x00b"}, "model", "Name the model by its identifier, as its review request does."),
        ({"model": "  "}, "model", "Name the model by its identifier, as its review request does."),
    ],
)
def test_a_filter_that_cannot_be_one_is_refused_naming_it(
    carol: User, query: dict[str, str], field: str, detail: str
) -> None:
    response = client_for(carol).get(REPORTS, query)
    assert response.status_code == 400
    assert response.json() == {"detail": detail, "field": field}


def test_outsiders_see_no_report_and_tokens_read_as_their_accounts_roles(
    signed_report: SignedReport, oscar: User, erin: User
) -> None:
    report = signed_report.report
    detail, pdf = f"{REPORTS}{report.pk}/", f"{REPORTS}{report.pk}/pdf"
    outsider = client_for(oscar)
    assert outsider.get(REPORTS).json()["count"] == 0
    assert outsider.get(detail).status_code == 404
    assert outsider.get(pdf).status_code == 404
    assert outsider.post(f"{detail}sign/", {"password": PASSWORD}, content_type="application/json").status_code == 404
    anonymous = Client().get(REPORTS)
    assert (anonymous.status_code, bool(anonymous.get("WWW-Authenticate"))) == (401, True)

    # A pipeline's API token, its account a reviewer: reads what a reviewer reads, the PDF included.
    pipeline = _token_client(erin, Role.REVIEWER)
    assert _ids(pipeline.get(REPORTS)) == [report.pk]
    assert pipeline.get(detail).json()["sha256"] == signed_report.newest.sha256
    assert hashlib.sha256(_pdf(pipeline.get(pdf))).hexdigest() == signed_report.newest.sha256
    # A gate token opens the gate only.
    assert _token_client(erin, None, TokenScope.GATE).get(REPORTS).status_code == 401


def test_the_pdf_is_the_newest_revision_or_the_one_asked_for(signed_report: SignedReport, carol: User) -> None:
    client = client_for(carol)
    report = signed_report.report
    pdf = f"{REPORTS}{report.pk}/pdf"
    body = client.get(f"{REPORTS}{report.pk}/").json()
    first, second, third = signed_report.revisions
    assert (body["state"], body["latest_revision"], body["sha256"]) == ("signed", 3, third.sha256)
    assert [
        (item["username"], item["signed"], item["revision"], item["signed_at"]) for item in body["signatories"]
    ] == [
        ("dave", True, 2, second.created_at.isoformat()),
        ("fay", True, 3, third.created_at.isoformat()),
    ]
    assert [(item["number"], item["kind"], item["signer"], item["sha256"]) for item in body["revisions"]] == [
        (1, "certified", None, first.sha256),
        (2, "member_signed", "dave", second.sha256),
        (3, "member_signed", "fay", third.sha256),
    ]

    newest = client.get(pdf, HTTP_ACCEPT="application/pdf")  # what a pipeline asking for a PDF sends
    assert _pdf(newest) == third.path.read_bytes()
    assert newest["X-Content-SHA256"] == third.sha256
    assert (
        newest["Content-Disposition"]
        == client.get(reverse("reports:revision", args=[report.pk, 3]))["Content-Disposition"]
    )
    for revision in signed_report.revisions:
        answer = client.get(pdf, {"revision": revision.number})
        assert hashlib.sha256(_pdf(answer)).hexdigest() == revision.sha256 == answer["X-Content-SHA256"]
        assert f"report-{report.pk}-r{revision.number}.pdf" in answer["Content-Disposition"]

    missing = client.get(pdf, {"revision": 4}, HTTP_ACCEPT="application/pdf")
    assert (missing.status_code, missing["Content-Type"]) == (404, "application/json")
    assert missing.json() == {"detail": f"Report #{report.pk} has no revision 4: its revisions are 1 to 3."}
    for bad in ("0", "-1", "two", "²", "9" * 30):
        refused = client.get(pdf, {"revision": bad})
        assert refused.status_code == 400, bad
        assert refused.json() == {"detail": f"The revision is a number from 1, not {bad!r}.", "field": "revision"}


def test_a_signatory_signs_through_the_api_with_their_password_in_their_own_session(
    decided: Report, member_dave: User, frank: User, carol: User, erin: User
) -> None:
    dave = member_dave
    sign = f"{REPORTS}{decided.pk}/sign/"
    failures = Event.objects.filter(verb=Verb.REPORT_SIGN_REAUTH_FAILED)

    # A token is refused whatever its account's roles: it cannot sign for a person.
    token = _token_client(erin, Role.ETHICS_COMMITTEE).post(
        sign, {"password": PASSWORD}, content_type="application/json"
    )
    assert (token.status_code, token.json()) == (403, {"detail": rules.SIGN_NEEDS_SESSION})
    # A session's write needs the CSRF token, as every other API write.
    client, csrf = _csrf_session(dave)
    forged = client.post(sign, {"password": PASSWORD}, content_type="application/json")
    assert forged.status_code == 403
    assert "CSRF" in forged.json()["detail"]

    def post(client: Client, password: str) -> Any:
        return client.post(sign, {"password": password}, content_type="application/json", HTTP_X_CSRFTOKEN=csrf)

    wrong = post(client, "not it")
    assert (wrong.status_code, wrong.json()) == (
        400,
        {"detail": "That password is not correct; the report was not signed.", "field": "password"},
    )
    [failure] = failures
    assert (failure.actor, failure.target_id, failure.data) == (dave, str(decided.pk), {"empty": False})
    assert post(client_for(carol), PASSWORD).status_code == 403  # not on the committee
    assert decided.revisions.count() == 1

    right = post(client, PASSWORD)
    assert right.status_code == 200, right.content
    body = right.json()
    second = decided.revisions.get(number=2)
    assert (body["state"], body["latest_revision"], body["sha256"]) == ("awaiting_signatures", 2, second.sha256)
    assert [(item["username"], item["signed"], item["revision"]) for item in body["signatories"]] == [
        ("dave", True, 2),
        ("frank", False, None),
    ]
    served = client.get(body["pdf_url"])
    assert hashlib.sha256(_pdf(served)).hexdigest() == body["sha256"]
    assert Event.objects.filter(verb=Verb.REPORT_SIGNED, actor=dave, target_id=str(decided.pk)).count() == 1
    again = post(client, PASSWORD)
    assert (again.status_code, again.json()["detail"]) == (400, f"dave has already signed report #{decided.pk}.")

    frank_client, frank_csrf = _csrf_session(frank)
    last = frank_client.post(sign, {"password": PASSWORD}, content_type="application/json", HTTP_X_CSRFTOKEN=frank_csrf)
    assert (last.status_code, last.json()["state"], last.json()["latest_revision"]) == (200, "signed", 3)
    # The request's answer, which counts the reports' events, says so too.
    request = decided.review_request
    assert request is not None
    [ref] = client_for(carol).get(f"/api/v1/review-requests/{request.pk}/").json()["reports"]
    assert ref["state"] == "signed"
    assert _ids(client_for(carol).get(REPORTS, {"state": "signed"})) == [decided.pk]


def test_wrong_passwords_through_the_api_lock_signing_with_the_votes_ones(decided: Report, member_dave: User) -> None:
    dave = member_dave
    client = client_for(dave)
    sign = f"{REPORTS}{decided.pk}/sign/"
    with pytest.raises(account_services.ReauthenticationFailed):
        account_services.user_reauthenticate(user=dave, password="guess", purpose="vote", target=decided)
    for _ in range(account_services.PASSWORD_FAILURES_ALLOWED - 1):
        assert client.post(sign, {"password": "guess"}, content_type="application/json").status_code == 400
    locked = client.post(sign, {"password": PASSWORD}, content_type="application/json")
    assert locked.status_code == 400
    assert locked.json()["field"] == "password"
    assert locked.json()["detail"].startswith(
        "5 wrong passwords in 15 minutes: your report signatures are locked until"
    )
    assert decided.revisions.count() == 1
    failures = Event.objects.filter(verb=Verb.REPORT_SIGN_REAUTH_FAILED, actor=dave)
    assert failures.count() == account_services.PASSWORD_FAILURES_ALLOWED - 1
    later = timezone.now() + account_services.PASSWORD_FAILURE_WINDOW + timedelta(seconds=1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(timezone, "now", lambda: later)
        assert client.post(sign, {"password": PASSWORD}, content_type="application/json").status_code == 200
    assert decided.revisions.count() == 2


def test_the_migration_counts_the_signatories_of_reports_stored_before_it(db: None) -> None:
    context = {"title": "Audit", "signatories": [{"key": "dave"}, {"key": "fay"}]}
    report = Report.objects.create(
        title="Audit",
        subject_label="audit",
        context_json=canonical_json(context).decode(),
        context_sha256=canonical_sha256(context),
        pages=1,
    )
    assert report.signatory_count == 0
    migration = importlib.import_module("auditportal.reports.migrations.0003_report_signatory_count")

    class Editor:
        class connection:
            alias = "default"

    migration.count_signatories(apps, Editor())
    report.refresh_from_db()
    assert report.signatory_count == 2
