"""A deployment's monitoring report for a period (docs/monitoring.md, "Monitoring reports"): its context
from a seeded deployment (two models, batches, looks, a breach that opened an incident and rolled the
deployment back), the certified PDF/A-3b as outside tools see it (pdfsig, qpdf, pdfdetach, pdftotext,
pdftoppm), hostile names escaped in the PDF and the CSV, once per period, the bad periods, who may ask,
and the API."""

from __future__ import annotations

import base64
import csv
import datetime as dt
import hashlib
import io
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.utils import timezone

from auditportal.accounts import services as account_services
from auditportal.accounts.models import TokenScope, User
from auditportal.activity.models import Event, Verb
from auditportal.fairness.documents.canonical import canonical_sha256
from auditportal.fairness.documents.monitoring_report import MonitoringReportContext
from auditportal.fairness.errors import UserError
from auditportal.fairness.text.csvsafe import original_text
from auditportal.monitoring import selectors as monitoring_selectors
from auditportal.monitoring import services as monitoring_services
from auditportal.monitoring.models import BatchState, Deployment, Incident, Look, PredictionBatch
from auditportal.reports import services
from auditportal.reports.models import Report
from auditportal.reports.monitoring_context import monitoring_report_context
from tests.monitoring.conftest import Approve, approve, demo_version, deployment, fake_trainer, frank, runs
from tests.reports.helpers import ARTIFACTS, nss_database, pdf_tool
from tests.reports.pdfa import problems as pdfa_problems
from tests.reports.test_independent_tools import _pdfsig

__all__ = ["approve", "demo_version", "deployment", "fake_trainer", "frank", "runs"]

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert(1)</script>"
FORMULA = '=HYPERLINK("http://evil.example/","x")'
HOSTILE_DESCRIPTION = f"Loan pre-screening {SCRIPT} <b>bold</b>"


def _counts(f_fn: int, *, extra: bool = False) -> dict[str, Any]:
    groups: dict[str, Any] = {
        "f": {"tp": 150, "fn": f_fn, "fp": 10, "tn": 140},
        "m": {"tp": 150, "fn": 3, "fp": 12, "tn": 140},
    }
    if extra:
        groups[SCRIPT] = {"tp": 5, "fn": 0, "fp": 1, "tn": 4}
        groups[FORMULA] = {"tp": 3, "fn": 1, "fp": 0, "tn": 2}
    return {"gender": {"groups": groups}}


def _batch(deployment: Deployment, user: User, batch_id: str, counts: dict[str, Any]) -> PredictionBatch:
    deployment = Deployment.objects.get(pk=deployment.pk)  # what serves now
    received = monitoring_services.batch_receive_counts(
        deployment=deployment, user=user, batch_id=batch_id, counts=counts
    )
    return monitoring_services.batch_count(batch_id=received.batch.pk)


@pytest.fixture
def seeded(deployment: Deployment, approve: Approve, bob: User, erin: User) -> dict[str, Any]:
    """credit:3 then credit:4 promoted; a compliant batch of credit:4 with hostile group names, a breaching
    one (an incident, a rollback to credit:3), a batch of credit:3 and a failed one."""
    start = timezone.now() - dt.timedelta(seconds=1)
    Deployment.objects.filter(pk=deployment.pk).update(description=HOSTILE_DESCRIPTION)
    deployment.refresh_from_db()
    approve("credit:3")
    approve("credit:4")
    monitoring_services.deployment_promote(deployment=deployment, model_identifier="credit:3", by=bob)
    monitoring_services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob)
    _batch(deployment, erin, "hour-1", _counts(2, extra=True))
    _batch(deployment, erin, "hour-2", _counts(60))  # women's FNR 60/210: a breach of the 5% limit
    _batch(deployment, erin, "hour-3", _counts(1))
    PredictionBatch.objects.create(
        deployment=deployment,
        batch_id="hour-4",
        model_identifier="credit:3",
        sha256="0" * 64,
        format="csv",
        size_bytes=10,
        received_by=erin,
        state=BatchState.FAILED,
        error="column 'score' is missing",
    )
    end = timezone.now() + dt.timedelta(microseconds=1)
    return {"deployment": deployment, "start": start, "end": end}


def _generate(seeded: dict[str, Any], actor: User, *, with_figures: bool = False) -> tuple[Report, bool]:
    # Figures start a Chromium (about 2 s): only the PDF's own test draws them.
    return services.monitoring_report_generate(
        actor=actor,
        deployment=seeded["deployment"],
        start=seeded["start"],
        end=seeded["end"],
        now=seeded["end"],
        with_figures=with_figures,
    )


