#!/usr/bin/env python3
"""A model's whole review through the portal's API, for a CI job (docs/pipelines.md): audit a
predictions file, open and submit a review request on its verdict documents, wait for the committee's
decision, ask the gate, then wait for the signed report, download it and verify it. Standard library only.

    python3 review_pipeline.py PREDICTIONS_FILE MODEL_IDENTIFIER

Settings from the environment: PORTAL_URL, PORTAL_TOKEN (scope api, an ML engineer's or reviewer's
account), PORTAL_GATE_TOKEN (scope gate), PORTAL_INTENDED_USE; PORTAL_LABEL (label), PORTAL_PREDICTION
(prediction), PORTAL_ATTRIBUTES (gender; comma-separated), PORTAL_TITLE, PORTAL_POLL_SECONDS (30),
PORTAL_WAIT_SECONDS (86400, for each wait), PORTAL_REPORT_DIR (.). Exit 0: approved, the gate agrees and
the signed report is verified; 1: anything else, with the reason (a refusal prints the API's answer).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn


def fail(message: str) -> NoReturn:
    print(f"review_pipeline: {message}", file=sys.stderr)
    sys.exit(1)


def setting(name: str, default: str | None = None) -> str:
    value = os.environ.get(name, default)
    if not value:
        fail(f"set {name} (see docs/pipelines.md)")
    return value


if len(sys.argv) != 3:
    fail("usage: review_pipeline.py PREDICTIONS_FILE MODEL_IDENTIFIER")
PREDICTIONS, MODEL = Path(sys.argv[1]), sys.argv[2]
BASE = setting("PORTAL_URL").rstrip("/") + "/"
if not BASE.startswith(("https://", "http://")):
    fail(f"PORTAL_URL is the portal's address, https://..., not {BASE[:-1]!r}")
TOKEN, GATE_TOKEN = setting("PORTAL_TOKEN"), setting("PORTAL_GATE_TOKEN")
INTENDED_USE = setting("PORTAL_INTENDED_USE")
POLL, WAIT = float(setting("PORTAL_POLL_SECONDS", "30")), float(setting("PORTAL_WAIT_SECONDS", "86400"))


def call(method: str, path: str, *, body: bytes | None = None, content_type: str = "", token: str = TOKEN) -> Any:
    """The API's answer (parsed JSON, or the bytes and headers of a PDF); a refusal ends the script."""
    url = urllib.parse.urljoin(BASE, path)
    headers = {"Authorization": f"Token {token}", "Accept": "application/json, application/pdf"}
    if content_type:
        headers["Content-Type"] = content_type
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body, headers, method=method), timeout=120) as answer:
            data = answer.read()
            if answer.headers.get_content_type() == "application/pdf":
                return data, answer.headers
            return json.loads(data)
    except urllib.error.HTTPError as error:
        fail(f"{method} {url}: HTTP {error.code}\n{error.read().decode('utf-8', 'replace')}")
    except urllib.error.URLError as error:
        fail(f"{method} {url}: {error.reason}")


def upload(path: str, file: Path, fields: list[tuple[str, str]]) -> Any:
    """POST ``file`` as the form field ``file``, with ``fields``, as multipart/form-data."""
    boundary = uuid.uuid4().hex
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode() for k, v in fields]
    name = file.name.replace('"', "_")
    head = f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n\r\n'
    parts.append(head.encode() + file.read_bytes() + f"\r\n--{boundary}--\r\n".encode())
    return call("POST", path, body=b"".join(parts), content_type=f"multipart/form-data; boundary={boundary}")


def wait_for(what: str, check: Callable[[], Any]) -> Any:
    """Calls ``check`` every POLL seconds until it answers something other than None."""
    deadline = time.monotonic() + WAIT
    while (found := check()) is None:
        if time.monotonic() > deadline:
            fail(f"gave up waiting for {what} after {WAIT:g} s")
        time.sleep(POLL)
    return found


