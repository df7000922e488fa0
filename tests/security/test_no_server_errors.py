"""The sweep: generated bad variants fired at every URL pattern of the portal (pages, forms, the API,
the admin's add and list pages), found from the URLconf so new ones are included. Whatever comes
back must be no server error (status < 500) and no exception: bad ids (huge, zero), bad query strings
(pagination, ordering, filters: NUL, huge and unicode numbers, long text), every form field of a page
filled with each bad text variant, every API input field with each bad JSON value, and raw bodies
(deep JSON, invalid UTF-8, NaN, wrong content types). On PostgreSQL this also checks that NUL bytes
and over-long text never reach the database."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from django.contrib import admin
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.datasets import services as dataset_services
from auditportal.datasets.models import Dataset, StagedUpload
from auditportal.experiments.models import Trial
from auditportal.reports.models import CertificateAuthority, Report
from tests.api.conftest import Portal, module_portal
from tests.datasets.conftest import SMALL_CSV
from tests.security.bad_inputs import DEEP, HUGE, JSON_VARIANTS, QUERY_PARAMETERS, TEXT_VARIANTS

__all__ = ["module_portal"]

_PARAMETER = re.compile(r"<(?:(?P<converter>\w+):)?(?P<name>\w+)>")
_FIELD = re.compile(r'<(?:input|select|textarea)\b[^>]*\bname="(?P<name>[^"]+)"[^>]*>', re.IGNORECASE)
_FILE_FIELD = re.compile(r'<input\b[^>]*\btype="file"[^>]*\bname="(?P<name>[^"]+)"', re.IGNORECASE)

RAW_BODIES: dict[str, tuple[bytes, str]] = {
    "deep-array": (b"[" * DEEP + b"]" * DEEP, "application/json"),
    "deep-object": (b'{"a":' * DEEP + b"1" + b"}" * DEEP, "application/json"),
    "not-utf8": (b'{"title": "\xff\xfe\xfa"}', "application/json"),
    "nan": (b'{"title": NaN}', "application/json"),
    "long-number": (b'{"title": ' + b"9" * 5000 + b"}", "application/json"),
    "truncated": (b'{"title": "x', "application/json"),
    "scalar": (b"42", "application/json"),
    "list": (b"[1, 2]", "application/json"),
    "text": (b"title=x", "text/plain"),
    "xml": (b"<title>x</title>", "application/xml"),
    "form-nul": (b"title=a%00b&name=a%00b", "application/x-www-form-urlencoded"),
    "form-not-utf8": (b"title=%ff%fe&name=\xff", "application/x-www-form-urlencoded"),
    "multipart-no-boundary": (b"--x\r\n", "multipart/form-data"),
    "multipart-junk": (
        b"--b\r\nContent-Disposition: form-data; name=\x00\r\n\r\n\xff\r\n--b--\r\n",
        "multipart/form-data; boundary=b",
    ),
}

# What a browser could send to a page: the rest are API-only mistakes.
PAGE_BODIES = ("form-nul", "form-not-utf8", "multipart-no-boundary", "multipart-junk")


@dataclass(frozen=True)
class Route:
    route: str  # the URLconf's route, parameters as <converter:name>
    callback: Callable[..., Any]

    @property
    def api_view(self) -> Any:
        return getattr(self.callback, "view_class", None) or getattr(self.callback, "cls", None)


def routes() -> list[Route]:
    found: list[Route] = []

    def walk(resolver: URLResolver, prefix: str) -> None:
        for entry in resolver.url_patterns:
            if isinstance(entry, URLResolver):
                if prefix + str(entry.pattern) == "admin/":
                    continue  # the admin's add and list pages are swept from its registry below
                walk(entry, prefix + str(entry.pattern))
            elif isinstance(entry, URLPattern):
                found.append(Route(prefix + str(entry.pattern), entry.callback))

    walk(get_resolver(), "")
    return found


@dataclass
class Sweep:
    client: Client
    failures: list[str]
    requests: int = 0

    def send(self, method: str, path: str, what: str, **kwargs: Any) -> int:
        """One request; a status of 500 or more, or an exception, is recorded as a failure."""
        self.requests += 1
        try:
            # A savepoint, so that a database error cannot end the test's transaction; marked as the
            # test case's own like Django's TestCase does, for services that refuse to run inside one.
            savepoint = transaction.atomic()
            savepoint._from_testcase = True  # type: ignore[attr-defined]
            with savepoint:
                if method == "GET":
                    response = self.client.get(path, **kwargs)
                elif method == "POST":
                    response = self.client.post(path, **kwargs)
                else:
                    response = self.client.generic(method, path, **kwargs)
        except Exception as exc:
            self.failures.append(f"{method} {path} [{what}]: {type(exc).__name__}: {str(exc)[:200]}")
            return 599
        if response.status_code >= 500:
            self.failures.append(f"{method} {path} [{what}]: HTTP {response.status_code}")
        return response.status_code


@pytest.fixture(scope="module")
def staged_upload(module_portal: Portal, tmp_path_factory: pytest.TempPathFactory) -> StagedUpload:
    """A profiled upload awaiting its declaration, in the module's portal (its pages are swept too)."""
    return _staged(module_portal, tmp_path_factory.mktemp("staged"))


