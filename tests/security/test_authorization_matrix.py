"""The authorization matrix (issue 18): every route of the URLconf, found by walking it, asked by
every user class (tests/security/world.py) with GET, and with POST where the route changes state;
the answer must be the one tests/security/matrix.py's table gives, never a 500, and no 200 may show
what its reader must not see (matrix.py's docstring). A route the table does not name fails, named."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.contenttypes.models import ContentType
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.http import HttpResponse
from django.test import Client, override_settings
from pytest_django import DjangoDbBlocker

from auditportal.lib import middleware
from auditportal.reports import signing
from tests.datasets.conftest import SMALL_CSV
from tests.factories import PASSWORD
from tests.security import matrix
from tests.security.routes import EXCLUDED, Route, all_routes, fill, url_routes
from tests.security.world import DEPLOYED, MODEL, NAMES, USER_CLASSES, World, build_world

# The database is set up for a module whose tests are marked; the world fixture (module scope) makes
# the objects once, and each test's own transaction nests inside its.
pytestmark = pytest.mark.django_db

ROUTES = all_routes()
_BY_KEY = {route.key: route for route in ROUTES}
_REASON = "checked by the authorization matrix"
# Routes open to anyone (the table says why).
PUBLIC = {"login", "reports:authorities", "reports:authority-pem"}
# Pages whose credential is the link itself (a password link mailed to its owner): without a valid
# link they answer 404 to everyone, a token's bearer included.
BY_LINK = {"accounts:password-set"}

# Minimal bodies (the table's body column): (world, for the API) -> the fields.
BODIES: dict[str, Callable[[World, bool], dict[str, Any]]] = {
    "reason": lambda w, api: {"reason": _REASON},
    "steward": lambda w, api: {"username": w.users["steward2"].username, "action": "add"},
    # The review request page's forms carry their action's prefix; the API's bodies do not.
    "changes": lambda w, api: _prefixed("" if api else "request_changes-", {"reason": _REASON}),
    "withdraw": lambda w, api: _prefixed("" if api else "withdraw-", {"reason": _REASON}),
    "revoke": lambda w, api: _prefixed("" if api else "revoke-", {"reason": _REASON}),
    "resume": lambda w, api: _prefixed("" if api else "resume-", {"reason": _REASON}),
    "recommend": lambda w, api: _prefixed("" if api else "recommend-", {"choice": "reject", "reason": _REASON}),
    "comment": lambda w, api: {"body": _REASON},
    "vote": lambda w, api: {
        "choice": "reject",
        "reason": _REASON,
        "password": PASSWORD,
        "document_sha256": [w.document.sha256],
    },
    "waiver": lambda w, api: _prefixed(
        "" if api else "waiver-",
        {
            "finding_keys": [w.fail_key],
            "reason": _REASON,
            "compensating_measures": "manual review",
            "expires_on": (date.today() + timedelta(days=10)).isoformat(),
        },
    ),
    "wvote": lambda w, api: _prefixed(
        "" if api else f"waiver-{w.waiver.pk}-",
        {"choice": "reject", "reason": _REASON, "password": PASSWORD, "document_sha256": [w.document.sha256]},
    ),
    "step": lambda w, api: {"step": 4},
    "role": lambda w, api: {"role": "reviewer"},
    "active": lambda w, api: {"active": "no"},
    "email": lambda w, api: {"email": "elsewhere@example.org"},
    "password": lambda w, api: {"password": PASSWORD},
    "experiment": lambda w, api: {"dataset_version": w.version.pk, "template": "single", "batches": 10},
    "request": lambda w, api: {"title": _REASON, "intended_use": _REASON, "documents": [w.other_document.pk]},
    "deployment": lambda w, api: {"name": "matrix-fraud/prod"},
    "model": lambda w, api: {"model": MODEL},
    "spec": lambda w, api: {"spec": {"alpha": 0.1}, "reason": _REASON},
    "url": lambda w, api: {"url": "https://hooks.example/matrix"},
}


def _prefixed(prefix: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {prefix + name: value for name, value in fields.items()}


@pytest.fixture(scope="module")
def world(
    django_db_setup: None, django_db_blocker: DjangoDbBlocker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    """Built once for the module, in a transaction rolled back at its end; every request below runs
    in a savepoint rolled back after it, so that a POST that succeeds changes nothing for the next."""
    base = tmp_path_factory.mktemp("matrix")
    (base / "scratch").mkdir()
    (base / "uploads").mkdir()
    with (
        django_db_blocker.unblock(),
        pytest.MonkeyPatch.context() as patch,
        override_settings(
            DATASET_STORAGE_DIR=base / "store",
            SHARD_DIR=base / "shards",
            EXPERIMENT_RUN_DIR=base / "runs",
            REPORT_STORAGE_DIR=base / "reports",
            FILE_UPLOAD_TEMP_DIR=str(base / "uploads"),
        ),
    ):
        patch.setattr(signing, "KEY_SIZE", 2048)  # as the report tests do: same code path
        outer = transaction.atomic()
        outer._from_testcase = True  # type: ignore[attr-defined]  # as Django's TestCase marks its own
        outer.__enter__()
        try:
            yield build_world(base / "runs", base / "scratch")
        finally:
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


@pytest.fixture(scope="module")
def clients(world: World) -> Iterator[dict[str, Client]]:
    """A client per user class, logged in. The savepoint around each request undoes what it wrote, the
    session's idle renewal (lib/middleware.SessionIdleMiddleware) too: every request found the renewal
    due again and wrote the session again (an UPDATE per request, which a browser's session makes once a
    minute). Each session is marked as just seen in the world's transaction, and the renewal falls due
    no sooner than an hour later for this module's requests."""
    logged_in = {"anon": Client()}
    for user_class, user in world.users.items():
        client = logged_in[user_class] = Client()
        client.force_login(user)
        session = client.session
        session[middleware.SEEN_KEY] = int(time.time())
        session.save()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(middleware, "RENEW_EVERY_SECONDS", 3600)
        yield logged_in


