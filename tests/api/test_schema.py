"""The OpenAPI schema: generated without warnings, covering every API route, and accurate: every
operation, called with valid input on a populated portal, answers 2xx with a body that matches its
documented (closed) schema; and the Swagger UI page, served from static files with no inline script."""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from auditportal.accounts.models import Role, User
from auditportal.accounts.services import role_grant
from auditportal.approvals.models import ReviewRequest, Waiver
from auditportal.approvals.rules import open_pauses
from auditportal.approvals.services import REPORT_GENERATE_TASK
from auditportal.audits.models import PredictionAudit
from auditportal.datasets.models import DatasetVersion
from auditportal.evidence.selectors import verdict_document_of_audit
from auditportal.experiments.models import Template, TrialState
from auditportal.fairness.documents.report_context import ReportContext
from auditportal.outbox.models import OutboxMessage
from auditportal.reports.services import report_generate
from tests.api.conftest import Portal, session_of
from tests.api.schemas import portal_schema, strict_schema
from tests.attributions.conftest import done_attribution, local_trial
from tests.audits.conftest import PREDICTIONS_CSV
from tests.comparisons.conftest import paired_csv_text
from tests.factories import PASSWORD, ExperimentFactory, TrialFactory, client_for, make_user

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
SCHEMA = strict_schema()


def test_the_schema_is_generated_without_warnings_and_is_valid_openapi() -> None:
    out = io.StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", "--format", "openapi", stdout=out)
    assert yaml.safe_load(out.getvalue())["openapi"].startswith("3.")


def _api_routes(patterns: list[URLPattern | URLResolver], prefix: str = "") -> Iterator[str]:
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _api_routes(pattern.url_patterns, route)
        elif route.startswith("api/v1/"):
            yield "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


def test_every_api_route_in_the_urlconf_is_in_the_schema() -> None:
    routes = set(_api_routes(get_resolver().url_patterns)) - {"/api/v1/schema/", "/api/v1/docs/"}
    assert len(routes) > 20
    assert routes == set(portal_schema()["paths"])


def test_every_operation_documents_its_errors_and_security() -> None:
    schema = portal_schema()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert {"401", "403"} <= set(operation["responses"]), (method, path)
            assert operation["security"], (method, path)
            assert {} not in operation["security"], (method, path)
            assert {"cookieAuth": []} in operation["security"], (method, path)
    gate = schema["paths"]["/api/v1/gate/"]["get"]
    assert {"gateToken": []} in gate["security"]
    scheme = schema["components"]["securitySchemes"]["gateToken"]
    assert (scheme["type"], scheme["in"], scheme["name"]) == ("apiKey", "header", "Authorization")


class Caller:
    """``call(who, METHOD, path, status, ...)``: one request through the WSGI application as ``who`` (a
    username, or "token" for the gate token), checked against the schema; returns the parsed body."""

    def __init__(self, portal: Portal) -> None:
        self.token = portal.token
        self.monitoring_token = portal.monitoring_token
        self.sessions = {user.username: session_of(user) for user in User.objects.all()}
        self.answered: set[tuple[str, str]] = set()

    def __call__(self, who: str, method: str, path: str, status: int, **kwargs: Any) -> Any:
        case = SCHEMA[path][method].Case(**kwargs)
        if who == "token":
            response = case.call(headers={"Authorization": f"Token {self.token}"})
        elif who == "monitoring":
            response = case.call(headers={"Authorization": f"Token {self.monitoring_token}"})
        else:
            cookies = self.sessions[who]
            response = case.call(cookies=cookies, headers={"X-CSRFToken": cookies["csrftoken"]})
        assert response.status_code == status, (method, path, response.text[:500])
        case.validate_response(response, checks=CHECKS)
        if 200 <= status < 300:
            self.answered.add((method.lower(), path))
        if not response.headers.get("content-type", [""])[0].startswith("application/json"):
            return response.content  # a file: a report's PDF
        return response.json()