# 1. Audit the predictions file: 201 with the audit, or 202 when a worker audits it (poll its status_url).
fields = [("label", setting("PORTAL_LABEL", "label")), ("prediction", setting("PORTAL_PREDICTION", "prediction"))]
fields += [("attributes", name.strip()) for name in setting("PORTAL_ATTRIBUTES", "gender").split(",")]
audit = upload("/api/v1/audits/predictions/", PREDICTIONS, fields)
if "status_url" in audit:

    def audited() -> Any:
        status = call("GET", audit["status_url"])
        if status["status"] == "failed":
            fail(f"the audit of {PREDICTIONS} failed: {status['error']}")
        return status if status["status"] == "done" else None

    audit = call("GET", wait_for("the audit", audited)["audit_url"])
documents = [document["id"] for document in audit["documents"]]
print(f"audit {audit['id']}: verdict {audit['verdict']}, documents {documents}")

# 2. A review request on the audit's verdict documents, submitted to the committee.
request = call(
    "POST",
    "/api/v1/review-requests/",
    body=json.dumps(
        {
            "title": os.environ.get("PORTAL_TITLE") or f"{MODEL}: {PREDICTIONS.name}",
            "intended_use": INTENDED_USE,
            "documents": documents,
            "model_identifier": MODEL,
        }
    ).encode(),
    content_type="application/json",
)
request = call("POST", f"/api/v1/review-requests/{request['id']}/submit/")
print(f"review request {request['id']}: {request['state']} ({urllib.parse.urljoin(BASE, request['url'])})")


# 3. The committee's decision. Submitted and in review: still waiting; approved: go on. Rejected,
#    withdrawn, revoked and suspended are final for this request; draft means changes were requested.
def why(request: dict[str, Any]) -> str:
    if request["state"] == "rejected":
        votes = [v for v in request["votes"] if v["current"] and v["round"] == request["round"]]
        return "; ".join(f"{v['voter']}: {v['reason']}" for v in votes if v["choice"] == "reject")
    if request["state"] == "suspended":
        return str(request["suspension"]["reason"])
    if request["state"] == "revoked":
        return str(request["revoked_reason"])
    verb = "review_request.withdrawn" if request["state"] == "withdrawn" else "review_request.changes_requested"
    reasons = [event["data"].get("reason") for event in request["timeline"] if event["verb"] == verb]
    return (reasons[-1] if reasons else "") or "no reason given"


def decided() -> dict[str, Any] | None:
    current: dict[str, Any] = call("GET", f"/api/v1/review-requests/{request['id']}/")
    if current["state"] in ("submitted", "in_review"):
        return None
    if current["state"] != "approved":
        fail(f"review request {current['id']} is {current['state']}: {why(current)}")
    return current


request = wait_for("the committee's decision", decided)
print(f"decision: approved (review request {request['id']}, decided at {request['decided_at']})")

# 4. The gate, as a deployment job asks it (a gate token).
gate = call("GET", "/api/v1/gate/?" + urllib.parse.urlencode({"model": MODEL}), token=GATE_TOKEN)
if not gate["approved"]:
    fail(f"the gate refuses {MODEL}: {json.dumps(gate)}")
print(f"gate: approved (review request {gate['request']}, policy version {gate['policy_version']})")


# 5. The signed report: once every signatory signed it, download its PDF and verify it.
def signed() -> dict[str, Any] | None:
    refs = call("GET", f"/api/v1/review-requests/{request['id']}/")["reports"]
    ready = [ref for ref in refs if ref["decision"] == "approved" and ref["state"] == "signed"]
    return call("GET", ready[-1]["url"]) if ready else None


report = wait_for("the signed report", signed)
pdf, headers = call("GET", report["pdf_url"])
sha256 = hashlib.sha256(pdf).hexdigest()
if not sha256 == headers["X-Content-SHA256"] == report["sha256"] == report["revisions"][-1]["sha256"]:
    fail(f"report {report['id']}: the PDF's SHA-256 {sha256} is not the one the portal lists ({report['sha256']})")
path = Path(os.environ.get("PORTAL_REPORT_DIR") or ".") / f"report-{report['id']}-r{report['latest_revision']}.pdf"
path.write_bytes(pdf)
check = upload("/api/v1/reports/verify/", path, [])
match = check["report"] or {}
if not (check["ok"] and match.get("id") == report["id"] and match.get("revision") == report["latest_revision"]):
    fail(f"report {report['id']} does not verify: {json.dumps(check['problems'] or check)}")
print(f"report {report['id']} revision {report['latest_revision']} verified: sha256 {sha256}, saved as {path}")
