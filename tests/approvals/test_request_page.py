"""The request page at the right grain: findings grouped by attribute and metric (collapsed, worst
first, with counts and each group's waiver action), a quorum that cannot be reached warned of, mail
claimed only once sent, failed forms back on the page's URL, and the report's link after a decision
without a reload."""

from __future__ import annotations

import re
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from django.db import transaction
from django.test import Client
from django.urls import reverse
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import Role, User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.approvals import selectors, services
from auditportal.approvals.models import ReviewRequest, ReviewVote, Waiver
from auditportal.approvals.templatetags.approval_tags import counted, thousands
from auditportal.datasets.models import DatasetVersion
from auditportal.fairness.documents.findings import FAIL, INCONCLUSIVE
from auditportal.reports.models import Report
from tests.approvals.conftest import FAMILY, approved, hashes, in_review, keys, trial_document, worker_runs
from tests.factories import PASSWORD, client_for, make_user
from tests.policies.helpers import judge_every_metric


def _text(html: str) -> str:
    body = re.sub(r"<script\b.*?</script>", " ", html, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)).replace("&#x27;", "'").replace("&quot;", '"')


def _groups(html: str) -> list[tuple[str, str, str]]:
    """Each findings group of the page in order: (its opening tag, attribute, metric)."""
    return re.findall(r'(<details class="finding-group[^>]*data-attribute="([^"]*)" data-metric="([^"]*)"[^>]*>)', html)


def test_findings_are_grouped_by_attribute_and_metric_collapsed_worst_first_with_counts(
    family_request: ReviewRequest, dave: User
) -> None:
    html = client_for(dave).get(family_request.get_absolute_url()).content.decode()
    groups = _groups(html)
    assert [(attribute, metric) for _, attribute, metric in groups] == [("gender", "tpr")]
    assert all(" open" not in tag for tag, _, _ in groups)  # collapsed by default
    section = html[html.index('id="findings"') : html.index('id="documents"')]
    text = _text(section)
    assert "2 FAIL comparisons (0 waived)" in text
    assert "1 INCONCLUSIVE comparison" in text
    assert "2 FAIL 1 INCONCLUSIVE 0 PASS" in text  # the group's counts in its summary line
    assert "no waiver" in text
    assert "Waive these 2 FAIL comparisons" in text
    for key in keys(family_request, FAIL) + keys(family_request, INCONCLUSIVE):
        assert f'data-finding="{key}"' in section


def test_groups_with_fail_come_first_by_count_then_inconclusive_then_pass(
    demo_version: DatasetVersion, bob: User, carol: User, dave: User, runs: Path
) -> None:
    judge_every_metric()  # five judged metrics: five groups of one attribute
    document = trial_document(demo_version, bob, FAMILY, runs)
    request = in_review(
        services.review_request_create(user=bob, title="t", intended_use="u", documents=[document]), carol
    )
    groups = selectors.review_request_finding_groups(request=request)
    assert len(groups) == 5
    rank = [(not g.fails, -len(g.fails), not g.inconclusive, -len(g.inconclusive)) for g in groups]
    assert rank == sorted(rank)
    assert (bool(groups[0].fails), bool(groups[-1].fails)) == (True, False)
    html = client_for(dave).get(request.get_absolute_url()).content.decode()
    assert [(attribute, metric) for _, attribute, metric in _groups(html)] == [(g.attribute, g.metric) for g in groups]
    passes = sum(g.passes for g in groups)
    judged = sum(
        1 for c in document.document["attributes"]["gender"]["comparisons"] if c["judged"] and c["verdict"] == "PASS"
    )
    assert passes == judged


def test_the_group_button_proposes_one_waiver_of_the_whole_family(
    family_request: ReviewRequest, carol: User, dave: User, frank: User
) -> None:
    client = client_for(carol)
    html = client.get(family_request.get_absolute_url()).content.decode()
    group = html[html.index('<details class="waive-group">') :]
    form = group[: group.index("</form>")]
    fields = dict.fromkeys(re.findall(r'name="(waiver-[a-z_]+)"', form))
    assert list(fields) == ["waiver-finding_keys", "waiver-reason", "waiver-compensating_measures", "waiver-expires_on"]
    posted = re.findall(r'name="waiver-finding_keys" value="([0-9a-f]+)"', form)
    assert posted == keys(family_request, FAIL)
    response = client.post(
        reverse("approvals:waiver", args=[family_request.pk]),
        {
            "waiver-finding_keys": posted,
            "waiver-reason": "explained by the vendor's data",
            "waiver-compensating_measures": "manual review of every rejection",
            "waiver-expires_on": (date.today() + timedelta(days=30)).isoformat(),
        },
        follow=True,
    )
    assert "The waiver of 2 FAIL comparisons is proposed" in _text(response.content.decode())
    waiver = Waiver.objects.get()
    assert sorted(waiver.comparisons.values_list("finding_key", flat=True)) == sorted(posted)
    text = _text(client.get(family_request.get_absolute_url()).content.decode())
    assert f"Waiver #{waiver.pk} of 2 FAIL comparisons" in text
    assert "gender: tpr of female, nonbinary against male" in text
    assert "Waive these" not in text  # nothing of the group is left to waive
    assert f"0 of 2 waived; waiver #{waiver.pk} proposed" in text


