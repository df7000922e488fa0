"""The report's URL fetcher reads files under static/ only, however the URL is written.

The check is made on the path as the opener will read it: percent-decoded once, resolved (``..`` and
symbolic links followed). What would need a second decoding, backslashes, other hosts and relative
paths are refused outright.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper
from weasyprint.urls import FatalURLFetchingError

from auditportal.reports import rendering


@pytest.fixture
def site(settings: SettingsWrapper, tmp_path: Path) -> Path:
    """A project folder with static/css/report.css, a secret beside static/, and two symbolic links
    in static/: one to the secret, one to a file under static/."""
    settings.BASE_DIR = tmp_path
    (tmp_path / "static" / "css").mkdir(parents=True)
    (tmp_path / "static" / "css" / "report.css").write_text("body { color: black }")
    (tmp_path / "static" / "css" / "with space.css").write_text("p { color: blue }")
    (tmp_path / "secret.txt").write_text("the signing key's passphrase")
    (tmp_path / "static" / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (tmp_path / "static" / "css" / "alias.css").symlink_to(tmp_path / "static" / "css" / "report.css")
    return tmp_path


def _read(url: str) -> bytes:
    response = rendering.static_fetcher().fetch(url)
    try:
        data: bytes = response.read()
    finally:
        response.close()
    return data


def _refused(url: str, why: str) -> None:
    with pytest.raises(FatalURLFetchingError, match=why):
        _read(url)


def test_a_file_under_static_is_read(site: Path) -> None:
    static = (site / "static").as_uri()
    assert _read(f"{static}/css/report.css") == b"body { color: black }"
    assert _read(f"{static}/css/../css/report.css") == b"body { color: black }"  # resolved, still inside
    assert _read(f"{static}/css/with%20space.css") == b"p { color: blue }"  # decoded once, as named
    assert _read(f"{static}/css/report.css?v=1#x") == b"body { color: black }"
    assert _read(f"{static}/css/alias.css") == b"body { color: black }"  # a link that stays inside


@pytest.mark.parametrize(
    "escape",
    [
        "%2e%2e/secret.txt",
        "%2E%2E/secret.txt",
        ".%2e/secret.txt",
        "css/%2e%2e/%2e%2e/secret.txt",
        "..%2fsecret.txt",
        "%2e%2e%2fsecret.txt",
        "../secret.txt",
    ],
)
def test_a_path_that_climbs_out_of_static_once_decoded_is_refused(site: Path, escape: str) -> None:
    _refused(f"{(site / 'static').as_uri()}/{escape}", re.escape("only files under"))


@pytest.mark.parametrize("escape", ["%252e%252e/secret.txt", "%25%32%65%25%32%65/secret.txt", "css%252freport.css"])
def test_a_path_encoded_twice_is_refused(site: Path, escape: str) -> None:
    """A % left after one decoding is refused, not decoded again (so no file under static/ has % in
    its name)."""
    _refused(f"{(site / 'static').as_uri()}/{escape}", "its path has encoded twice")


@pytest.mark.parametrize("escape", ["..\\secret.txt", "css\\..\\..\\secret.txt", "%5c..%5csecret.txt"])
def test_a_path_with_backslashes_is_refused(site: Path, escape: str) -> None:
    _refused(f"{(site / 'static').as_uri()}/{escape}", "its path has a backslash")


def test_a_symbolic_link_out_of_static_is_refused(site: Path) -> None:
    _refused(f"{(site / 'static').as_uri()}/leak.txt", re.escape("only files under"))


def test_absolute_paths_elsewhere_other_hosts_and_relative_paths_are_refused(site: Path) -> None:
    _refused((site / "secret.txt").as_uri(), re.escape("only files under"))
    _refused("file:///etc/passwd", re.escape("may not read file:///etc/passwd: only files under"))
    _refused(f"file://example.org{site / 'static' / 'css' / 'report.css'}", "a file on another host")
    _refused("file:static/css/report.css", "not an absolute path")
    _refused(f"{(site / 'static').as_uri()}/css/missing.css", "no such file under")
    _refused(f"{(site / 'static').as_uri()}/css", re.escape("only files under"))  # a folder
    _refused(f"{(site / 'static').as_uri()}/css/report.css%00.png", "a NUL character")


def test_other_schemes_are_refused(site: Path) -> None:
    _refused("https://example.org/x.css", re.escape("may not fetch https://example.org/x.css"))
    _refused("http://127.0.0.1:9/x.css", re.escape("may not fetch http://127.0.0.1:9/x.css"))
    _refused("ftp://example.org/x.css", "may not fetch")
    assert _read("data:text/css,p%20%7B%7D") == b"p {}"