@pytest.fixture
def portal(module_portal: Portal, staged_upload: StagedUpload, db: None) -> Portal:
    """The portal, built once for the module: each test below sweeps one route or admin model of it."""
    return module_portal


@pytest.fixture
def sweep(portal: Portal, settings: SettingsWrapper, tmp_path: Path) -> Sweep:
    settings.REPORT_STORAGE_DIR = tmp_path / "reports"
    portal.member.is_staff = portal.member.is_superuser = True
    portal.member.save()
    client = Client(raise_request_exception=True)
    client.force_login(portal.member)
    return Sweep(client=client, failures=[])


def _ids(portal: Portal) -> dict[str, list[str]]:
    ids = {name: [str(values[0])] for name, values in portal.ids.items() if values}
    ids.update({name: [values[0]] for name, values in portal.names.items() if values})
    for name, model in (
        ("dataset_id", Dataset),
        ("trial_id", Trial),
        ("report_id", Report),
        ("authority_id", CertificateAuthority),
    ):
        first = model._default_manager.order_by("pk").values_list("pk", flat=True).first()
        ids[name] = [str(first if first is not None else 1)]
    ids["number"] = ["1"]
    return ids


def _staged(portal: Portal, directory: Path) -> StagedUpload:
    source = directory / "in.csv"
    source.write_text(SMALL_CSV, encoding="utf-8")
    created = dataset_services.staged_upload_create(
        user=portal.member, source=source, original_name="loans.csv", dataset_name="loans"
    )
    profiled = dataset_services.staged_upload_profile(staged_id=created.pk)
    assert profiled is not None
    return profiled


def _paths(route: str, ids: dict[str, list[str]]) -> Iterator[tuple[str, str]]:
    """``route`` with existing ids, then with ids that cannot exist (huge, zero, unknown uuid)."""
    names = [match["name"] for match in _PARAMETER.finditer(route)]

    def fill(pick: Callable[[str, str], str]) -> str:
        return "/" + _PARAMETER.sub(lambda m: pick(m["converter"] or "str", m["name"]), route)

    yield fill(lambda converter, name: ids.get(name, ["1"])[0]), "existing ids"
    if names:
        yield fill(lambda converter, name: str(uuid.uuid4()) if converter == "uuid" else str(HUGE)), "huge ids"
        yield fill(lambda converter, name: str(uuid.uuid4()) if converter == "uuid" else "0"), "zero ids"


def _query_variants(*, full: bool = True) -> Iterator[tuple[str, dict[str, str]]]:
    """Every text variant in every common list parameter; a detail page (``full`` false) gets the
    ones that reach a database query: NUL, huge and unicode numbers, long text."""
    for what, value in TEXT_VARIANTS.items():
        if not full and what not in ("nul", "huge", "unicode-digits", "superscript-digits", "many-digits", "long"):
            continue
        if what.startswith("deep"):
            value = value[:200]  # a query string is read as text, not JSON
        yield f"query {what}", {name: value for name in QUERY_PARAMETERS}


def _html(response: Any) -> str:
    if response.status_code != 200 or response.streaming or not response["Content-Type"].startswith("text/html"):
        return ""
    return str(response.content.decode("utf-8", "replace"))


class _InitialValues(HTMLParser):
    """A page's form fields with the values the page offers (what a browser would submit unchanged)."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, list[str]] = {}
        self._select: str | None = None
        self._options: list[tuple[str, bool]] = []
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        given = {key: value or "" for key, value in attrs}
        name = given.get("name", "")
        if tag == "input" and name and given.get("type", "text") not in ("file", "submit", "button", "reset"):
            if given.get("type") in ("checkbox", "radio") and "checked" not in given:
                return
            self.values.setdefault(name, []).append(given.get("value", "on" if given.get("type") else ""))
        elif tag == "select" and name:
            self._select, self._options = name, []
        elif tag == "option" and self._select is not None:
            self._options.append((given.get("value", ""), "selected" in given))
        elif tag == "textarea" and name:
            self._textarea = name
            self.values.setdefault(name, []).append("")

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self.values[self._textarea][-1] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "select" and self._select is not None:
            chosen = [value for value, selected in self._options if selected]
            offered = [value for value, _ in self._options if value]
            self.values[self._select] = chosen or offered[:1]
            self._select = None
        elif tag == "textarea":
            self._textarea = None


def _initial_values(html: str) -> dict[str, list[str]]:
    parser = _InitialValues()
    parser.feed(html)
    parser.values.pop("csrfmiddlewaretoken", None)
    return parser.values


def _one_field_variants(initial: dict[str, list[str]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The page's own values with one field at a time replaced by a value that must not reach the
    database as it is: NUL, longer than any column, an integer beyond any column."""
    for name in sorted(initial):
        for what in ("nul", "long", "huge"):
            yield f"field {name} {what}", {**initial, name: TEXT_VARIANTS[what]}