def test_a_failed_vote_ends_on_the_request_page_with_the_error_and_without_the_password(
    audit_request: ReviewRequest, carol: User, dave: User
) -> None:
    request = in_review(audit_request, carol)
    client = client_for(dave)
    page = request.get_absolute_url()
    response = client.post(
        reverse("approvals:vote", args=[request.pk]),
        {"choice": "approve", "reason": "", "password": PASSWORD, "document_sha256": hashes(request)},
        follow=True,
    )
    assert response.redirect_chain == [(page + "#vote-form", 303)]
    assert response.request["PATH_INFO"] == page  # the address bar: the page, not /vote/
    html = response.content.decode()
    assert "The reason is required." in _text(html)
    assert PASSWORD not in html
    assert 'name="password"' in html
    assert response.context["vote_form"]["password"].value() in (None, "")
    assert response.context["vote_form"]["choice"].value() == "approve"  # what was posted comes back
    assert PASSWORD not in str(dict(client.session))  # never kept
    assert not ReviewVote.objects.exists()
    # Shown once: a reload is the page as it is.
    assert "The reason is required." not in _text(client.get(page).content.decode())


def test_the_page_warns_when_fewer_members_may_vote_than_the_quorum(audit_request: ReviewRequest, carol: User) -> None:
    make_user("lena", [Role.ETHICS_COMMITTEE])
    audit_request.requested_by.role_grants.create(role=Role.ETHICS_COMMITTEE)
    request = in_review(audit_request, carol)
    text = _text(client_for(carol).get(request.get_absolute_url()).content.decode())
    assert "No decision is possible yet." in text
    assert "only 1 member may vote (lena)" in text
    assert f"Other committee members cannot: bob (made review request #{request.pk})" in text
    make_user("mia", [Role.ETHICS_COMMITTEE])
    assert "No decision is possible yet." not in _text(
        client_for(carol).get(request.get_absolute_url()).content.decode()
    )


def test_the_committee_is_said_to_be_told_only_once_the_mail_went_out(
    audit_request: ReviewRequest, bob: User, dave: User, frank: User, django_capture_on_commit_callbacks: Any
) -> None:
    User.objects.filter(pk=frank.pk).update(email="")
    client = client_for(bob)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("approvals:submit", args=[audit_request.pk]), follow=True)
    text = _text(response.content.decode())
    assert f"Review request #{audit_request.pk} is submitted. The committee will be told by e-mail: dave." in text
    assert "Not notified (no e-mail address): frank." in text
    assert "has been told" not in text
    assert "not yet: the mail of the submission waits for the worker." in text
    assert worker_runs(services.MAIL_SUBMITTED_TASK) == [1]
    text = _text(client.get(audit_request.get_absolute_url()).content.decode())
    assert re.search(r"The committee was told on \d{4}-\d\d-\d\d \d\d:\d\d UTC: dave\.", text)
    assert "Not notified: frank (no e-mail address)." in text


def test_a_mail_server_that_fails_is_not_reported_as_telling_anyone(
    audit_request: ReviewRequest,
    bob: User,
    dave: User,
    settings: SettingsWrapper,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 1, 2
    with django_capture_on_commit_callbacks(execute=True):
        services.review_request_submit(user=bob, request=audit_request)
    assert worker_runs(services.MAIL_SUBMITTED_TASK) == [0]
    text = _text(client_for(bob).get(audit_request.get_absolute_url()).content.decode())
    assert re.search(r"No message went out on \d{4}-\d\d-\d\d \d\d:\d\d UTC\.", text)
    assert "Not notified: dave (the mail server did not take the message)." in text
    assert "was told" not in text


def test_after_a_decision_the_page_polls_for_the_report_link(
    fair_trial_request: ReviewRequest, carol: User, dave: User, frank: User
) -> None:
    request = approved(fair_trial_request, carol, [dave, frank])
    client = client_for(carol)
    html = client.get(request.get_absolute_url()).content.decode()
    status_url = reverse("approvals:status", args=[request.pk])
    assert f'<div id="report-pending" data-status-url="{status_url}">' in html
    assert "js/approvals-request.js" in html
    assert "reload" not in _text(html).lower()
    answer = client.get(status_url).json()
    assert (answer["state"], answer["reports"]) == ("approved", [])
    # What the reports app records when the worker has stored the report (its model is not needed here).
    report = Report(pk=4242)
    with transaction.atomic():
        event_record(
            actor=None,
            verb=Verb.REPORT_CREATED,
            target=report,
            data={"title": "Fairness audit report: <b>x</b>", "review_request": request.pk, "outcome": "approved"},
        )
    answer = client.get(status_url).json()
    assert answer["reports"] == [
        {"id": 4242, "url": "/reports/4242/", "title": "Fairness audit report: <b>x</b>", "outcome": "approved"}
    ]
    assert 'id="report-pending"' not in client.get(request.get_absolute_url()).content.decode()


def test_outsiders_cannot_read_the_status(fair_trial_request: ReviewRequest, oscar: User) -> None:
    assert client_for(oscar).get(reverse("approvals:status", args=[fair_trial_request.pk])).status_code == 404
    assert Client().get(reverse("approvals:status", args=[fair_trial_request.pk])).status_code == 302


def test_counts_are_written_with_thousands_separators() -> None:
    assert (thousands(1234567), thousands("12"), thousands(None), thousands("n/a")) == ("1,234,567", "12", "", "n/a")
    assert (counted(1, "FAIL comparison"), counted(1234, "FAIL comparison")) == (
        "1 FAIL comparison",
        "1,234 FAIL comparisons",
    )
    assert counted([1, 2], "group") == "2 groups"


def test_a_request_suspended_before_a_decision_says_it_has_no_report(audit_request: ReviewRequest, bob: User) -> None:
    services.approval_suspend(request=audit_request, reason="the audit was retired", by=None, cause={"kind": "test"})
    text = _text(client_for(bob).get(audit_request.get_absolute_url()).content.decode())
    assert "No signed report: the request was suspended before a decision." in text
    assert "reload" not in text.lower()
