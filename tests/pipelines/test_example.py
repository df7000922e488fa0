"""docs/pipelines.md's example, run as a CI job runs it: docs/examples/review_pipeline.py and
review_pipeline.sh in subprocesses against a live server, with a machine account's API token and a gate
token, while the test plays the ethics committee through the API (logged-in sessions, the password with
every vote and signature) and a real Celery worker builds the report."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from auditportal.accounts import services as account_services
from auditportal.accounts.models import Role, TokenScope
from auditportal.approvals.models import ReviewRequest
from auditportal.policies.selectors import policy_active
from tests.audits.conftest import PREDICTIONS_CSV
from tests.browser.conftest import require_system_tool
from tests.factories import PASSWORD, make_user
from tests.worker import start_worker_fixture  # noqa: F401 (the start_worker fixture)

pytestmark = [pytest.mark.slow, pytest.mark.uses_database, pytest.mark.django_db(transaction=True)]

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
# Generous: the worker starts, renders and certifies each report; every member signs each.
TIMEOUT_SECONDS = 150
INTENDED_USE = "Ranking loan applications for a loan officer's review"
REJECTION = "The intended use needs evidence on applicants over 60; none was audited."


def script(kind: str) -> list[str]:
    if kind == "python":
        return [sys.executable, str(EXAMPLES / "review_pipeline.py")]
    if not (shutil.which("curl") and shutil.which("jq")):
        require_system_tool("the shell example needs curl and jq (apt-get install curl jq)")
    return ["bash", str(EXAMPLES / "review_pipeline.sh")]


class Member:
    """A committee member in their own logged-in session, as a browser holds one: the login form, then
    the API with the session cookie and the CSRF token."""

    def __init__(self, base: str, username: str) -> None:
        self.base, self.username = base, username
        self.session = requests.Session()
        self.session.get(f"{base}/login/", timeout=30).raise_for_status()
        answer = self.session.post(
            f"{base}/login/",
            data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": self.session.cookies["csrftoken"]},
            allow_redirects=False,
            timeout=30,
        )
        assert answer.status_code == 302, answer.text

    def get(self, path: str) -> Any:
        answer = self.session.get(f"{self.base}{path}", timeout=30)
        assert answer.status_code == 200, f"GET {path}: {answer.status_code} {answer.text}"
        return answer.json()

    def post(self, path: str, body: dict[str, Any]) -> Any:
        headers = {"X-CSRFToken": self.session.cookies["csrftoken"]}
        answer = self.session.post(f"{self.base}{path}", json=body, headers=headers, timeout=120)
        assert answer.status_code in (200, 201), f"{self.username} POST {path}: {answer.status_code} {answer.text}"
        return answer.json()


@dataclass
class Run:
    """One example script run as a CI job: its process, and its output once it ended."""

    kind: str
    model: str
    process: subprocess.Popen[bytes]
    log: Path
    reports: Path

    @property
    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@dataclass
class Portal:
    base: str
    token: str
    gate_token: str
    committee: list[str]
    tmp_path: Path

    def start(self, kind: str, model: str, predictions: str, *, token: str | None = None) -> Run:
        folder = self.tmp_path / kind
        folder.mkdir()
        data = folder / "predictions.csv"
        data.write_text(predictions, encoding="utf-8")
        env = {
            "PATH": os.environ["PATH"],
            "PORTAL_URL": self.base,
            "PORTAL_TOKEN": token or self.token,
            "PORTAL_GATE_TOKEN": self.gate_token,
            "PORTAL_INTENDED_USE": INTENDED_USE,
            "PORTAL_PREDICTION": "pred",
            "PORTAL_ATTRIBUTES": "gender",
            "PORTAL_POLL_SECONDS": "0.2",
            "PORTAL_WAIT_SECONDS": str(TIMEOUT_SECONDS),
            "PORTAL_REPORT_DIR": str(folder),
        }
        log = folder / "output.txt"
        with log.open("wb") as out:
            process = subprocess.Popen([*script(kind), str(data), model], env=env, stdout=out, stderr=subprocess.STDOUT)
        return Run(kind, model, process, log, folder)


@pytest.fixture
def portal(live_server: Any, tmp_path: Path) -> Portal:
    erin = make_user("erin", [Role.ADMIN])
    quorum = policy_active().approval_quorum
    committee = [make_user(f"member{n}", [Role.ETHICS_COMMITTEE]).username for n in range(1, quorum + 1)]
    api = account_services.api_token_create(
        user=erin, account="ci-bot", name="review pipeline", days=1, scope=TokenScope.API
    )
    account_services.role_grant_propose(user=api.token.user, role=Role.ML_ENGINEER, by=erin)
    gate = account_services.api_token_create(user=erin, account="ci-gate", name="review pipeline gate", days=1)
    return Portal(live_server.url, api.secret, gate.secret, committee, tmp_path)


def play_the_committee(portal: Portal, runs: list[Run], *, choice: str, reason: str) -> None:
    """Until every run ended: start the review of each submitted request, every member casts their
    signed vote on it, and every signatory signs each report awaiting their signature."""
    members = [Member(portal.base, username) for username in portal.committee]
    voted: set[tuple[int, str]] = set()
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while any(run.process.poll() is None for run in runs):
        assert time.monotonic() < deadline, "\n".join(f"{run.kind}:\n{run.output}" for run in runs)
        for request in members[0].get("/api/v1/review-requests/?state=submitted")["results"]:
            members[0].post(f"/api/v1/review-requests/{request['id']}/start-review/", {})
        for request in members[0].get("/api/v1/review-requests/?state=in_review")["results"]:
            path = f"/api/v1/review-requests/{request['id']}/"
            for member in members:
                if (request["id"], member.username) in voted:
                    continue
                seen = member.get(path)["document_sha256"]
                vote = {"choice": choice, "reason": reason, "password": PASSWORD, "document_sha256": seen}
                member.post(f"{path}votes/", {**vote, "acknowledge_all": choice == "approve"})
                voted.add((request["id"], member.username))
        for report in members[0].get("/api/v1/reports/?state=awaiting_signatures")["results"]:
            detail = members[0].get(report["url"])
            for member in members:
                if any(s["username"] == member.username and not s["signed"] for s in detail["signatories"]):
                    member.post(f"/api/v1/reports/{report['id']}/sign/", {"password": PASSWORD})
        time.sleep(0.2)


def test_both_examples_take_a_model_from_its_predictions_to_a_verified_signed_report(
    portal: Portal, start_worker: Callable[..., subprocess.Popen[bytes]]
) -> None:
    start_worker()
    # Two files, two models: each script runs the whole review, side by side on one worker.
    runs = [
        portal.start("python", "credit-scoring:7", PREDICTIONS_CSV),
        portal.start("shell", "credit-scoring:8", PREDICTIONS_CSV + "0,0,0.15,m,old\n"),
    ]
    play_the_committee(portal, runs, choice="approve", reason="Fit for pre-screening with a loan officer's review.")

    member = Member(portal.base, portal.committee[0])
    for run in runs:
        assert run.process.returncode == 0, f"{run.kind}:\n{run.output}"
        request = ReviewRequest.objects.get(model_identifier=run.model)
        lines = run.output.splitlines()
        assert f"decision: approved (review request {request.pk}, " in run.output
        gate = member.get(f"/api/v1/gate/?model={run.model}")
        assert gate["approved"] is True
        assert f"gate: approved (review request {request.pk}, policy version {gate['policy_version']})" in lines
        (ref,) = member.get(f"/api/v1/review-requests/{request.pk}/")["reports"]
        report = member.get(ref["url"])
        assert report["state"] == "signed"
        assert {s["username"] for s in report["signatories"] if s["signed"]} == set(portal.committee)
        latest = report["revisions"][-1]
        pdf = run.reports / f"report-{report['id']}-r{latest['number']}.pdf"
        assert hashlib.sha256(pdf.read_bytes()).hexdigest() == latest["sha256"]
        assert f"report {report['id']} revision {latest['number']} verified: sha256 {latest['sha256']}, " in run.output


def test_a_rejected_request_stops_both_examples_with_the_committees_reason(portal: Portal) -> None:
    runs = [
        portal.start("python", "credit-scoring:9", PREDICTIONS_CSV),
        portal.start("shell", "credit-scoring:10", PREDICTIONS_CSV + "0,0,0.15,m,old\n"),
    ]
    play_the_committee(portal, runs, choice="reject", reason=REJECTION)

    for run in runs:
        request = ReviewRequest.objects.get(model_identifier=run.model)
        assert request.state == "rejected"
        assert run.process.returncode == 1, f"{run.kind}:\n{run.output}"
        reasons = "; ".join(f"{username}: {REJECTION}" for username in portal.committee)
        assert f"review_pipeline: review request {request.pk} is rejected: {reasons}" in run.output
        assert "gate:" not in run.output


def test_a_refused_token_stops_both_examples_with_the_apis_answer(portal: Portal) -> None:
    runs = [
        portal.start(kind, f"credit-scoring:{kind}", PREDICTIONS_CSV, token=portal.gate_token)
        for kind in ("python", "shell")
    ]
    for run in runs:
        run.process.wait(timeout=60)
        assert run.process.returncode == 1, f"{run.kind}:\n{run.output}"
        assert f"review_pipeline: POST {portal.base}/api/v1/audits/predictions/: HTTP 401" in run.output
        assert "This token's scope is 'gate' (" in run.output
    assert not ReviewRequest.objects.exists()