def _values(world: World, route: Route) -> dict[str, object]:
    """The URL's keyword arguments: the world's objects, an admin route's row of its own model."""
    values = dict(world.kwargs)
    model = route.admin_model
    if model is not None:
        row = model._default_manager.order_by("pk").first()
        assert row is not None, f"the world has no {model._meta.label} for {route.key}"
        values["object_id"] = row.pk
    values.update(
        app_label="accounts",  # the admin's page of one app
        uidb64="MQ",  # a password link that is not one
        token="no-such-token",
        content_type_id=ContentType.objects.get_for_model(type(world.report)).pk,
        url="no-such-page/",  # the admin's catch-all
    )
    values.setdefault("object_id", world.report.pk)
    return values


def _request(client: Client, method: str, url: str, body: dict[str, Any], api: bool) -> HttpResponse:
    saved = client.cookies
    # A POST to a logout must not end the session for the next: the request gets a copy of each cookie
    # (a morsel holds text only, so a shallow copy of each is a full copy, at a fifth of the cost of deepcopy).
    client.cookies = SimpleCookie({name: morsel.copy() for name, morsel in saved.items()})
    savepoint = transaction.atomic()
    savepoint._from_testcase = True  # type: ignore[attr-defined]  # see the world fixture
    try:
        with savepoint:
            if method == "GET":
                response = client.get(url)
            elif api:
                response = client.post(url, data=body, content_type="application/json")
            else:
                # As a browser posts a form without files (a multipart body is refused before login).
                response = client.post(
                    url, data=urlencode(body, doseq=True), content_type="application/x-www-form-urlencoded"
                )
            transaction.set_rollback(True)
    finally:
        client.cookies = saved
    return response  # type: ignore[return-value]


