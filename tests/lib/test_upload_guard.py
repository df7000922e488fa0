"""Files are refused unread unless the user may upload them at that address (lib/uploads.UploadGuardHandler),
and bodies other than uploads are small (REQUEST_BODY_MAX_SIZE)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit
from urllib.request import urlopen

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.datasets.models import StagedUpload
from auditportal.lib.uploads import HashingTemporaryFileUploadHandler, SizeLimitedUploadHandler
from tests.datasets.conftest import SMALL_CSV
from tests.factories import client_for

FOUR_MIB = b"x" * (4 * 1024**2)


class Stored:
    """What the handlers after the guard were given: the files they opened and the bytes they took."""

    def __init__(self) -> None:
        self.files: list[str] = []
        self.bytes = 0


@pytest.fixture
def stored(monkeypatch: pytest.MonkeyPatch, dataset_storage: Path) -> Stored:
    seen = Stored()
    new_file = HashingTemporaryFileUploadHandler.new_file
    receive = SizeLimitedUploadHandler.receive_data_chunk

    def spy_new_file(self: HashingTemporaryFileUploadHandler, *args: Any, **kwargs: Any) -> None:
        seen.files.append(str(args[1] if len(args) > 1 else kwargs.get("file_name")))
        new_file(self, *args, **kwargs)

    def spy_receive(self: SizeLimitedUploadHandler, raw_data: bytes, start: int) -> bytes:
        seen.bytes += len(raw_data)
        return receive(self, raw_data, start)

    monkeypatch.setattr(HashingTemporaryFileUploadHandler, "new_file", spy_new_file)
    monkeypatch.setattr(SizeLimitedUploadHandler, "receive_data_chunk", spy_receive)
    return seen


def uploads_dir(settings: SettingsWrapper) -> list[Path]:
    return list(Path(settings.FILE_UPLOAD_TEMP_DIR).iterdir())


def a_file(name: str = "big.csv", content: bytes = FOUR_MIB) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content, content_type="text/csv")


def browser_like(user: User | None = None) -> Client:
    """A client whose POSTs meet the CSRF check, as a browser's or an attacker's do, with the CSRF
    cookie any visit to the login page gives: the check reads the body (for its token) before the
    view runs. (The test client skips the check by default; without the cookie it reads nothing.)"""
    client = Client(enforce_csrf_checks=True)
    if user is not None:
        client.force_login(user)
    client.get("/login/")
    assert "csrftoken" in client.cookies
    return client


@pytest.mark.parametrize(
    "url",
    ["/login/", "/admin/login/", "/datasets/new/", "/audits/predictions/new/", "/reports/verify/", "/policy/"],
)
def test_an_anonymous_multipart_post_is_refused_before_anything_is_written(
    db: None, url: str, stored: Stored, settings: SettingsWrapper
) -> None:
    response = browser_like().post(url, {"username": "alice", "file": a_file()})
    assert response.status_code == 403
    assert "Log in before sending files; nothing was stored." in response.content.decode()
    assert (stored.files, stored.bytes) == ([], 0)
    assert uploads_dir(settings) == []


@pytest.mark.django_db(transaction=True)
def test_an_anonymous_300_mib_post_is_answered_before_its_body_is_sent(
    live_server: Any, stored: Stored, settings: SettingsWrapper
) -> None:
    """The attack as it was made, streamed: the headers announce 300 MiB; the answer comes after the
    first 64 KiB, and nothing is written under the uploads folder."""
    announced = 300 * 1024**2
    boundary = "----guard"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.csv"\r\n'
        "Content-Type: text/csv\r\n\r\n"
    ).encode()
    address = urlsplit(live_server.url)
    with urlopen(f"{live_server.url}/login/", timeout=10) as page:  # noqa: S310 (the test's own http server)
        cookie = next(
            header.split(";")[0] for header in page.headers.get_all("Set-Cookie") if header.startswith("csrftoken=")
        )
    with socket.create_connection((address.hostname, address.port), timeout=10) as connection:
        connection.sendall(
            (
                "POST /login/ HTTP/1.1\r\n"
                f"Host: {address.hostname}\r\n"
                f"Cookie: {cookie}\r\n"
                f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
                f"Content-Length: {announced}\r\n\r\n"
            ).encode()
            + head
            + b"x" * (64 * 1024)
        )
        received = b""
        while b"nothing was stored" not in received:
            chunk = connection.recv(65536)
            if not chunk:
                break
            received += chunk
        answer = received.decode("latin-1")
    assert answer.startswith("HTTP/1.1 403"), answer[:200]
    assert "Log in before sending files; nothing was stored." in answer
    assert (stored.files, stored.bytes) == ([], 0)
    assert uploads_dir(settings) == []


@pytest.mark.django_db  # the member comes from a fixture fetched by name
@pytest.mark.parametrize("fixture_name", ["bob", "carol", "oscar"])
def test_a_member_without_the_steward_role_cannot_send_a_dataset_file(
    request: pytest.FixtureRequest, fixture_name: str, stored: Stored, settings: SettingsWrapper
) -> None:
    client = browser_like(request.getfixturevalue(fixture_name))
    response = client.post(reverse("datasets:upload"), {"name": "loans", "file": a_file()})
    assert response.status_code == 403
    assert "Only a data steward can upload files here; nothing was stored." in response.content.decode()
    assert (stored.files, stored.bytes) == ([], 0)
    assert uploads_dir(settings) == []
    assert not StagedUpload.objects.exists()


def test_a_steward_cannot_send_files_where_the_page_takes_none(
    alice: User, stored: Stored, settings: SettingsWrapper
) -> None:
    client = browser_like(alice)
    for url in ("/policy/", reverse("audits:prediction-new"), "/api/v1/policy/"):
        response = client.post(url, {"file": a_file()})
        assert response.status_code == 403, url
        assert (stored.files, stored.bytes) == ([], 0)
    assert (
        "Only an ML engineer or a reviewer can upload files here"
        in client.post(reverse("audits:prediction-new"), {"file": a_file()}).content.decode()
    )
    assert (
        "This address takes no uploaded files; nothing was stored."
        in client.post("/policy/", {"file": a_file()}).content.decode()
    )
    # A multipart form without files is read as any form (here: refused by the CSRF check, as any
    # form without its token).
    response = client.post(reverse("logout"), {"next": "/"})
    assert response.status_code == 403
    assert "CSRF" in response.content.decode()
    assert uploads_dir(settings) == []


def test_the_uploader_a_view_names_gets_the_file_through(alice: User, stored: Stored) -> None:
    response = client_for(alice).post(
        reverse("datasets:upload"), {"name": "loans", "file": a_file("loans.csv", SMALL_CSV.encode())}
    )
    assert response.status_code == 302
    assert stored.files == ["loans.csv"]
    assert stored.bytes == len(SMALL_CSV.encode())


def test_the_api_refuses_files_it_is_not_given_by_an_auditor(
    oscar: User, alice: User, stored: Stored, settings: SettingsWrapper
) -> None:
    url = reverse("api-prediction-audit-list")
    anonymous = browser_like().post(url, {"file": a_file()})
    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"] == 'Session realm="api", login="/login/"'
    for user in (oscar, alice):
        response = browser_like(user).post(url, {"file": a_file()})
        assert response.status_code == 403
        assert response.json() == {
            "detail": "Only an ML engineer or a reviewer can upload files here; nothing was stored."
        }
    verify = browser_like(oscar).post(reverse("api-report-verify"), {"file": a_file("r.pdf")})
    assert verify.status_code == 403
    assert verify.json()["detail"] == "Only a member of the portal can upload files here; nothing was stored."
    assert (stored.files, stored.bytes) == ([], 0)
    assert uploads_dir(settings) == []


def test_a_member_may_send_a_report_to_verify(carol: User, stored: Stored) -> None:
    response = client_for(carol).post(reverse("api-report-verify"), {"file": a_file("r.pdf", b"%PDF-1.7 not really")})
    assert response.status_code == 200
    assert stored.files == ["r.pdf"]


def test_a_json_body_over_the_limit_is_refused_unread_with_413(
    bob: User, settings: SettingsWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE == 1024**2  # REQUEST_BODY_MAX_SIZE's default
    body = json.dumps({"reason": "x" * (2 * 1024**2)})
    response = client_for(bob).post("/api/v1/policy/", body, content_type="application/json")
    assert response.status_code == 413
    assert response.json() == {
        "detail": "The request body is 2.0 MiB, over the limit of 1.0 MiB (REQUEST_BODY_MAX_SIZE); nothing was read."
    }
    form = Client().post(
        "/login/", urlencode({"username": "x" * (2 * 1024**2)}), content_type="application/x-www-form-urlencoded"
    )
    assert form.status_code == 413
    assert form.content.decode().startswith("The request body is 2.0 MiB, over the limit of 1.0 MiB")
    # Below the limit, the same body is read (and answered by the view).
    small = client_for(bob).post("/api/v1/policy/", json.dumps({"reason": "x"}), content_type="application/json")
    assert small.status_code != 413
