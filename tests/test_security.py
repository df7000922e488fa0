"""Production posture: `check --deploy` is clean with the production settings, HTTPS behind a proxy,
secure cookies, the Content-Security-Policy (and templates without inline script or style), session
idle expiry, and the API's 401 with WWW-Authenticate."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from auditportal.accounts.models import User
from auditportal.reports import rendering
from tests.factories import client_for

ROOT = Path(__file__).resolve().parent.parent
# Variables that would change what the production settings are (the browser tests set the last one
# in this process).
_CLEARED = {
    "DEBUG",
    "SECRET_KEY",
    "DATABASE_URL",
    "REPORT_KEY_PASSPHRASE",
    "SECURE_SSL_REDIRECT",
    "SECURE_COOKIES",
    "SECURE_PROXY_SSL_HEADER",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "DJANGO_ALLOW_ASYNC_UNSAFE",
}


def _production(tmp_path: Path, code: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in _CLEARED and not k.endswith("_FILE")}
    clean.update(
        DJANGO_SETTINGS_MODULE="auditportal.settings.base",
        PORTAL_VAR_DIR=str(tmp_path),
        SECRET_KEY=secrets.token_urlsafe(60),
        REPORT_KEY_PASSPHRASE="a-passphrase-for-this-test",
        ALLOWED_HOSTS="portal.example.org",
        **env,
    )
    return subprocess.run(code, cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120, check=False)


def _settings_of(tmp_path: Path, names: list[str], **env: str) -> dict[str, str]:
    script = (
        "import django; django.setup(); from django.conf import settings; "
        f"print('\\n'.join(f'{{n}}={{getattr(settings, n, None)!r}}' for n in {names!r}))"
    )
    result = _production(tmp_path, [sys.executable, "-c", script], **env)
    assert result.returncode == 0, result.stderr
    return dict(line.split("=", 1) for line in result.stdout.splitlines())


def test_check_deploy_finds_nothing_to_warn_about_in_the_production_settings(tmp_path: Path) -> None:
    result = _production(tmp_path, [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_with_debug_off_https_hsts_and_secure_cookies_are_on_by_default(tmp_path: Path) -> None:
    names = [
        "SECURE_SSL_REDIRECT",
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SECURE_HSTS_SECONDS",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS",
        "SECURE_HSTS_PRELOAD",
        "SECURE_PROXY_SSL_HEADER",
        "SESSION_COOKIE_AGE",
    ]
    assert _settings_of(tmp_path, names) == {
        "SECURE_SSL_REDIRECT": "True",
        "SESSION_COOKIE_SECURE": "True",
        "CSRF_COOKIE_SECURE": "True",
        "SECURE_HSTS_SECONDS": "31536000",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": "True",
        "SECURE_HSTS_PRELOAD": "True",
        "SECURE_PROXY_SSL_HEADER": "None",
        "SESSION_COOKIE_AGE": "1800",
    }
    local = _settings_of(tmp_path, names[:5], DEBUG="true")
    assert local == {
        "SECURE_SSL_REDIRECT": "False",
        "SESSION_COOKIE_SECURE": "False",
        "CSRF_COOKIE_SECURE": "False",
        "SECURE_HSTS_SECONDS": "0",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": "False",
    }


def test_the_proxy_header_is_read_as_name_and_value(tmp_path: Path) -> None:
    found = _settings_of(tmp_path, ["SECURE_PROXY_SSL_HEADER"], SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto: https")
    assert found == {"SECURE_PROXY_SSL_HEADER": "('HTTP_X_FORWARDED_PROTO', 'https')"}
    result = _production(tmp_path, [sys.executable, "manage.py", "check"], SECURE_PROXY_SSL_HEADER="https")
    assert result.returncode != 0
    assert "SECURE_PROXY_SSL_HEADER='https' is not 'Header-Name: value' (e.g. 'X-Forwarded-Proto: https')" in (
        result.stderr
    )


@pytest.fixture
def behind_a_proxy(settings: SettingsWrapper) -> SettingsWrapper:
    """The production values of the settings the test settings turn off for plain-HTTP clients."""
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    settings.SECURE_HSTS_SECONDS = 31_536_000
    return settings


def test_behind_a_tls_proxy_plain_http_is_redirected_and_https_gets_hsts_and_secure_cookies(
    behind_a_proxy: SettingsWrapper, alice: User
) -> None:
    plain = Client().get("/login/")
    assert plain.status_code == 301
    assert plain["Location"] == "https://testserver/login/"
    secure = Client(HTTP_X_FORWARDED_PROTO="https")
    page = secure.get("/login/")
    assert page.status_code == 200
    assert page["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    assert page.cookies["csrftoken"]["secure"] is True
    token = page.cookies["csrftoken"].value
    logged_in = secure.post(
        "/login/",
        f"username=alice&password=correct+horse+battery+staple&csrfmiddlewaretoken={token}",
        content_type="application/x-www-form-urlencoded",
        HTTP_REFERER="https://testserver/login/",
    )
    assert logged_in.status_code == 302
    session = logged_in.cookies["sessionid"]
    assert (session["secure"], session["httponly"], session["max-age"]) == (True, True, 1800)


def test_every_page_carries_the_content_security_policy(alice: User) -> None:
    # Style attributes: only plotly.js's two fixed values, by hash (tests/lib/test_plotlycss.py).
    expected = (
        "default-src 'self'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-hashes' "
        "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=' 'sha256-AR/cKIZjWPcPmBUPDA6oti9XBiTbJvz0Cro2J1VzzS8='; "
        "img-src 'self' data:; font-src 'self'; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
    for client, path in ((Client(), "/login/"), (client_for(alice), "/"), (client_for(alice), "/api/v1/datasets/")):
        assert client.get(path)["Content-Security-Policy"] == expected, path


# The templates WeasyPrint lays out as PDFs (reports/rendering.py); no browser ever loads them.
PDF_TEMPLATES = {rendering.TEMPLATE, rendering.MONITORING_TEMPLATE}
_COMMENT = re.compile(r"\{#.*?#\}|<!--.*?-->|\{% comment %\}.*?\{% endcomment %\}", re.S)
_INLINE = [
    (re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.I), "an inline <script>"),
    (re.compile(r"<style\b", re.I), "a <style> element"),
    (re.compile(r"\sstyle\s*=", re.I), "a style attribute"),
    (re.compile(r"\son[a-z]+\s*=", re.I), "an event handler attribute"),
    (re.compile(r"javascript:", re.I), "a javascript: URL"),
]


def test_no_template_has_inline_script_or_style() -> None:
    found = []
    for template in sorted((ROOT / "templates").rglob("*.html")):
        text = _COMMENT.sub("", template.read_text(encoding="utf-8"))
        if template.relative_to(ROOT / "templates").as_posix() in PDF_TEMPLATES:
            continue  # a PDF's layout, rendered by WeasyPrint, never served as a page
        found += [f"{template.relative_to(ROOT)}: {what}" for pattern, what in _INLINE if pattern.search(text)]
    assert found == []


def _session_expiry(client: Client) -> datetime:
    return Session.objects.get(session_key=client.session.session_key).expire_date


def test_a_session_ends_after_the_idle_time_without_the_users_requests(alice: User) -> None:
    client = client_for(alice)
    assert client.get("/").status_code == 200
    expiry = _session_expiry(client)
    assert abs((expiry - timezone.now()) - timedelta(minutes=settings.SESSION_IDLE_MINUTES)) < timedelta(seconds=30)

    # Half an hour without a request of alice's: the session is gone.
    Session.objects.filter(session_key=client.session.session_key).update(expire_date=timezone.now())
    assert client.get("/")["Location"] == "/login/?next=/"
    assert client.get("/api/v1/datasets/").status_code == 401


def test_the_users_requests_renew_the_session_but_automatic_polls_do_not(alice: User) -> None:
    client = client_for(alice)
    client.get("/")
    session = client.session
    session["_portal_seen"] = int(time.time()) - 120  # the last renewal, two minutes ago
    session.save()
    Session.objects.filter(session_key=session.session_key).update(expire_date=timezone.now() + timedelta(minutes=5))
    before = _session_expiry(client)

    poll = client.get("/api/v1/datasets/", HTTP_X_PORTAL_POLL="1")
    assert poll.status_code == 200
    assert "sessionid" not in poll.cookies
    assert _session_expiry(client) == before

    page = client.get("/")
    assert page.cookies["sessionid"]["max-age"] == 1800
    assert _session_expiry(client) - before > timedelta(minutes=20)


def test_the_api_answers_401_with_www_authenticate_without_a_session(db: None) -> None:
    for path in ("/api/v1/datasets/", "/api/v1/audits/predictions/", "/api/v1/policy/"):
        response = Client().get(path)
        assert response.status_code == 401, path
        assert response["WWW-Authenticate"] == 'Session realm="api", login="/login/"'
        assert response.json() == {"detail": "Authentication credentials were not provided."}
    gate = Client().get("/api/v1/gate/", {"model": "m"})
    assert gate.status_code == 401
    assert gate["WWW-Authenticate"] == "Token"
