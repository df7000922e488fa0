"""Bad inputs for the security tests: the generated variants the sweep fires at every page, form and
API endpoint (tests/security/test_no_server_errors.py), and helpers that show that a refused request
changed nothing: the row count of every model and the files under the portal's writable directories."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.apps import apps
from django.conf import settings

DEEP = 5000  # far past Python's recursion limit for json.loads, and lib/jsonlimits' 32
HUGE = 10**30
LONG = 5000  # longer than any column's max_length

# Form and query string values, as text.
TEXT_VARIANTS: dict[str, str] = {
    "empty": "",
    "nul": "a\x00b",
    "long": "x" * LONG,
    "huge": str(HUGE),
    "negative": "-1",
    "unicode-digits": "١٢٣",  # Arabic-Indic digits: str.isdigit() is true, int() accepts them
    "superscript-digits": "²",  # isdigit() true, int() refuses
    "many-digits": "9" * 5000,  # isdigit() true, int() refuses more than 4,300 digits
    "float": "1e400",
    "nan": "NaN",
    "deep-json": "[" * DEEP + "]" * DEEP,
    "deep-object": '{"a":' * DEEP + "1" + "}" * DEEP,
    "html": "<script>x</script>",
    "lone-surrogate-escape": '"\\ud800"',
}

# API body values, as JSON values.
JSON_VARIANTS: dict[str, object] = {
    "null": None,
    "nul": "a\x00b",
    "long": "x" * LONG,
    "huge": HUGE,
    "negative": -1,
    "float": 1e308,
    "list": [1, 2],
    "object": {"a": 1},
    "deep": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["x"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
    "unicode-digits": "١٢٣",
    "bool": True,
}

# Query strings for list endpoints and pages: pagination, ordering and filters gone wrong.
QUERY_PARAMETERS = (
    "page",
    "page_size",
    "ordering",
    "o",
    "q",
    "search",
    "status",
    "state",
    "model",
    "verdict",
    # ids in query strings: the review request form's subject, the launch form's dataset, a trial
    "audit",
    "trial",
    "document",
    "dataset_version",
    # the documents' list filters (besides audit and trial)
    "experiment",
    "sha256",
    "policy_version",
    "kind",
)


def row_counts() -> dict[str, int]:
    """How many rows every model's table holds."""
    return {model._meta.label: model._default_manager.count() for model in apps.get_models()}


def written_files() -> dict[str, int]:
    """Every file under the directories the portal writes to (the var directory, uploads, datasets,
    shards, experiment runs), with its size."""
    roots = {
        Path(settings.VAR_DIR),
        Path(settings.DATASET_STORAGE_DIR),
        Path(settings.SHARD_DIR),
        Path(settings.REPORT_STORAGE_DIR),
        Path(settings.EXPERIMENT_RUN_DIR),
    }
    if settings.FILE_UPLOAD_TEMP_DIR:
        roots.add(Path(settings.FILE_UPLOAD_TEMP_DIR))
    found: dict[str, int] = {}
    for root in roots:
        if root.is_dir():
            for path in root.rglob("*"):
                if path.is_file() and not path.name.startswith("test-db.sqlite3"):
                    found[str(path)] = path.stat().st_size
    return found


# -- the corpus: bad inputs with the answer each must get ------------------------------------------


@dataclass(frozen=True)
class BadInput:
    """One bad request. ``path`` may name {version_id}, {audit_id}, {request_id}, {experiment_id} (of a
    populated portal); ``form`` is sent as a browser form (files as (name, bytes)), ``json`` as a JSON
    body, ``body`` as raw bytes with ``content_type``. The answer must have ``status`` and contain
    ``message`` (HTML entities decoded)."""

    id: str
    path: str
    status: int
    message: str
    form: dict[str, Any] | None = None
    json: Any = None
    body: bytes | None = None
    content_type: str = "application/json"


def _launch(**changes: Any) -> dict[str, Any]:
    return {"dataset_version": "{version_id}", "template": "single", "batches": "20", **changes}


