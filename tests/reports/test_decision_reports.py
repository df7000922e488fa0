"""A review request's decision becomes a signed report: queued on commit from the deciding vote, drawn
with its figures and certified by the worker's task (run eagerly here), signed by the approving members;
a revocation adds a second report and a rejection gets one too (docs/reports.md, docs/approvals.md)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.approvals import services as approval_services
from auditportal.approvals.models import RequestState, ReviewRequest, VoteChoice
from auditportal.celery import app
from auditportal.experiments.ingest import trial_metrics_ingest
from auditportal.experiments.models import Trial
from auditportal.fairness.documents.findings import document_attributes
from auditportal.fairness.documents.report_context import ReportContext
from auditportal.fairness.figures.audit import forest_plot_panels
from auditportal.fairness.files.metricsfile import MetricRecord
from auditportal.outbox.models import OutboxMessage
from auditportal.reports import services
from auditportal.reports.models import Report, ReportRevision
from auditportal.reports.selectors import report_verify, review_request_reports
from auditportal.reports.tasks import report_generate_task
from tests.approvals.conftest import (
    approved,
    audit_request,
    demo_version,
    fake_trainer,
    frank,
    in_review,
    runs,
    unfair_trial_request,
    vote,
)
from tests.reports.helpers import ARTIFACTS, nss_database, pdf_tool
from tests.reports.test_independent_tools import _pdfsig

__all__ = ["audit_request", "demo_version", "fake_trainer", "frank", "runs", "unfair_trial_request"]

from tests.factories import PASSWORD, TrialFactory, client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def worker(warm_figure_export: None) -> Iterator[None]:
    """Tasks run in this process when queued (Celery's eager mode), with a warm Chromium as a worker has
    (the session's: tests/conftest.py)."""
    before = {"task_always_eager": app.conf.task_always_eager, "task_eager_propagates": app.conf.task_eager_propagates}
    app.conf.update(task_always_eager=True, task_eager_propagates=True)
    try:
        yield
    finally:
        app.conf.update(before)


def _decided(capture: Callable[..., Any], action: Callable[[], object]) -> None:
    # The report is queued by the deciding transaction's on-commit callbacks.
    with capture(execute=True):
        action()


def _forest_titles(context: ReportContext) -> list[str]:
    """The titles of the forest plot's printed panels of the context's one document."""
    [document] = context.documents
    panels = forest_plot_panels(document_attributes(document.document), tolerance=context.policy.tolerance)
    return [f"Forest plot, {panel.title}: {document.label}" for panel in panels]


def _decision_event(request: ReviewRequest, verb: Verb) -> Event:
    return Event.objects.filter(verb=verb, target_id=request.pk).order_by("-seq").get()


def test_the_deciding_vote_queues_the_report_by_the_task_name_with_its_context(
    audit_request: ReviewRequest,
    carol: User,
    dave: User,
    frank: User,
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    assert report_generate_task.name == approval_services.REPORT_GENERATE_TASK
    request = in_review(audit_request, carol)
    vote(request, dave)
    assert not OutboxMessage.objects.filter(name=approval_services.REPORT_GENERATE_TASK).exists()  # undecided
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        vote(request, frank)
    # Written in the deciding transaction; handed to the broker only once it commits.
    [message] = OutboxMessage.objects.filter(name=approval_services.REPORT_GENERATE_TASK)
    assert message.sent_at is None
    context, actor_id, request_id, with_figures = message.args
    assert (actor_id, request_id, with_figures) == (None, request.pk, True)
    decided = ReportContext.from_json(context)
    assert decided.decision is not None
    assert (decided.decision.outcome, decided.decision.request_label) == ("approved", f"Review request #{request.pk}")
    for callback in callbacks:
        callback()
    message.refresh_from_db()
    assert message.sent_at is not None


@pytest.mark.slow  # about 9 s: renders and signs three reports
def test_an_approved_request_gets_a_report_that_two_members_sign_and_a_revocation_adds_another(
    worker: None,
    audit_request: ReviewRequest,
    carol: User,
    dave: User,
    frank: User,
    django_capture_on_commit_callbacks: Callable[..., Any],
    tmp_path: Path,
) -> None:
    request = in_review(audit_request, carol)
    vote(request, dave)
    assert not Report.objects.exists()  # undecided: no report
    _decided(django_capture_on_commit_callbacks, lambda: vote(request, frank))
    assert request.state == RequestState.APPROVED

    report = Report.objects.get()
    assert (report.review_request_id, report.request_outcome) == (request.pk, "approved")
    assert list(review_request_reports(request=request)) == [report]
    # The request page links it, and offers the signing form to the approving members only.
    page = client_for(dave).get(request.get_absolute_url()).content.decode()
    assert f'href="/reports/{report.pk}/"' in page
    assert f'href="/reports/{report.pk}/#sign-form">sign it</a>' in page
    assert "sign it</a>" not in client_for(carol).get(request.get_absolute_url()).content.decode()
    context = ReportContext.from_json(report.context)
    assert context.decision is not None
    assert context.decision.outcome == "approved"
    assert context.decision.request_label == f"Review request #{request.pk}"
    assert context.decision.requester is not None
    assert context.decision.requester.key == "bob"
    assert [(item.member.key, item.vote) for item in context.votes] == [("dave", "approve"), ("frank", "approve")]
    assert all(item.reason == "fit for the stated use" for item in context.votes)
    assert [person.key for person in context.signatories] == ["dave", "frank"]
    # Provenance: the chain head is the decision's event, the policy the request's version.
    decision = _decision_event(request, Verb.REVIEW_REQUEST_APPROVED)
    assert context.chain_head is not None
    assert (context.chain_head.seq, context.chain_head.hash) == (decision.seq, decision.hash)
    assert context.policy.version == request.policy.version
    stored = request.documents.get()
    assert [(item.sha256, item.canonical) for item in context.documents] == [(stored.sha256, stored.canonical)]
    # INCONCLUSIVE comparisons the approving members acknowledged, by both.
    assert context.acknowledgements
    assert all(item.by == ("dave", "frank") for item in context.acknowledgements)
    # The dashboard's figures of the document, drawn in the worker as SVG; a prediction audit has no
    # experiment, so no timeline.
    label = context.documents[0].label
    assert [figure.title for figure in context.figures] == [
        *_forest_titles(context),
        f"Recall per group: {label}",
    ]
    assert all(figure.svg.startswith("<svg") for figure in context.figures)
    assert context.trials is None

    # The task again (a retried message): the stored report, not a second one.
    queued = ReportContext.from_json(report.context).as_json()
    assert report_generate_task.apply(args=[queued, None, request.pk, True]).get() == report.pk
    assert Report.objects.count() == 1

    # Both approving members sign (their votes re-authenticated them; the page asks the password again).
    services.report_sign_member(report=report, member=dave, password=PASSWORD)
    newest = services.report_sign_member(report=report, member=frank, password=PASSWORD)
    path = tmp_path / "report.pdf"
    path.write_bytes(newest.path.read_bytes())
    signatures = _pdfsig(path, nss_database(tmp_path / "nss"))
    assert [item["field"] for item in signatures] == ["Organisation", "Member1", "Member2"]
    assert all(item["valid"] and item["trusted"] for item in signatures), signatures
    assert signatures[-1]["total"]
    # The embedded verdict document is the stored one, byte for byte.
    out = tmp_path / "document.json"
    subprocess.run(
        [pdf_tool("pdfdetach"), "-savefile", f"verdict-document-{stored.short_hash}.json", "-o", str(out), str(path)],
        check=True,
        capture_output=True,
    )
    assert out.read_bytes() == stored.canonical_bytes
    assert hashlib.sha256(out.read_bytes()).hexdigest() == stored.sha256
    # Verification names the request the file belongs to.
    result = report_verify(data=path.read_bytes())
    assert result.ok, result.problems
    assert result.match is not None
    assert (result.match.report_id, result.match.review_request_id, result.match.request_outcome) == (
        report.pk,
        request.pk,
        "approved",
    )

    # A revocation adds a new report; the approval's report and its signatures stay as they were.
    revisions = list(ReportRevision.objects.filter(report=report).values_list("number", "sha256"))
    assert len(revisions) == 3
    _decided(
        django_capture_on_commit_callbacks,
        lambda: approval_services.review_request_revoke(user=dave, request=request, reason="mislabelled data"),
    )
    reports = list(review_request_reports(request=request))
    assert [item.request_outcome for item in reports] == ["approved", "revoked"]
    assert reports[0] == report
    assert list(ReportRevision.objects.filter(report=report).values_list("number", "sha256")) == revisions
    revoked = ReportContext.from_json(reports[1].context)
    assert revoked.decision is not None
    assert revoked.decision.outcome == "revoked"
    assert revoked.decision.note == "Approval revoked: mislabelled data"
    assert [person.key for person in revoked.signatories] == ["dave"]
    head = _decision_event(request, Verb.REVIEW_REQUEST_REVOKED)
    assert revoked.chain_head is not None
    assert revoked.chain_head.hash == head.hash
    assert reports[1].revisions.get().sha256 != revisions[0][1]


@pytest.mark.slow  # about 5 s: renders and signs a report
def test_a_rejected_request_gets_a_report_signed_by_the_rejecting_members(
    worker: None,
    audit_request: ReviewRequest,
    carol: User,
    dave: User,
    frank: User,
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    request = in_review(audit_request, carol)
    vote(request, dave, VoteChoice.REJECT, "the intended use is not covered by the data")
    _decided(django_capture_on_commit_callbacks, lambda: vote(request, frank, VoteChoice.REJECT, "too few positives"))
    assert request.state == RequestState.REJECTED
    report = review_request_reports(request=request).get()
    assert report.request_outcome == "rejected"
    context = ReportContext.from_json(report.context)
    assert context.decision is not None
    assert context.decision.outcome == "rejected"
    assert [(item.member.key, item.vote, item.reason) for item in context.votes] == [
        ("dave", "reject", "the intended use is not covered by the data"),
        ("frank", "reject", "too few positives"),
    ]
    assert [person.key for person in context.signatories] == ["dave", "frank"]
    assert not context.acknowledgements  # only approving votes acknowledge
    decision = _decision_event(request, Verb.REVIEW_REQUEST_REJECTED)
    assert context.chain_head is not None
    assert context.chain_head.seq == decision.seq
    signed = services.report_sign_member(report=report, member=frank, password=PASSWORD)
    assert (signed.number, signed.signer) == (2, frank)


def test_a_trial_decision_reports_the_experiment_dataset_waivers_and_the_other_trials(
    worker: None,
    unfair_trial_request: ReviewRequest,
    carol: User,
    dave: User,
    frank: User,
    tmp_path: Path,
) -> None:
    reviewed = unfair_trial_request.trial
    assert reviewed is not None
    # The reviewed trial's eod before the frozen validation (step 4), and another trial of the same
    # experiment, whose eod fell over five validations (one undefined).
    trial_metrics_ingest(
        trial=reviewed,
        records=[MetricRecord(kind="validation", step=step, metrics={"eod": 0.1 * step}) for step in (1, 3)],
    )
    other: Trial = TrialFactory.create(experiment=reviewed.experiment)
    eods = [0.30, 0.21, None, 0.08, 0.04]
    trial_metrics_ingest(
        trial=other,
        records=[
            MetricRecord(kind="validation", step=10 * (index + 1), metrics={"eod": eod, "accuracy": 0.7 + index / 100})
            for index, eod in enumerate(eods)
        ],
    )
    request = approved(unfair_trial_request, carol, [dave, frank])
    [message] = OutboxMessage.objects.filter(name=approval_services.REPORT_GENERATE_TASK)
    assert message.args[1:] == [None, request.pk, True]
    context = ReportContext.from_json(message.args[0])
    assert context.figures == ()  # the worker draws them
    trial = request.trial
    assert trial is not None
    assert context.subject.kind == "trial"
    assert context.subject.model == request.model_identifier
    assert context.experiment is not None
    assert context.experiment.config_sha256 == hashlib.sha256(trial.experiment.config_yaml.encode()).hexdigest()
    assert dict(context.experiment.hparams) == {
        name: json.dumps(value, sort_keys=True) for name, value in trial.hparams.items()
    }
    version = trial.experiment.dataset_version
    assert context.dataset is not None
    assert (context.dataset.sha256, context.dataset.rows) == (version.sha256, version.num_rows)
    assert context.dataset.attributes
    # Each FAIL was waived: scope, reason and expiry, and who approved the waiver.
    waivers = list(request.waivers.order_by("expires_at", "id"))
    assert len(context.waivers) == len(waivers) > 0
    for item, waiver in zip(context.waivers, waivers, strict=True):
        assert waiver.attribute in item.scope
        assert waiver.group in item.scope
        assert item.reason.startswith("the gap is explained by the vendor's data")
        assert item.expires == waiver.expires_at.date().isoformat()
        assert item.approved_by == ("dave", "frank")
    # Every trial of the experiment, as recorded at the decision: the reviewed one marked, the other's
    # eod per validation for the timeline (an undefined one as a gap).
    assert context.trials is not None
    assert context.trials.label == f"experiment {reviewed.experiment_id} ({reviewed.experiment.name})"
    assert [(item.number, item.reviewed) for item in context.trials.trials] == [
        (reviewed.number, True),
        (other.number, False),
    ]
    [row] = context.trials.others
    assert row.steps == (10, 20, 30, 40, 50)
    assert row.eod_series == tuple(eods)
    assert (row.lowest_eod, row.lowest_eod_step, row.latest_step) == (0.04, 50, 50)
    assert row.accuracy == pytest.approx(0.74)
    # The whole context survives the task's JSON.
    assert ReportContext.from_json(json.loads(json.dumps(context.as_json()))) == context

    # The worker draws the figures (the forest plot a panel per metric) and renders the table of trials.
    report = Report.objects.get(pk=report_generate_task.apply(args=[context.as_json(), None, request.pk, True]).get())
    drawn = ReportContext.from_json(report.context)
    label = context.documents[0].label
    forest = _forest_titles(context)
    assert len(forest) == 5  # one comparison (female against male) of each metric
    assert [figure.title for figure in drawn.figures] == [
        *forest,
        f"Recall per group: {label}",
        f"EOD per validation step, every trial of {context.trials.label}",
        f"Accuracy against eod, every trial of {context.trials.label}",
    ]
    # Titled by the review request, not the model identifier; the checkpoint by its folder's name.
    assert (drawn.title, report.title) == (request.title, request.title)
    assert ("Checkpoint", f"local checkpoint ckpt-{reviewed.pk}") in drawn.subject.details
    timeline = drawn.figures[len(forest) + 1].svg
    assert f">trial {reviewed.number}<" in timeline  # its own legend entry
    assert "other trials" in timeline
    path = tmp_path / "report.pdf"
    path.write_bytes(report.revisions.get().path.read_bytes())
    text = subprocess.run([pdf_tool("pdftotext"), str(path), "-"], capture_output=True, text=True, check=True).stdout
    assert f"Trials of {context.trials.label}" in text
    assert f"Only trial {reviewed.number} was decided on." in " ".join(text.split())
    trials = text[text.index(f"Trials of {context.trials.label}") :]
    assert f"{reviewed.number} (reviewed)" in " ".join(trials.split())
    assert "0.0400 (step 50)" in trials
    # Its first page, kept beside the prediction audit's (test_independent_tools) as a CI artifact.
    subprocess.run(
        [
            pdf_tool("pdftoppm"),
            "-png",
            "-r",
            "80",
            "-f",
            "1",
            "-l",
            "1",
            "-singlefile",
            str(path),
            str(tmp_path / "page"),
        ],
        check=True,
        timeout=120,
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tmp_path / "page.png", ARTIFACTS / "trial-report-page-1.png")
    shutil.copyfile(path, ARTIFACTS / "trial-report.pdf")
