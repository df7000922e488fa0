"""A decided trial's signed report shows why its checkpoint has its gaps, when its attributions were
computed: a section with a table per attribute, a figure per attribute, and the stored summary attached
byte for byte."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from auditportal.accounts.models import User
from auditportal.approvals import services as approval_services
from auditportal.approvals.context import review_request_context
from auditportal.approvals.models import RequestState, ReviewRequest
from auditportal.datasets.models import DatasetVersion
from auditportal.fairness.documents.report_context import SCHEMA_VERSION, ReportContext
from auditportal.reports import rendering, services
from auditportal.reports.models import Report
from tests.approvals.conftest import approved, frank, trial_document
from tests.attributions.conftest import done_attribution
from tests.attributions.documents import summary_document
from tests.evidence.helpers import UNFAIR
from tests.factories import PASSWORD
from tests.reports.helpers import pdf_tool
from tests.reports.test_decision_reports import worker

__all__ = ["frank", "worker"]

HOSTILE = "<b>=1+2</b>"


def _request(version: DatasetVersion, bob: User, runs: Path) -> ReviewRequest:
    document = trial_document(version, bob, UNFAIR, runs)
    return approval_services.review_request_create(
        user=bob, title="Credit model v4", intended_use="Pre-screening", documents=[document]
    )


def _attributed(request: ReviewRequest, bob: User) -> Any:
    assert request.trial is not None
    document = summary_document(attributes={"gender": ("male", "female", HOSTILE)}, features=("zip", HOSTILE, "x1"))
    return done_attribution(request.trial, bob, document=document)


def test_the_decisions_context_carries_the_reviewed_checkpoints_attributions_and_the_page_prints_them(
    version: DatasetVersion, runs: Path, bob: User, carol: User, dave: User, frank: User
) -> None:
    request = _request(version, bob, runs)
    attribution = _attributed(request, bob)
    approved(request, carol, [dave, frank])
    context = review_request_context(request=request)
    [evidence] = context.attributions
    assert evidence.canonical == attribution.canonical
    assert evidence.sha256 == attribution.sha256
    assert evidence.label.startswith(f"Attributions #{attribution.pk} of experiment ")
    assert f"local checkpoint ckpt-{request.trial_id}" in evidence.label
    assert str(runs) not in evidence.label  # a report names a local checkpoint by its folder only
    value = context.as_json()
    assert value["schema_version"] == SCHEMA_VERSION == 3
    assert ReportContext.from_json(value) == context
    assert any("Why the gaps: the reviewed checkpoint's feature attributions" in line for line in context.summary)
    # The tables: the group against the reference, its largest contributions (* beyond noise), the proxies.
    [table] = evidence.tables
    assert (table.attribute, table.reference) == ("gender", "male")
    assert [row.group for row in table.rows] == [HOSTILE, "female"]  # as stored: canonical JSON sorts keys
    assert table.rows[1].contributions[0] == "zip* -0.0700 [-0.0800, -0.0600]"
    assert table.rows[1].score_gap == "-0.100 [-0.120, -0.0800]"
    assert [row.feature for row in table.proxies] == ["zip", HOSTILE, "x1"]
    attachments = rendering.embedded_files(context)
    [attached] = [item for item in attachments if item.name == f"attributions-{attribution.sha256[:12]}.json"]
    assert attached.data == attribution.canonical.encode()
    assert attached.relationship == "Supplement"
    html = rendering.render_html(context, attachments=attachments)
    assert '<section id="attributions">' in html
    assert "<h2>Why the gaps</h2>" in html
    assert HOSTILE not in html
    assert "&lt;b&gt;=1+2&lt;/b&gt;" in html


def test_the_attributions_of_another_checkpoint_of_the_trial_are_not_shown(
    version: DatasetVersion, runs: Path, bob: User, carol: User, dave: User, frank: User
) -> None:
    request = _request(version, bob, runs)
    trial = request.trial
    assert trial is not None
    trial.checkpoint += "-retrained"  # the trial's next checkpoint, not the one the request names
    done_attribution(trial, bob)
    approved(request, carol, [dave, frank])
    context = review_request_context(request=request)
    assert context.attributions == ()
    html = rendering.render_html(context, attachments=rendering.embedded_files(context))
    assert 'id="attributions"' not in html
    assert "Why the gaps" not in html


@pytest.mark.slow  # draws the figures in Chromium, renders and signs the PDF
def test_an_approved_trial_gets_a_signed_report_with_its_attributions_figure_table_and_file(
    worker: None,
    version: DatasetVersion,
    runs: Path,
    bob: User,
    carol: User,
    dave: User,
    frank: User,
    django_capture_on_commit_callbacks: Callable[..., Any],
    tmp_path: Path,
) -> None:
    request = _request(version, bob, runs)
    attribution = _attributed(request, bob)
    with django_capture_on_commit_callbacks(execute=True):
        approved(request, carol, [dave, frank])
    assert request.state == RequestState.APPROVED
    report = Report.objects.get()
    context = ReportContext.from_json(report.context)
    why = [figure for figure in context.figures if figure.title.startswith("Why the gaps")]
    assert [figure.title.split(":")[0] for figure in why] == ["Why the gaps, gender"]
    assert why[0].svg.startswith("<svg")
    assert "<b>=1+2" not in why[0].svg
    assert attribution.sha256 in why[0].caption
    signed = services.report_sign_member(report=report, member=dave, password=PASSWORD)
    path = tmp_path / "report.pdf"
    path.write_bytes(signed.path.read_bytes())
    text = " ".join(
        subprocess.run(
            [pdf_tool("pdftotext"), str(path), "-"], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    assert "Why the gaps" in text
    assert "Largest contributions to the score gap" in text
    assert HOSTILE in text  # as text
    out = tmp_path / "attributions.json"
    subprocess.run(
        [pdf_tool("pdfdetach"), "-savefile", f"attributions-{attribution.sha256[:12]}.json", "-o", str(out), str(path)],
        check=True,
        capture_output=True,
    )
    assert out.read_bytes() == attribution.canonical.encode()