@pytest.fixture
def call(portal: Portal) -> Iterator[Caller]:
    caller = Caller(portal)
    # Django closes the database connection at the end of each request, which would end the test's
    # transaction: its test client disconnects the same handlers around each request.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield caller
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def _two_completed_trials(version_id: int, root: Path, settings: SettingsWrapper) -> tuple[int, int]:
    version = DatasetVersion.objects.get(pk=version_id)
    shards = root / "trial-shards"
    shards.mkdir()
    manifest = {"dataset": {"sha256": version.sha256}, "part_dirs": ["part-00000"], "num_examples": 10}
    (shards / "manifest.json").write_text(json.dumps(manifest))
    settings.EXPERIMENT_RUN_DIR = root
    experiment = ExperimentFactory.create(dataset_version=version, shard_dir=str(shards))
    pks = []
    for number in (1, 2):
        checkpoint = root / f"checkpoint-{number}"
        checkpoint.mkdir()
        (checkpoint / "state_dict.pth").write_bytes(b"")
        trial = TrialFactory.create(experiment=experiment, state=TrialState.COMPLETED, checkpoint=str(checkpoint))
        pks.append(trial.pk)
    return pks[0], pks[1]


@pytest.mark.slow
def test_every_operation_answers_valid_input_as_its_schema_says(
    portal: Portal, call: Caller, settings: SettingsWrapper, tmp_path: Path
) -> None:
    ids = portal.ids
    # Reads.
    call("pat", "GET", "/api/v1/datasets/", 200)
    call(
        "pat",
        "GET",
        "/api/v1/dataset-versions/{version_id}/",
        200,
        path_parameters={"version_id": ids["version_id"][0]},
    )
    listed = call("pat", "GET", "/api/v1/experiments/", 200, query={"page_size": 1})
    assert listed["count"] == len(ids["experiment_id"]) == 3
    for experiment in ids["experiment_id"]:
        body = call(
            "pat", "GET", "/api/v1/experiments/{experiment_id}/", 200, path_parameters={"experiment_id": experiment}
        )
        assert body["trials"][0]["verdicts"], "a trial with its verdicts"
    call("pat", "GET", "/api/v1/audits/predictions/", 200)
    call("pat", "GET", "/api/v1/audits/predictions/{audit_id}/", 200, path_parameters={"audit_id": ids["audit_id"][0]})
    for document in ids["document_id"]:
        call("pat", "GET", "/api/v1/documents/{document_id}/", 200, path_parameters={"document_id": document})
        call("pat", "GET", "/api/v1/documents/{document_id}/canonical", 200, path_parameters={"document_id": document})
    documents = call("pat", "GET", "/api/v1/documents/", 200, query={"page_size": 2})
    assert documents["count"] == len(ids["document_id"])
    of_audit = call(
        "pat", "GET", "/api/v1/documents/", 200, query={"audit": ids["audit_id"][0], "kind": "prediction_audit"}
    )
    assert [d["id"] for d in of_audit["results"]] == [verdict_document_of_audit(audit=pat_audit(ids["audit_id"][0])).pk]
    call("pat", "GET", "/api/v1/policy/", 200)
    call("pat", "GET", "/api/v1/review-requests/", 200, query={"state": "in_review"})
    for request in ids["request_id"]:
        call("pat", "GET", "/api/v1/review-requests/{request_id}/", 200, path_parameters={"request_id": request})
    answer = call("token", "GET", "/api/v1/gate/", 200, query={"model": portal.model})
    assert answer["approved"] is True
    call("token", "GET", "/api/v1/gate/", 404, query={"model": "no-such-model"})

    # Writes: experiments, audits, the policy, reports.
    experiment = call(
        "pat",
        "POST",
        "/api/v1/experiments/",
        201,
        body={"dataset_version": ids["version_id"][0], "template": Template.SINGLE, "batches": 50},
        media_type="application/json",
    )
    call(
        "pat",
        "POST",
        "/api/v1/experiments/{experiment_id}/cancel/",
        200,
        path_parameters={"experiment_id": experiment["experiment"]},
    )
    audit = call(
        "pat",
        "POST",
        "/api/v1/audits/predictions/",
        201,
        body={
            "file": PREDICTIONS_CSV.encode(),
            "label": "label",
            "prediction": "pred",
            "attributes": ["gender", "age_group"],
            "intersect": True,
        },
        media_type="multipart/form-data",
    )
    assert set(audit["attributes"]) == {"gender", "age_group", "gender&age_group"}
    assert [d["id"] for d in audit["documents"]] == [verdict_document_of_audit(audit=pat_audit(audit["id"])).pk]
    # A paired comparison of two models on the same rows, then the list and the one stored.
    compared = call(
        "pat",
        "POST",
        "/api/v1/comparisons/",
        201,
        body={
            "file": paired_csv_text(rows=300).encode(),
            "label": "label",
            "champion": "model_a",
            "challenger": "model_b",
            "attributes": ["gender"],
        },
        media_type="multipart/form-data",
    )
    assert compared["champion"]["column"] == "model_a"
    call("pat", "GET", "/api/v1/comparisons/", 200)
    # Two audits of one file (one per model), paired with the file sent again.
    paired_bytes = paired_csv_text(rows=300).encode()
    audited = [
        call(
            "pat",
            "POST",
            "/api/v1/audits/predictions/",
            201,
            body={"file": paired_bytes, "label": "label", "prediction": column, "attributes": ["gender"]},
            media_type="multipart/form-data",
        )["id"]
        for column in ("model_a", "model_b")
    ]
    from_audits = call(
        "pat",
        "POST",
        "/api/v1/comparisons/audits/",
        201,
        body={"file": paired_bytes, "champion_audit": audited[0], "challenger_audit": audited[1]},
        media_type="multipart/form-data",
    )
    assert (from_audits["source"], from_audits["champion"]["audit"]) == ("audits", audited[0])
    # Two trials (tests/comparisons/test_trials.py trains real ones; here the checks before the worker pass).
    pair = _two_completed_trials(ids["version_id"][0], tmp_path, settings)
    queued_pair = call(
        "pat",
        "POST",
        "/api/v1/comparisons/trials/",
        202,
        body={"champion_trial": pair[0], "challenger_trial": pair[1]},
        media_type="application/json",
    )
    assert queued_pair["state"] == "pending"
    call("pat", "GET", "/api/v1/comparisons/{comparison_id}/", 200, path_parameters={"comparison_id": compared["id"]})
    # A trial's attributions: asked (pending), asked again (the same one), and a done one read.
    explained = local_trial(DatasetVersion.objects.get(pk=ids["version_id"][0]), tmp_path)
    trial_path = {"trial_id": explained.pk}
    pending = call(
        "pat", "POST", "/api/v1/trials/{trial_id}/attributions/", 202, path_parameters=trial_path,
        body={"sample_size": 500, "seed": 1}, media_type="application/json",
    )  # fmt: skip
    assert pending["state"] == "pending"
    call(
        "pat", "POST", "/api/v1/trials/{trial_id}/attributions/", 200, path_parameters=trial_path,
        body={"sample_size": 500, "seed": 1}, media_type="application/json",
    )  # fmt: skip
    done = done_attribution(explained, User.objects.get(username="pat"), seed=2)
    for attribution in (pending["id"], done.pk):
        call(
            "pat", "GET", "/api/v1/trials/{trial_id}/attributions/{attribution_id}/", 200,
            path_parameters={**trial_path, "attribution_id": attribution},
        )  # fmt: skip
    # What-if thresholds: started from a scored upload, judged at thresholds, suggested, frozen.
    started = call(
        "pat",
        "POST",
        "/api/v1/audits/whatif/",
        201,
        body={"file": PREDICTIONS_CSV.encode(), "label": "label", "score": "score", "attributes": ["gender"]},
        media_type="multipart/form-data",
    )
    whatif_path = {"whatif_id": started["id"]}
    moved = call(
        "pat",
        "GET",
        "/api/v1/audits/whatif/{whatif_id}/",
        200,
        path_parameters=whatif_path,
        query={"threshold": 0.45, "threshold[gender=f]": 0.42},
    )
    assert moved["thresholds"]["groups"] == {"f": 0.42}
    call("pat", "GET", "/api/v1/audits/whatif/{whatif_id}/", 400, path_parameters=whatif_path, query={"threshold": "x"})
    call("pat", "GET", "/api/v1/audits/whatif/{whatif_id}/suggestion/", 200, path_parameters=whatif_path)
    frozen = call(
        "pat",
        "POST",
        "/api/v1/audits/whatif/{whatif_id}/freeze/",
        201,
        path_parameters=whatif_path,
        query={"threshold[gender=m]": 0.6},
    )
    assert frozen["prediction"]["thresholds"]["groups"] == {"m": 0.6}
    # A file over AUDIT_INLINE_MAX_SIZE: 202, and its status until a worker audits it.
    settings.AUDIT_INLINE_MAX_BYTES = 100
    queued = call(
        "pat",
        "POST",
        "/api/v1/audits/predictions/",
        202,
        body={"file": PREDICTIONS_CSV.encode(), "label": "label", "prediction": "pred", "attributes": ["gender"]},
        media_type="multipart/form-data",
    )
    status = call(
        "pat", "GET", "/api/v1/audits/predictions/queued/{queued_id}/", 200, path_parameters={"queued_id": queued["id"]}
    )
    assert status["status"] == "queued"
    settings.AUDIT_INLINE_MAX_BYTES = 32 * 1024**2
    call(
        "pat",
        "POST",
        "/api/v1/policy/",
        201,
        body={"reason": "Stricter", "tolerance": 0.04},
        media_type="application/json",
    )
    # A loosening is a proposal (202) that a second administrator confirms; another one is withdrawn.
    for outcome, alpha in (("confirm", 0.1), ("withdraw", 0.2)):
        looser = {"reason": "Looser", "alpha": alpha}
        proposal = call("pat", "POST", "/api/v1/policy/", 202, body=looser, media_type="application/json")
        call("pat", "GET", "/api/v1/policy/proposals/", 200)
        call(
            "erin",
            "POST",
            f"/api/v1/policy/proposals/{{proposal_id}}/{outcome}/",
            200,
            path_parameters={"proposal_id": proposal["id"]},
        )
    # The A/B test planner stores nothing: a plan, and a refusal naming the field.
    plan = call(
        "pat",
        "POST",
        "/api/v1/comparisons/plan/",
        200,
        body={
            "groups": [
                {"name": "a", "share": 0.6, "rate": 0.8, "prevalence": 0.3},
                {"name": "b", "share": 0.4, "rate": 0.7, "prevalence": 0.2},
            ],
            "difference": 0.05,
            "unit": "positives",
        },
        media_type="application/json",
    )
    assert plan["deciding"] in {"a", "b"}
    refused = call(
        "pat",
        "POST",
        "/api/v1/comparisons/plan/",
        400,
        body={"groups": [{"name": "a", "share": 0.5, "rate": 0.5}], "difference": 0.05},
        media_type="application/json",
    )
    assert refused["field"] == "groups"
    verified = call(
        "pat",
        "POST",
        "/api/v1/reports/verify/",
        200,
        body={"file": b"%PDF-1.7 not really"},
        media_type="multipart/form-data",
    )
    assert verified["ok"] is False
    # The approved request's report, rendered here as the worker would (without figures); an approving
    # member signs it with their password in their session.
    settings.REPORT_STORAGE_DIR = tmp_path / "reports"
    decided = ids["request_id"][0]
    [message] = [m for m in OutboxMessage.objects.filter(name=REPORT_GENERATE_TASK) if m.args[2] == decided]
    report = report_generate(context=ReportContext.from_json(message.args[0]), review_request_id=decided)
    request_record = call(
        "pat", "GET", "/api/v1/review-requests/{request_id}/", 200, path_parameters={"request_id": decided}
    )
    assert request_record["reports"] == [
        {
            "id": report.pk,
            "decision": "approved",
            "state": "awaiting_signatures",
            "url": f"/api/v1/reports/{report.pk}/",
        }
    ]
    listed = call(
        "pat",
        "GET",
        "/api/v1/reports/",
        200,
        query={"request": decided, "model": portal.model, "state": "awaiting_signatures"},
    )
    assert [item["id"] for item in listed["results"]] == [report.pk]
    one = {"report_id": report.pk}
    assert call("pat", "GET", "/api/v1/reports/{report_id}/", 200, path_parameters=one)["latest_revision"] == 1
    pdf = call("pat", "GET", "/api/v1/reports/{report_id}/pdf", 200, path_parameters=one, query={"revision": 1})
    assert hashlib.sha256(pdf).hexdigest() == report.revisions.get().sha256
    signed = call(
        "dave",
        "POST",
        "/api/v1/reports/{report_id}/sign/",
        200,
        path_parameters=one,
        body={"password": PASSWORD},
        media_type="application/json",
    )
    assert (signed["latest_revision"], signed["signatories"][0]["signed"]) == (2, True)

    # A review request from draft to a decision, and the other transitions.
    audit_document = verdict_document_of_audit(audit=pat_audit(audit["id"]))
    created = call(
        "pat",
        "POST",
        "/api/v1/review-requests/",
        201,
        body={
            "title": "Scores v2",
            "intended_use": "Triage",
            "documents": [audit_document.pk],
            "model_identifier": "scores:2",
        },
        media_type="application/json",
    )
    own = {"request_id": created["id"]}
    call(
        "pat",
        "POST",
        "/api/v1/review-requests/{request_id}/revise/",
        200,
        path_parameters=own,
        body={"title": "Scores v2.1"},
        media_type="application/json",
    )
    call("pat", "POST", "/api/v1/review-requests/{request_id}/submit/", 200, path_parameters=own)
    call(
        "carol",
        "POST",
        "/api/v1/review-requests/{request_id}/request-changes/",
        200,
        path_parameters=own,
        body={"reason": "Name the data"},
        media_type="application/json",
    )
    call("pat", "POST", "/api/v1/review-requests/{request_id}/submit/", 200, path_parameters=own)
    call("carol", "POST", "/api/v1/review-requests/{request_id}/start-review/", 200, path_parameters=own)
    call(
        "carol",
        "POST",
        "/api/v1/review-requests/{request_id}/recommend/",
        201,
        path_parameters=own,
        body={"choice": "approve", "reason": "fine"},
        media_type="application/json",
    )
    thread = call(
        "carol",
        "POST",
        "/api/v1/review-requests/{request_id}/comments/",
        201,
        path_parameters=own,
        body={"body": "Which triage?"},
        media_type="application/json",
    )
    call(
        "pat",
        "POST",
        "/api/v1/review-requests/{request_id}/comments/",
        201,
        path_parameters=own,
        body={"body": "Manual triage.", "reply_to": thread["comments"][0]["id"]},
        media_type="application/json",
    )
    review_request = ReviewRequest.objects.get(pk=created["id"])
    findings = call("pat", "GET", "/api/v1/review-requests/{request_id}/", 200, path_parameters=own)["findings"]
    for member in ("dave", "frank"):
        if member == "frank":
            # A committee role granted mid-round pauses it; another committee member resumes it.
            role_grant(
                user=make_user("gina", []), role=Role.ETHICS_COMMITTEE, granted_by=User.objects.get(username="erin")
            )
            for paused in [r for r in ReviewRequest.objects.order_by("pk") if open_pauses(r)]:
                call(
                    "frank",
                    "POST",
                    "/api/v1/review-requests/{request_id}/resume/",
                    200,
                    path_parameters={"request_id": paused.pk},
                    body={"reason": "gina joined the committee; nothing else changed"},
                    media_type="application/json",
                )
        call(
            member,
            "POST",
            "/api/v1/review-requests/{request_id}/votes/",
            201,
            path_parameters=own,
            body={
                "choice": "approve",
                "reason": "fit for triage",
                "password": PASSWORD,
                "document_sha256": sorted(review_request.documents.values_list("sha256", flat=True)),
                "acknowledged": [f["key"] for f in findings],
            },
            media_type="application/json",
        )
    call(
        "erin",
        "POST",
        "/api/v1/review-requests/{request_id}/revoke/",
        200,
        path_parameters=own,
        body={"reason": "Data leak"},
        media_type="application/json",
    )

    unfair = ReviewRequest.objects.get(title="Credit model v5")
    fail = next(
        f
        for f in call(
            "pat", "GET", "/api/v1/review-requests/{request_id}/", 200, path_parameters={"request_id": unfair.pk}
        )["findings"]
        if f["verdict"] == "FAIL" and not f["waiver"]
    )
    call(
        "carol",
        "POST",
        "/api/v1/review-requests/{request_id}/waivers/",
        201,
        path_parameters={"request_id": unfair.pk},
        body={
            "finding_key": fail["key"],
            "reason": "explained",
            "compensating_measures": "manual review",
            "expires_on": str(date.today() + timedelta(days=30)),
        },
        media_type="application/json",
    )
    waiver = Waiver.objects.filter(request=unfair).first()  # the one just proposed
    assert waiver is not None
    call(
        "frank",
        "POST",
        "/api/v1/waivers/{waiver_id}/votes/",
        201,
        path_parameters={"waiver_id": waiver.pk},
        body={
            "choice": "approve",
            "reason": "acceptable",
            "password": PASSWORD,
            "document_sha256": [waiver.document.sha256],
        },
        media_type="application/json",
    )
    fair = ReviewRequest.objects.get(title="Credit model v3")
    call(
        "bob",
        "POST",
        "/api/v1/review-requests/{request_id}/withdraw/",
        200,
        path_parameters={"request_id": fair.pk},
        body={},
        media_type="application/json",
    )
    call(
        "pat",
        "POST",
        "/api/v1/audits/predictions/{audit_id}/retire/",
        200,
        path_parameters={"audit_id": audit["id"]},
        body={"reason": "Wrong file"},
        media_type="application/json",
    )

    # Deployments: the status with a session and with the gate token, creation, promotion, the monitor
    # policy (another administrator's loosening confirmed; a tightening; a loosening withdrawn).
    prod = {"name": portal.names["name"][0]}
    listed = call("pat", "GET", "/api/v1/deployments/", 200)
    assert [d["name"] for d in listed["results"]] == [prod["name"]]
    status = call("pat", "GET", "/api/v1/deployments/{name}/", 200, path_parameters=prod)
    assert (status["state"], status["model"], status["approved"]) == ("serving", portal.model, True)
    assert call("token", "GET", "/api/v1/deployments/{name}/", 200, path_parameters=prod) == status
    staging = call(
        "pat",
        "POST",
        "/api/v1/deployments/",
        201,
        body={"name": "credit-scoring/staging", "description": "Shadow traffic"},
        media_type="application/json",
    )
    assert staging["state"] == "empty"
    promoted = call(
        "pat",
        "POST",
        "/api/v1/deployments/{name}/-/promote/",
        200,
        path_parameters={"name": staging["name"]},
        body={"model": portal.model, "reason": "Shadow the production model"},
        media_type="application/json",
    )
    assert (promoted["state"], promoted["model"]) == ("serving", portal.model)
    policy = call("pat", "GET", "/api/v1/deployments/{name}/-/policy/", 200, path_parameters=prod)
    [pending] = policy["proposals"]
    confirmed = call(
        "pat",
        "POST",
        "/api/v1/deployments/{name}/-/policy/proposals/{monitor_proposal_id}/confirm/",
        200,
        path_parameters={**prod, "monitor_proposal_id": pending["id"]},
    )
    assert confirmed["version"] == 2
    call(
        "pat",
        "POST",
        "/api/v1/deployments/{name}/-/policy/",
        201,
        path_parameters=prod,
        body={"spec": {"limits": {"fnr": {"upper": 0.04}}}, "reason": "Tighter"},
        media_type="application/json",
    )
    looser = call(
        "pat",
        "POST",
        "/api/v1/deployments/{name}/-/policy/",
        202,
        path_parameters=prod,
        body={"spec": {"share_shift": None}, "reason": "No drift limit"},
        media_type="application/json",
    )
    call(
        "erin",
        "POST",
        "/api/v1/deployments/{name}/-/policy/proposals/{monitor_proposal_id}/withdraw/",
        200,
        path_parameters={**prod, "monitor_proposal_id": looser["id"]},
    )

    # Production batches: a file with late labels' row keys (a monitoring token), counts again with the
    # same content (200), the reads as a member and as the token, the late labels.
    batches = "/api/v1/deployments/{name}/-/batches/"
    rows = "id,score,gender,label\nr1,0.9,f,1\nr2,0.2,m,\nr3,0.7,f,\n"
    posted = call(
        "monitoring",
        "POST",
        batches,
        202,
        path_parameters=prod,
        body={"batch_id": "b-file", "file": rows.encode(), "score": "score", "threshold": 0.5, "row_key": "id"},
        media_type="multipart/form-data",
    )
    assert (posted["batch_id"], posted["state"]) == ("b-file", "received")
    [counted] = portal.names["batch_id"]
    again = call("pat", "GET", batches + "{batch_id}/", 200, path_parameters={**prod, "batch_id": counted})
    assert again["state"] == "counted"
    listed_batches = call("monitoring", "GET", batches, 200, path_parameters=prod)
    assert {b["batch_id"] for b in listed_batches["results"]} == {"b-file", counted}
    looks = call("pat", "GET", "/api/v1/deployments/{name}/-/looks/", 200, path_parameters=prod)
    assert [look["batch"] for look in looks["results"]] == [counted]
    labels = call(
        "monitoring",
        "POST",
        batches + "{batch_id}/labels/",
        202,
        path_parameters={**prod, "batch_id": "b-file"},
        body={"file": b"id,label\nr2,0\n", "row_key": "id", "label": "label"},
        media_type="multipart/form-data",
    )
    assert labels["state"] == "received"
    # Webhooks (administrators): the list never shows a secret; one registered (its secret shown once),
    # deactivated; the portal's endpoint's delivery log.
    [hook] = call("pat", "GET", "/api/v1/deployments/{name}/-/webhooks/", 200, path_parameters=prod)
    assert "secret" not in hook
    assert hook["recent_deliveries"][0]["status"] == "delivered"
    registered = call(
        "pat",
        "POST",
        "/api/v1/deployments/{name}/-/webhooks/",
        201,
        path_parameters=prod,
        body={"url": "https://hooks.example/portal", "description": "Pager"},
        media_type="application/json",
    )
    assert registered["secret"].startswith("whsec_")
    deactivated = call(
        "pat",
        "POST",
        "/api/v1/deployments/{name}/-/webhooks/{webhook_id}/deactivate/",
        200,
        path_parameters={**prod, "webhook_id": registered["id"]},
    )
    assert deactivated["active"] is False
    log = call(
        "pat",
        "GET",
        "/api/v1/deployments/{name}/-/webhooks/{webhook_id}/deliveries/",
        200,
        path_parameters={**prod, "webhook_id": hook["id"]},
    )
    assert [row["response_body_head"] for row in log["results"]] == ["<b>ok</b>"]
    # A monitoring report of the last day (a reviewer asks): certified, listed among the reports.
    until = timezone.now()
    monitoring_report = call(
        "carol",
        "POST",
        "/api/v1/deployments/{name}/-/reports/",
        201,
        path_parameters=prod,
        body={"from": (until - timedelta(days=1)).isoformat(), "to": until.isoformat()},
        media_type="application/json",
    )
    assert (monitoring_report["deployment"], monitoring_report["state"]) == (prod["name"], "signed")
    of_deployment = call("pat", "GET", "/api/v1/reports/", 200, query={"deployment": prod["name"]})
    assert [item["id"] for item in of_deployment["results"]] == [monitoring_report["id"]]

    operations = {(method, path) for path, item in SCHEMA.raw_schema["paths"].items() for method in item}
    assert operations - call.answered == set(), "operations this test never saw succeed"