def _leaks(world: World, route: Route, user_class: str, response: HttpResponse) -> list[str]:
    """What a 200 shows that its reader must not see."""
    if response.status_code != 200 or route.is_admin or getattr(response, "streaming", False):
        return []
    body = response.content.decode("utf-8", errors="replace")
    found = []
    if user_class in ("anon", "norole", "super"):
        found += [f"the {kind} {name!r}" for kind, name in NAMES.items() if name in body]
    for staged in (world.staged, world.other_staged):
        theirs = staged.owner_id == getattr(world.users.get(user_class), "pk", None)
        if not theirs and (str(staged.pk) in body or staged.original_name in body):
            found.append(f"{staged.owner.username}'s staged upload {staged.original_name}")
    if user_class not in ("eng", "eng2", "admin"):
        found += [f"the trial's {label}" for label, text in world.engineer_only.items() if text in body]
    return found


def _check(world: World, client: Client, route: Route, row: matrix.Row, user_class: str) -> str | None:
    """None when the answer is the cell's; otherwise what differs."""
    body = BODIES[row.body](world, route.is_api) if row.body != "-" else {}
    url = fill(route, _values(world, route))
    response = _request(client, row.method, url, body, route.is_api)
    cell = row.cells[user_class]
    status, location = response.status_code, response.get("Location", "")
    if cell.answer == "login":
        ok = status == 302 and location.startswith("/login/?next=")
    elif cell.answer == "alogin":
        ok = status == 302 and location.startswith("/admin/login/?next=")
    elif cell.answer == "401":
        ok = status == 401 and bool(response.get("WWW-Authenticate"))
    else:
        ok = status == int(cell.answer)
    got = f"{status} {location}".strip()
    if not ok:
        return f"{user_class}: {row.method} {url} answered {got}, expected {cell.answer}"
    leaks = _leaks(world, route, user_class, response)
    if leaks:
        return f"{user_class}: {row.method} {url} shows {', '.join(leaks)}"
    return None


def _cases() -> Iterator[Any]:
    """One test per route and method; a route without a row is one test that fails naming it."""
    for route in ROUTES:
        methods = matrix.methods_of(route.key)
        if not methods:
            yield pytest.param(route.key, "GET", id=f"{route.key}-MISSING")
            continue
        for method in methods:
            row = matrix.expected(route.key, method)
            assert row is not None
            yield pytest.param(route.key, method, id=f"{route.key}-{method}")


def _row_of(route: Route, method: str) -> matrix.Row:
    row = matrix.expected(route.key, method)
    assert row is not None, (
        f"the route {route.key!r} ({route.pattern}) has no {method} row in tests/security/matrix.py: add "
        "one that says what each user class may get from it"
    )
    return row


@pytest.mark.parametrize(("key", "method"), list(_cases()))
def test_the_route_answers_each_user_as_the_table_says(
    world: World, clients: dict[str, Client], key: str, method: str
) -> None:
    route = _BY_KEY[key]
    row = _row_of(route, method)
    problems = [_check(world, clients[user_class], route, row, user_class) for user_class in USER_CLASSES]
    assert [p for p in problems if p] == []


def test_a_route_the_table_does_not_name_fails_by_name() -> None:
    new = Route(pattern="datasets/<int:dataset_id>/export/", name="datasets:export", parameters=("dataset_id",))
    assert matrix.methods_of(new.key) == []
    with pytest.raises(AssertionError, match=r"'datasets:export' \(datasets/<int:dataset_id>/export/\) has no GET"):
        _row_of(new, "GET")
    # An admin model the table does not know is no exception.
    assert matrix.methods_of("admin:datasets_datasetversion_changelist") == []


def test_the_table_refuses_a_cell_it_cannot_read() -> None:
    with pytest.raises(ValueError, match="not an expected answer"):
        matrix.Cell.parse("ok")
    with pytest.raises(ValueError, match="not an expected answer"):
        matrix.Cell.parse("403!")
    assert matrix.Cell.parse("403") == matrix.Cell("403")


def test_every_row_of_the_table_names_a_route_of_the_urlconf() -> None:
    keys = {route.key for route in ROUTES}
    stale = sorted({key for key, _ in matrix.ROWS} - keys)
    assert stale == [], f"rows for routes the URLconf no longer has: {stale}"
    registered = {model_view[0] for key in keys if (model_view := matrix.admin_model_route(key)) is not None}
    unused = sorted(set(matrix.ADMIN_MODEL_KINDS) - registered)
    assert unused == [], f"admin models the admin site no longer registers: {unused}"