def test_the_context_holds_what_served_the_batches_the_metrics_the_incident_and_the_rollback(
    seeded: dict[str, Any], erin: User
) -> None:
    report, created = _generate(seeded, erin)
    assert created
    context = MonitoringReportContext.from_json(report.context)
    assert context.sha256 == report.context_sha256
    assert [span.model for span in context.serving] == ["", "credit:3", "credit:4", "credit:3"]
    assert [change.kind for change in context.changes] == ["promoted", "promoted", "rolled_back"]
    assert [(batch.batch_id, batch.state) for batch in context.batches] == [
        ("hour-1", "counted"),
        ("hour-2", "counted"),
        ("hour-3", "counted"),
        ("hour-4", "failed"),
    ]
    assert (context.counted, context.failed) == (3, 1)
    women = next(total for total in context.totals if total.group == "f")
    assert (women.tp, women.fn, women.fp, women.tn) == (450, 63, 30, 420)
    assert {total.group for total in context.totals} >= {SCRIPT, FORMULA}
    assert len(context.looks) == 3
    assert sum(look.breached for look in context.looks) == 1
    fnr = [row for row in context.metrics if row.metric == "fnr" and row.group == "f" and row.kind == "rate"]
    assert {row.model for row in fnr} == {"credit:3", "credit:4"}
    breached = next(row for row in fnr if row.model == "credit:4")
    assert breached.status == "breach"
    assert breached.low is not None
    assert breached.low > breached.limit == 0.05
    incident = Incident.objects.get(deployment=seeded["deployment"])
    (entry,) = context.incidents
    assert (entry.id, entry.sha256) == (incident.pk, incident.document_sha256)
    assert hashlib.sha256(entry.canonical.encode()).hexdigest() == incident.document_sha256
    assert context.changes[-1].incident == incident.pk
    assert context.signatories == ()
    assert report.signatory_count == 0
    assert report.deployment == seeded["deployment"]
    event = Event.objects.get(verb=Verb.MONITORING_REPORT_CREATED)
    assert event.data["incidents"] == [{"id": incident.pk, "sha256": incident.document_sha256}]
    assert event.actor == erin


def test_the_pdf_is_certified_trusted_by_pdfsig_pdfa_and_carries_the_evidence(
    seeded: dict[str, Any], erin: User, tmp_path: Path
) -> None:
    report, _ = _generate(seeded, erin, with_figures=True)
    revision = report.revisions.get()
    path = revision.path
    signatures = _pdfsig(path, nss_database(tmp_path / "nss"))
    assert [(item["field"], item["valid"], item["trusted"], item["total"]) for item in signatures] == [
        ("Organisation", True, True, True)
    ]
    subprocess.run([pdf_tool("qpdf"), "--check", str(path)], check=True, capture_output=True)
    assert pdfa_problems(path.read_bytes()) == []

    pdfdetach = pdf_tool("pdfdetach")
    listing = subprocess.run([pdfdetach, "-list", str(path)], capture_output=True, text=True, check=True).stdout
    incident = Incident.objects.get(deployment=seeded["deployment"])
    names = {
        f"incident-{incident.pk}-{incident.document_sha256[:12]}.json",
        "batch-counts.csv",
        f"monitoring-report-context-{report.context_sha256[:12]}.json",
    }
    for name in names:
        assert name in listing
    out = tmp_path / "out"
    out.mkdir()
    files = {}
    for name in names:
        subprocess.run(
            [pdfdetach, "-savefile", name, "-o", str(out / name), str(path)], check=True, capture_output=True
        )
        files[name] = (out / name).read_bytes()
    assert hashlib.sha256(files[f"incident-{incident.pk}-{incident.document_sha256[:12]}.json"]).hexdigest() == (
        incident.document_sha256
    )
    context_bytes = files[f"monitoring-report-context-{report.context_sha256[:12]}.json"]
    assert hashlib.sha256(context_bytes).hexdigest() == report.context_sha256
    assert canonical_sha256(json.loads(context_bytes)) == report.context_sha256

    rows = list(csv.DictReader(io.StringIO(files["batch-counts.csv"].decode())))
    groups = {original_text(row["group"]) for row in rows}
    assert {SCRIPT, FORMULA, "f", "m"} <= groups
    # The formula is neutralised in the file: no cell begins with "=".
    assert not any(cell.startswith(("=", "+", "-", "@")) for row in rows for cell in row.values() if cell)
    assert any(row["batch_id"] == "hour-4" and row["state"] == "failed" for row in rows)

    text = subprocess.run([pdf_tool("pdftotext"), str(path), "-"], capture_output=True, text=True, check=True).stdout
    assert SCRIPT in text  # printed as text, not markup
    assert "<b>bold</b>" in text
    assert "Monitoring report: credit-scoring/prod" in text
    assert "rolled_back" in text
    assert incident.document_sha256 in "".join(text.split())  # wrapped in its table cell
    # The page's charts over the period's looks, printed: each watched metric per group, the gap, the drift.
    flat = " ".join(text.split())
    for title in (
        "gender: False-negative rate, at most the limit.",
        "gender: group shares against the training data.",
    ):
        assert title in flat
    assert "Over the period's looks" in flat
    assert "f: breach boundary" in flat  # the figure's own legend: the SVG is drawn, its text kept as text

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "monitoring-report.pdf").write_bytes(path.read_bytes())
    subprocess.run(
        [pdf_tool("pdftoppm"), "-r", "60", "-png", str(path), str(ARTIFACTS / "monitoring-report-page")],
        check=True,
        capture_output=True,
    )