def _audit(**changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "file": ("predictions.csv", PREDICTIONS),
        "label": "label",
        "positive": "1",
        "prediction": "prediction",
        "attributes": "gender",
    }
    fields.update(changes)
    return fields


def _policy(**changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "tolerance": "0.1",
        "alpha": "0.05",
        "metrics": ["tpr_diff"],
        "approval_quorum": "2",
        "reason": "tighter",
    }
    fields.update(changes)
    return fields


PREDICTIONS = b"label,prediction,gender\n" + b"1,1,F\n0,0,M\n1,0,F\n0,1,M\n" * 10
LOG_OVERFLOW = {"learning_rate": {"type": "log", "base": 10, "minval": -4, "maxval": 400}}
DEEP_JSON = "[" * DEEP + "]" * DEEP
NESTED_33 = "[" * 33 + "]" * 33

CORPUS: list[BadInput] = [
    # Hyperparameters (web form and API).
    BadInput(
        "launch-form log range overflows",
        "/experiments/new/",
        400,
        "10**400 is out of range",
        form=_launch(template="random", hparams=json.dumps(LOG_OVERFLOW)),
    ),
    BadInput(
        "launch-form deep hyperparameters",
        "/experiments/new/",
        400,
        "hparams: JSON nested more than 32 levels",
        form=_launch(hparams=DEEP_JSON),
    ),
    BadInput(
        "launch-form 33 levels",
        "/experiments/new/",
        400,
        "nested more than 32 levels",
        form=_launch(hparams='{"a": ' + NESTED_33 + "}"),
    ),
    BadInput(
        "launch-form hyperparameters NaN",
        "/experiments/new/",
        400,
        "NaN is not a JSON number",
        form=_launch(hparams='{"dropout": NaN}'),
    ),
    BadInput(
        "launch-form hyperparameters not an object",
        "/experiments/new/",
        400,
        "must be a JSON object",
        form=_launch(hparams="[1, 2]"),
    ),
    BadInput("launch-form unknown hyperparameter", "/experiments/new/", 400, "lr", form=_launch(hparams='{"lr": 0.1}')),
    BadInput("launch-form huge batches", "/experiments/new/", 400, "batches", form=_launch(batches=str(HUGE))),
    BadInput(
        "launch-form unicode-digit slots",
        "/experiments/new/",
        400,
        "Processes per trial",
        form=_launch(slots_per_trial="²"),
    ),
    BadInput(
        "launch-form more trials at once than trials",
        "/experiments/new/",
        400,
        "max_concurrent_trials must be between 0",
        form=_launch(template="random", max_trials="4", max_concurrent_trials="5"),
    ),
    BadInput(
        "launch-api negative max_concurrent_trials",
        "/api/v1/experiments/",
        400,
        "max_concurrent_trials",
        json={"dataset_version": "{version_id}", "template": "random", "max_concurrent_trials": -1},
    ),
    BadInput(
        "launch-form huge dataset version",
        "/experiments/new/",
        400,
        "Select a valid choice",
        form=_launch(dataset_version=str(HUGE)),
    ),
    BadInput(
        "launch-api log range overflows",
        "/api/v1/experiments/",
        400,
        "10**400 is out of range",
        json={"dataset_version": "{version_id}", "template": "random", "hparams": LOG_OVERFLOW},
    ),
    BadInput(
        "launch-api deep body",
        "/api/v1/experiments/",
        400,
        "body: JSON nested more than 32 levels",
        body=DEEP_JSON.encode(),
    ),
    BadInput(
        "launch-api deep object body",
        "/api/v1/experiments/",
        400,
        "nested more than 32 levels",
        body=('{"a":' * DEEP + "1" + "}" * DEEP).encode(),
    ),
    BadInput(
        "launch-api not UTF-8", "/api/v1/experiments/", 400, "body: not UTF-8", body=b'{"template": "single\xff"}'
    ),
    BadInput(
        "launch-api NaN",
        "/api/v1/experiments/",
        400,
        "NaN is not a JSON number",
        body=b'{"dataset_version": NaN, "template": "single"}',
    ),
    BadInput("launch-api truncated", "/api/v1/experiments/", 400, "body: not valid JSON", body=b'{"template": "sin'),
    BadInput(
        "launch-api wrong content type",
        "/api/v1/experiments/",
        415,
        "Unsupported media type",
        body=b"<template>single</template>",
        content_type="application/xml",
    ),
    BadInput(
        "launch-api huge batches",
        "/api/v1/experiments/",
        400,
        "batches",
        json={"dataset_version": "{version_id}", "template": "single", "batches": HUGE},
    ),
    BadInput(
        "launch-api huge dataset version",
        "/api/v1/experiments/",
        404,
        "Not found",
        json={"dataset_version": HUGE, "template": "single"},
    ),
    BadInput(
        "launch-api hyperparameters a list",
        "/api/v1/experiments/",
        400,
        "hparams",
        json={"dataset_version": "{version_id}", "template": "single", "hparams": [1]},
    ),
    # Files (web and API).
    BadInput("upload-form no file", "/datasets/new/", 400, "This field is required", form={"name": "loans"}),
    BadInput(
        "upload-form binary file",
        "/datasets/new/",
        400,
        "loans.csv",
        form={"name": "loans", "file": ("loans.csv", bytes(range(256)) * 16)},
    ),
    BadInput(
        "upload-form NUL in name",
        "/datasets/new/",
        400,
        "Null characters are not allowed",
        form={"name": "lo\x00ans", "file": ("loans.csv", PREDICTIONS)},
    ),
    BadInput(
        "upload-form over-long name",
        "/datasets/new/",
        400,
        "at most 120 characters",
        form={"name": "x" * 300, "file": ("loans.csv", PREDICTIONS)},
    ),
    BadInput(
        "audit-form label column missing", "/audits/predictions/new/", 400, "outcome", form=_audit(label="outcome")
    ),
    BadInput(
        "audit-form not UTF-8",
        "/audits/predictions/new/",
        400,
        "UTF-8",
        form=_audit(file=("predictions.csv", b"label,prediction,gender\n1,1,F\xe9\n")),
    ),
    BadInput(
        "audit-form empty file",
        "/audits/predictions/new/",
        400,
        "predictions.csv",
        form=_audit(file=("predictions.csv", b"")),
    ),
    BadInput(
        "audit-form NUL in a field",
        "/audits/predictions/new/",
        400,
        "Null characters are not allowed",
        form=_audit(label="la\x00bel"),
    ),
    BadInput(
        "audit-api binary file",
        "/api/v1/audits/predictions/",
        400,
        "predictions.csv",
        body=None,
        form=_audit(file=("predictions.csv", bytes(range(256)) * 16)),
    ),
    BadInput(
        "audit-api no file",
        "/api/v1/audits/predictions/",
        400,
        "No file was submitted",
        form={"label": "label", "attributes": "gender"},
    ),
    BadInput(
        "audit-api JSON body", "/api/v1/audits/predictions/", 415, "Unsupported media type", json={"label": "label"}
    ),
    BadInput(
        "verify-form not a PDF",
        "/reports/verify/",
        200,  # a verification's answer, not a refusal: the page says why the file is no valid report
        "not a readable PDF",
        form={"file": ("report.pdf", b"%PDF-1.7\n\x00\xff garbage")},
    ),
    BadInput(
        "verify-api not a PDF",
        "/api/v1/reports/verify/",
        200,
        '"ok":false',
        form={"file": ("report.pdf", b"not a pdf at all")},
    ),
    # Policy (the minimum group size is an integer column).
    BadInput(
        "policy-form huge min group size", "/policy/", 400, "min_group_size", form=_policy(min_group_size=str(HUGE))
    ),
    BadInput(
        "policy-form unicode digits quorum", "/policy/", 400, "Approval quorum", form=_policy(approval_quorum="²")
    ),
    BadInput(
        "policy-api huge min group size",
        "/api/v1/policy/",
        400,
        "min_group_size",
        json={"min_group_size": HUGE, "reason": "bigger groups"},
    ),
    BadInput(
        "policy-api infinite tolerance",
        "/api/v1/policy/",
        400,
        "body: not valid JSON",
        body=b'{"tolerance": Infinity, "reason": "x"}',
    ),
    # Review requests: text longer than its column, NUL bytes.
    BadInput(
        "review-api over-long title",
        "/api/v1/review-requests/",
        400,
        "The title is longer than 200 characters (201)",
        json={"title": "x" * 201, "intended_use": "u", "documents": ["{document_id}"], "model_identifier": "m:1"},
    ),
    BadInput(
        "review-api over-long model",
        "/api/v1/review-requests/",
        400,
        "longer than 255 characters",
        json={"title": "t", "intended_use": "u", "documents": ["{document_id}"], "model_identifier": "m" * 256},
    ),
    BadInput(
        "review-api NUL in title",
        "/api/v1/review-requests/",
        400,
        "Null characters are not allowed",
        json={"title": "a\x00b", "intended_use": "u", "documents": ["{document_id}"], "model_identifier": "m:1"},
    ),
    BadInput(
        "review-api huge document id",
        "/api/v1/review-requests/",
        404,
        "Not found",
        json={"title": "t", "intended_use": "u", "documents": [HUGE]},
    ),
    BadInput(
        "review-api deep body", "/api/v1/review-requests/", 400, "nested more than 32 levels", body=DEEP_JSON.encode()
    ),
    BadInput(
        "comment-api NUL body",
        "/api/v1/review-requests/{request_id}/comments/",
        400,
        "Null characters are not allowed",
        json={"body": "a\x00b"},
    ),
    # Deployments: a name that is no safe slug, text PostgreSQL refuses, a first model that is not approved
    # (no deployment is left half made), a name no deployment has.
    BadInput(
        "deployment-api name with spaces and capitals",
        "/api/v1/deployments/",
        400,
        "A deployment's name is 1 to 100 characters",
        json={"name": "Credit Prod"},
    ),
    BadInput(
        "deployment-api over-long name",
        "/api/v1/deployments/",
        400,
        "this one is 101 characters long",
        json={"name": "x" * 101},
    ),
    BadInput(
        "deployment-api NUL in description",
        "/api/v1/deployments/",
        400,
        "Null characters are not allowed",
        json={"name": "credit/prod", "description": "a\x00b"},
    ),
    BadInput(
        "deployment-api first model not approved",
        "/api/v1/deployments/",
        400,
        "'vendor-score:2.1' cannot be promoted: it is not approved: its review request #",
        json={"name": "credit/prod", "model": "vendor-score:2.1"},
    ),
    BadInput(
        "promote-api unknown deployment",
        "/api/v1/deployments/no/such/-/promote/",
        404,
        "No deployment is named 'no/such'.",
        json={"model": "vendor-score:2.1"},
    ),
    BadInput(
        "monitor-policy-api unknown deployment",
        "/api/v1/deployments/no/such/-/policy/",
        404,
        "No deployment is named 'no/such'.",
        json={"spec": {"alpha": 0.1}, "reason": "x"},
    ),
    # Webhooks: a URL that is no http(s) URL with a host (named `url`), an unknown deployment.
    BadInput(
        "webhook-api javascript url",
        "/api/v1/deployments/corpus/prod/-/webhooks/",
        400,
        "A webhook URL must start with https:// or http://, not javascript:.",
        json={"url": "javascript:alert(1)"},
    ),
    BadInput(
        "webhook-api url with a password",
        "/api/v1/deployments/corpus/prod/-/webhooks/",
        400,
        "A webhook URL cannot carry a user or password",
        json={"url": "https://user:pw@hooks.example/"},
    ),
    BadInput(
        "webhook-api NUL in url",
        "/api/v1/deployments/corpus/prod/-/webhooks/",
        400,
        "Null characters are not allowed",
        json={"url": "https://hooks.example/\x00"},
    ),
    BadInput(
        "webhook-api unknown deployment",
        "/api/v1/deployments/no/such/-/webhooks/",
        404,
        "No deployment is named 'no/such'.",
        json={"url": "https://hooks.example/"},
    ),
]