def pat_audit(audit_id: int) -> PredictionAudit:
    return PredictionAudit.objects.get(pk=audit_id)


# ---------------------------------------------------------------------------------- the docs page


@pytest.mark.django_db
def test_the_schema_and_the_docs_page_need_an_account() -> None:
    assert Client().get("/api/v1/schema/").status_code in (401, 403)
    response = Client().get("/api/v1/docs/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


@pytest.mark.django_db
def test_the_docs_page_loads_swagger_ui_from_static_files_with_no_inline_script(oscar: User) -> None:
    client = client_for(oscar)
    page = client.get("/api/v1/docs/").content.decode()
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", page, flags=re.S)
    assert scripts, "the page loads Swagger UI"
    for attributes, body in scripts:
        assert body.strip() == "", "no inline script: the Content-Security-Policy allows none"
        source = re.search(r'src="([^"]+)"', attributes)
        assert source is not None, attributes
        assert source.group(1).startswith("/static/"), attributes
    assert not re.search(r"\son\w+=", page), "no inline event handlers"
    assert not re.search(r'(src|href)="(https?:)?//', page), "nothing from another host"
    for url in re.findall(r'(?:src|href)="/static/([^"]+)"', page):
        assert finders.find(url) is not None, url
    assert 'data-schema-url="/api/v1/schema/?format=json"' in page
    schema = client.get("/api/v1/schema/?format=json")
    assert schema.status_code == 200
    assert schema.json()["info"]["title"] == "Bias audit portal API"


@pytest.mark.django_db
def test_the_served_schema_is_the_generated_one_for_every_account_every_time(oscar: User) -> None:
    """The view keeps the schema it generated and its renderings (auditportal/api/views.py): what it
    serves, in YAML and in JSON, is what the code generates, the same for every account and every time;
    a version asked for (?version=) is still the one the schema names."""
    generated = json.loads(json.dumps(portal_schema()))
    rita = make_user("rita", [Role.REVIEWER])
    as_yaml = client_for(oscar).get("/api/v1/schema/")
    assert as_yaml["Content-Type"] == "application/vnd.oai.openapi; charset=utf-8"
    assert yaml.safe_load(as_yaml.content) == generated
    for user in (oscar, rita, oscar):
        client = client_for(user)
        assert client.get("/api/v1/schema/?format=json").json() == generated
        served = client.get("/api/v1/schema/")
        assert (served["Content-Type"], served.content) == (as_yaml["Content-Type"], as_yaml.content)
    versioned = client_for(rita).get("/api/v1/schema/?format=json&version=2").json()
    assert versioned["info"]["version"] == f"{generated['info']['version']} (2)"
    assert versioned["paths"] == generated["paths"]


@pytest.mark.django_db
def test_a_url_under_the_api_that_matches_no_route_is_a_json_404(oscar: User) -> None:
    response = client_for(oscar).get("/api/v1/experiments/not-a-number/")
    assert (response.status_code, response["Content-Type"], response.json()) == (
        404,
        "application/json",
        {"detail": "Not found."},
    )
    page = client_for(oscar).get("/experiments/not-a-number/")
    assert page.status_code == 404
    assert page["Content-Type"].startswith("text/html")