def test_a_period_is_reported_once_and_the_same_report_comes_back(
    seeded: dict[str, Any], erin: User, dave: User
) -> None:
    first, created = _generate(seeded, erin)
    again, created_again = _generate(seeded, dave)
    assert created
    assert not created_again
    assert again.pk == first.pk
    assert Report.objects.count() == 1


def test_a_period_without_batches_makes_a_report_saying_so(deployment: Deployment, carol: User) -> None:
    end = timezone.now()
    report, created = services.monitoring_report_generate(
        actor=carol, deployment=deployment, start=end - dt.timedelta(days=1), end=end, now=end
    )
    assert created
    context = MonitoringReportContext.from_json(report.context)
    assert context.batches == ()
    assert context.incidents == ()
    assert "No batches were received in this period: there was nothing to judge." in context.summary


@pytest.mark.parametrize(
    ("start", "end", "field", "words"),
    [
        (0, 0, "from", "must start before it ends"),
        (5, 1, "from", "must start before it ends"),
        (-2, 3600, "to", "must have ended"),
    ],
)
def test_a_bad_period_is_refused_naming_the_field(
    deployment: Deployment, erin: User, start: int, end: int, field: str, words: str
) -> None:
    now = timezone.now()
    with pytest.raises(UserError) as refused:
        services.monitoring_report_generate(
            actor=erin,
            deployment=deployment,
            start=now + dt.timedelta(seconds=start) - dt.timedelta(hours=2),
            end=now + dt.timedelta(seconds=end) - (dt.timedelta(hours=2) if field == "from" else dt.timedelta()),
            now=now,
        )
    assert refused.value.field == field
    assert words in str(refused.value)
    assert not Report.objects.exists()


def test_ml_engineers_data_stewards_and_outsiders_may_not_ask(
    deployment: Deployment, bob: User, alice: User, oscar: User
) -> None:
    end = timezone.now()
    for user in (bob, alice, oscar):
        with pytest.raises(PermissionDenied) as refused:
            services.monitoring_report_generate(
                actor=user, deployment=deployment, start=end - dt.timedelta(hours=1), end=end, now=end
            )
        assert "Only an administrator, an ethics-committee member or a reviewer" in str(refused.value)
    assert not Report.objects.exists()


# ---------------------------------------------------------------------------------------------- API


def _url(name: str = "credit-scoring/prod") -> str:
    return f"/api/v1/deployments/{name}/-/reports/"


def test_the_api_makes_the_report_201_then_answers_200_and_lists_it(seeded: dict[str, Any], erin: User) -> None:
    client = Client()
    client.force_login(erin)
    body = {"from": seeded["start"].isoformat(), "to": seeded["end"].isoformat()}
    made = client.post(_url(), body, content_type="application/json")
    assert made.status_code == 201, made.content
    answer = made.json()
    assert answer["deployment"] == "credit-scoring/prod"
    assert answer["state"] == "signed"
    assert answer["signatories"] == []
    assert dt.datetime.fromisoformat(answer["period"]["from"]) == seeded["start"]
    assert dt.datetime.fromisoformat(answer["period"]["to"]) == seeded["end"]
    again = client.post(_url(), body, content_type="application/json")
    assert again.status_code == 200
    assert again.json()["id"] == answer["id"]
    listed = client.get("/api/v1/reports/?deployment=credit-scoring/prod").json()
    assert [item["id"] for item in listed["results"]] == [answer["id"]]
    assert listed["results"][0]["deployment"] == "credit-scoring/prod"


def test_the_api_names_the_field_of_a_bad_period_and_404s_an_unknown_deployment(
    deployment: Deployment, erin: User
) -> None:
    client = Client()
    client.force_login(erin)
    now = timezone.now()
    future = client.post(
        _url(),
        {"from": now.isoformat(), "to": (now + dt.timedelta(days=1)).isoformat()},
        content_type="application/json",
    )
    assert future.status_code == 400
    assert future.json()["field"] == "to"
    backwards = client.post(
        _url(),
        {"from": (now - dt.timedelta(hours=1)).isoformat(), "to": (now - dt.timedelta(hours=2)).isoformat()},
        content_type="application/json",
    )
    assert backwards.status_code == 400
    assert backwards.json()["field"] == "from"
    missing = client.post(_url(), {"from": "yesterday"}, content_type="application/json")
    assert missing.status_code == 400
    assert {"from", "to"} <= set(missing.json())
    unknown = client.post(
        _url("credit-scoring/nowhere"),
        {"from": (now - dt.timedelta(hours=2)).isoformat(), "to": (now - dt.timedelta(hours=1)).isoformat()},
        content_type="application/json",
    )
    assert unknown.status_code == 404
    assert "credit-scoring/nowhere" in unknown.json()["detail"]