def _form_fields(html: str) -> tuple[set[str], set[str]]:
    names = {match["name"] for match in _FIELD.finditer(html)} - {"csrfmiddlewaretoken"}
    files = {match["name"] for match in _FILE_FIELD.finditer(html)}
    return names - files, files


def _form_variants(names: set[str], files: set[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    yield "empty form", {}
    for what, value in TEXT_VARIANTS.items():
        data: dict[str, Any] = {name: value for name in names}
        data.update({name: SimpleUploadedFile(f"{what}.csv", value.encode("utf-8", "replace")) for name in files})
        yield f"form {what}", data
    for what, content in (
        ("binary file", bytes(range(256)) * 64),
        ("nul in csv", b"a,b\n1,\x002\n"),
        ("latin-1 csv", "label,gender\n1,F\xe9\n".encode("latin-1")),
    ):
        data = {name: "1" for name in names}
        data.update({name: SimpleUploadedFile("bad.csv", content) for name in files})
        yield f"form {what}", data


def _input_fields(view: Any) -> list[str]:
    serializer = getattr(view, "InputSerializer", None)
    return list(serializer().fields) if serializer is not None else []


# One test per route (the URLconf's, but logout, which would end the sweep's session) and per admin
# model: under xdist they spread over the workers, and a failure names its route.
SWEPT_ROUTES = [entry for entry in routes() if not entry.route.endswith("logout/")]
ADMIN_MODELS = sorted(admin.site._registry, key=lambda model: model._meta.label)


@pytest.mark.slow
@pytest.mark.django_db
@pytest.mark.parametrize("entry", SWEPT_ROUTES, ids=[entry.route or "/" for entry in SWEPT_ROUTES])
def test_no_page_form_or_api_endpoint_answers_a_bad_input_with_a_server_error(
    entry: Route, portal: Portal, staged_upload: StagedUpload, sweep: Sweep
) -> None:
    ids = _ids(portal)
    ids["staged_id"] = [str(staged_upload.pk)]
    view = entry.api_view
    for path, what in _paths(entry.route, ids):
        sweep.send("GET", path, what)
        if what != "existing ids":
            sweep.send("POST", path, what)
            continue
        for query_what, query in _query_variants(full="<" not in entry.route):
            sweep.send("GET", path, query_what, data=query)
        if path.startswith("/api/"):
            fields = _input_fields(view) or ["title", "name"]
            for value_what, value in JSON_VARIANTS.items():
                body = json.dumps({name: value for name in fields})
                for method in ("POST", "PUT", "PATCH", "DELETE"):
                    sweep.send(method, path, f"json {value_what}", data=body, content_type="application/json")
            for raw_what, (body_bytes, content_type) in RAW_BODIES.items():
                sweep.send("POST", path, raw_what, data=body_bytes, content_type=content_type)
            continue
        page = _html(sweep.client.get(path))
        names, files = _form_fields(page)
        for form_what, data in _form_variants(names, files):
            sweep.send("POST", path, form_what, data=data)
        if not entry.route.endswith("login/"):
            for form_what, data in _one_field_variants(_initial_values(page)):
                sweep.send("POST", path, form_what, data=data)
        for raw_what in PAGE_BODIES:
            body_bytes, content_type = RAW_BODIES[raw_what]
            sweep.send("POST", path, raw_what, data=body_bytes, content_type=content_type)
    assert sweep.failures == [], f"{len(sweep.failures)} of {sweep.requests} requests failed:\n" + "\n".join(
        sweep.failures
    )


@pytest.mark.slow
@pytest.mark.django_db
@pytest.mark.parametrize("model", ADMIN_MODELS, ids=[model._meta.label for model in ADMIN_MODELS])
def test_no_admin_add_or_list_page_answers_a_bad_input_with_a_server_error(
    model: Any, portal: Portal, sweep: Sweep
) -> None:
    base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
    page = _html(sweep.client.get(base + "add/"))
    names, files = _form_fields(page)
    for form_what, data in _form_variants(names, files):
        sweep.send("POST", base + "add/", form_what, data=data)
    for form_what, data in _one_field_variants(_initial_values(page)):
        sweep.send("POST", base + "add/", form_what, data=data)
    for query_what, query in _query_variants():
        sweep.send("GET", base, query_what, data=query)
    for lookup in ("p", "o", "q", "id__exact", "e", "_changelist_filters"):
        for value in (str(HUGE), "a\x00b", "x" * 5000, "-1", "١٢"):
            sweep.send("GET", base, f"admin {lookup}", data={lookup: value})
    sweep.send("GET", f"{base}{HUGE}/change/", "huge id")
    sweep.send("GET", f"{base}a%00b/change/", "nul id")
    assert sweep.failures == [], f"{len(sweep.failures)} of {sweep.requests} requests failed:\n" + "\n".join(
        sweep.failures
    )
