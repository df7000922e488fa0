"""Schemathesis fuzzes every operation of the API's OpenAPI schema (tests/api/schemas.py) in-process
through the WSGI application, against a populated portal: as a logged-in member holding every role
(session cookie and CSRF token) and, for the gate, with a gate token. Every response must be no server
error, have a documented status code and content type, and match its documented (closed) schema.

Bounded: API_FUZZ_EXAMPLES examples per operation (default 20), positive and negative, the same
examples on every run (derandomized); API_FUZZ_SEED=N draws other ones, for a longer search by hand.
Before them, the schema's examples and the coverage cases Schemathesis derives from the schema (each
field's edge and wrong values: from a few to about 3,000 for POST /api/v1/experiments/).
Hypothesis' deadline is off: a slow call is not a failure here (bench/api_load.py measures speed)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from pytest_django import DjangoDbBlocker
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from auditportal.approvals.services import REPORT_GENERATE_TASK
from auditportal.fairness.documents.report_context import ReportContext
from auditportal.outbox.models import OutboxMessage
from auditportal.reports import signing
from auditportal.reports.services import report_generate
from tests.api.conftest import Portal, session_of
from tests.api.schemas import strict_schema
from tests.keys import KeyPool

EXAMPLES = int(os.environ.get("API_FUZZ_EXAMPLES", "20"))
SEED = os.environ.get("API_FUZZ_SEED")
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]

SCHEMA = strict_schema()
# Path parameters and the gate's model as generated, or (as often) ones that exist, so that the
# fuzzer reaches the objects and not only their 404s. Filled by the `known` fixture.
KNOWN: dict[str, list[Any]] = {}


@SCHEMA.hook
def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any]) -> Any:
    existing = {name: st.sampled_from(KNOWN[name]) for name in path_parameters or {} if KNOWN.get(name)}
    if not existing:
        return st.just(path_parameters)
    return st.one_of(st.just(path_parameters), st.fixed_dictionaries({**path_parameters, **existing}))


@SCHEMA.hook
def flatmap_query(context: Any, query: dict[str, Any] | None) -> Any:
    if query is None or "model" not in query or not KNOWN.get("model"):
        return st.just(query)
    return st.one_of(st.just(query), st.sampled_from(KNOWN["model"]).map(lambda model: {**query, "model": model}))


@pytest.fixture(scope="module")
def module_report(module_portal: Portal, django_db_blocker: DjangoDbBlocker, key_pool: KeyPool) -> int:
    """The approved request's report, rendered once for the module as the worker would (without
    figures), so that the fuzzer reaches a report's reads; the portal's member is not its signatory, and
    no generated password is theirs: signing it is refused (400)."""
    decided = module_portal.ids["request_id"][0]
    with django_db_blocker.unblock(), pytest.MonkeyPatch.context() as patch:
        patch.setattr(signing, "KEY_SIZE", 2048)
        patch.setattr(signing, "new_private_key", key_pool.make)  # its own keys, as report_world's
        [message] = [m for m in OutboxMessage.objects.filter(name=REPORT_GENERATE_TASK) if m.args[2] == decided]
        report = report_generate(context=ReportContext.from_json(message.args[0]), review_request_id=decided)
    module_portal.ids["report_id"] = [report.pk]
    return report.pk


@pytest.fixture
def portal(module_portal: Portal, module_report: int, db: None) -> Portal:
    """The portal, built once for the module (each operation's examples run in a transaction of their own)."""
    return module_portal


@pytest.fixture
def credentials(portal: Portal) -> Iterator[dict[str, dict[str, Any]]]:
    """Per operation path, the cookies and headers to send; the WSGI application called in-process."""
    KNOWN.clear()
    KNOWN.update(portal.ids, **portal.names, model=[portal.model])
    cookies = session_of(portal.member)
    # Django closes the database connection at the end of each request, which would end the test's
    # transaction: its test client disconnects the same handlers around each request.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield {
        "/api/v1/gate/": {"headers": {"Authorization": f"Token {portal.token}"}},
        # A serving pipeline's posts (its reads too): only a monitoring token is accepted there.
        **{
            path: {"headers": {"Authorization": f"Token {portal.monitoring_token}"}}
            for path in (
                "/api/v1/deployments/{name}/-/batches/",
                "/api/v1/deployments/{name}/-/batches/{batch_id}/labels/",
            )
        },
        "": {"cookies": cookies, "headers": {"X-CSRFToken": cookies["csrftoken"]}},
    }
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)
    KNOWN.clear()


@pytest.mark.slow
@pytest.mark.django_db
# On one xdist worker: the portal and its report (module_portal, module_report: about 15 s of CPU) are
# built once for the 70 operations, not once by each worker that is dealt some.
@pytest.mark.xdist_group("api-fuzz")
@SCHEMA.parametrize()
@seed(int(SEED or 0))
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=SEED is None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_answers_as_its_schema_says(case: Any, credentials: dict[str, dict[str, Any]]) -> None:
    case.call_and_validate(checks=CHECKS, **credentials.get(case.operation.path, credentials[""]))