def test_the_api_refuses_an_ml_engineer_403_an_outsider_404_and_a_token_of_another_scope(
    deployment: Deployment, bob: User, oscar: User, erin: User
) -> None:
    now = timezone.now()
    body = {"from": (now - dt.timedelta(hours=2)).isoformat(), "to": (now - dt.timedelta(hours=1)).isoformat()}
    engineer = Client()
    engineer.force_login(bob)
    assert engineer.post(_url(), body, content_type="application/json").status_code == 403
    outsider = Client()
    outsider.force_login(oscar)
    assert outsider.post(_url(), body, content_type="application/json").status_code == 404
    secret = account_services.api_token_create(
        user=erin, account="scoring", name="scoring", days=1, scope=TokenScope.MONITORING
    ).secret
    token = Client(HTTP_AUTHORIZATION=f"Token {secret}")
    assert token.post(_url(), body, content_type="application/json").status_code in (401, 403)
    assert not Report.objects.exists()


# ---------------------------------------------------------------------------------------------- pages


def test_the_page_lists_the_reports_and_its_form_makes_one_or_names_the_bad_field(
    seeded: dict[str, Any], carol: User, bob: User
) -> None:
    page = "/monitoring/credit-scoring/prod/-/reports/"
    client = Client()
    client.force_login(carol)
    empty = client.get(page)
    assert empty.status_code == 200
    assert b'id="no-monitoring-reports"' in empty.content
    assert b'id="monitoring-report-form"' in empty.content
    fmt = "%Y-%m-%dT%H:%M:%S.%f"
    bad = client.post(page, {"start": seeded["end"].strftime(fmt), "end": seeded["start"].strftime(fmt)})
    assert bad.status_code == 400
    assert b"The period must start before it ends" in bad.content
    made = client.post(page, {"start": seeded["start"].strftime(fmt), "end": seeded["end"].strftime(fmt)})
    report = Report.objects.get()
    assert made.status_code == 302
    assert made["Location"] == f"/reports/{report.pk}/"
    detail = client.get(made["Location"])
    assert b'id="deployment-reports"' in detail.content
    listed = client.get(page)
    assert f'href="/reports/{report.pk}/"'.encode() in listed.content
    engineer = Client()
    engineer.force_login(bob)
    assert b'id="monitoring-report-form"' not in engineer.get(page).content
    deployment_page = engineer.get("/monitoring/credit-scoring/prod/")
    assert f'href="{page}"'.encode() in deployment_page.content


def _looks_drawn(chart: dict[str, Any]) -> set[int]:
    drawn: set[int] = set()
    for trace in chart["figure"]["data"]:
        x = trace["x"]
        values = np.frombuffer(base64.b64decode(x["bdata"]), dtype=f"<{x['dtype']}") if isinstance(x, dict) else x
        drawn |= {int(value) for value in values}
    return drawn


def test_the_report_draws_the_looks_of_its_period_only(seeded: dict[str, Any]) -> None:
    deployment = seeded["deployment"]
    looks = list(Look.objects.filter(deployment=deployment).order_by("seq"))
    assert [look.seq for look in looks] == [1, 2, 3]
    whole = monitoring_selectors.look_figures(deployment=deployment, start=seeded["start"], end=seeded["end"])
    assert {"rate", "gap", "share"} == {chart["kind"] for chart in whole}
    assert set().union(*(_looks_drawn(chart) for chart in whole)) == {1, 2, 3}
    later = monitoring_selectors.look_figures(deployment=deployment, start=looks[1].created_at, end=seeded["end"])
    assert [chart["title"] for chart in later] == [chart["title"] for chart in whole]
    assert set().union(*(_looks_drawn(chart) for chart in later)) == {2, 3}
    before = monitoring_selectors.look_figures(deployment=deployment, start=seeded["start"], end=looks[0].created_at)
    assert before == []


def test_a_report_without_figures_holds_the_same_context(seeded: dict[str, Any], erin: User) -> None:
    context = monitoring_report_context(
        deployment=seeded["deployment"], start=seeded["start"], end=seeded["end"], requested_by=erin
    )
    report, _ = services.monitoring_report_generate(
        actor=erin,
        deployment=seeded["deployment"],
        start=seeded["start"],
        end=seeded["end"],
        now=seeded["end"],
        with_figures=False,
    )
    assert report.context_sha256 == context.sha256