def test_static_files_and_media_are_not_routes_of_the_urlconf() -> None:
    """WhiteNoise serves static/ in front of Django and the portal serves no media: a route for either
    would be a new way in that the matrix must see (or EXCLUDED must say why it does not)."""
    every = url_routes()
    served = [r.pattern for r in every if r.pattern.lstrip("^").startswith(("static/", "media/"))]
    assert served == [], f"static or media routes in the URLconf: {served}"
    stale = sorted(set(EXCLUDED) - {route.key for route in every})
    assert stale == [], f"EXCLUDED names routes the URLconf no longer has: {stale}"


def test_the_matrix_covers_the_api_schema_and_docs_and_the_gate() -> None:
    keys = {route.key for route in ROUTES}
    assert {"api-schema", "api-docs", "api-gate", "admin:index", "home"} <= keys


def test_the_world_stays_the_same_for_every_request(world: World, clients: dict[str, Client]) -> None:
    """The savepoint around each request undoes what a successful POST did."""
    route = _BY_KEY["experiments:cancel"]
    url = fill(route, _values(world, route))
    assert _request(clients["eng"], "POST", url, {}, api=False).status_code == 302
    world.experiment.refresh_from_db()
    assert world.experiment.status != "cancelled"


# What a gate token opens: the gate, and a deployment's status (the gate's answer over time, which a
# rollout controller polls with the token it asks the gate with; docs/monitoring.md).
GATE_TOKEN_OPENS = {"api-gate", "api-deployment"}


def test_the_gate_token_opens_the_gate_and_the_deployments_status_only(world: World) -> None:
    """A pipeline's gate token (accounts.authentication) answers the gate's question and a deployment's
    status, and is refused by every other route of the API, and is no session for the pages."""
    token = Client(HTTP_AUTHORIZATION=f"Token {world.gate_token}")
    gate = token.get("/api/v1/gate/", {"model": MODEL})
    assert gate.status_code == 200, gate.content
    status = token.get(f"/api/v1/deployments/{world.deployment.name}/")
    assert (status.status_code, status.json()["model"]) == (200, DEPLOYED)
    opened = []
    for route in ROUTES:
        if route.key in GATE_TOKEN_OPENS or route.is_admin:
            continue
        url = fill(route, _values(world, route))
        response = _request(token, "GET", url, {}, route.is_api)
        to_login = response.status_code == 302 and response["Location"].startswith("/login/?next=")
        refused = (
            response.status_code in (401, 403, 405)
            or to_login
            or (route.key in BY_LINK and response.status_code == 404)
        )
        if not refused and not (route.key in PUBLIC and response.status_code == 200):
            opened.append(f"{url}: {response.status_code}")
    assert opened == []


def test_a_steward_cannot_add_a_version_to_another_stewards_dataset(world: World, clients: dict[str, Client]) -> None:
    """The second steward uploads a file under the first steward's dataset name: the upload or its
    declaration is refused (403), as the upload of a new version by the dataset's own steward is not."""
    name = world.version.dataset.name

    def upload(client: Client) -> Any:
        savepoint = transaction.atomic()
        savepoint._from_testcase = True  # type: ignore[attr-defined]  # see the world fixture
        with savepoint:
            response = client.post("/datasets/new/", {"name": name, "file": _csv_file()})
            declared = None
            if response.status_code == 302 and "/datasets/new/" in response["Location"]:
                declare = {"label": "approved", "positive": "1", "attributes": ["gender"]}
                declared = client.post(response["Location"], declare)
            transaction.set_rollback(True)
        return declared if declared is not None and declared.status_code == 403 else response

    own = upload(clients["steward"])
    assert own.status_code == 302, own.content[:500]
    other = upload(clients["steward2"])
    assert other.status_code == 403, f"{other.status_code} {other.get('Location', '')}"


def _csv_file() -> SimpleUploadedFile:
    return SimpleUploadedFile("more-loans.csv", SMALL_CSV.encode(), content_type="text/csv")
