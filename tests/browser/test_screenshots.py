"""The browser tests' screenshots: taken only when asked for (`make screenshots`), and of every open
page when a browser test fails (tests/browser/conftest.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.browser import conftest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PNG = b"\x89PNG\r\n\x1a\n"


def test_a_screenshot_is_taken_only_when_asked_for(page: Any, live_server: Any, tmp_path: Path) -> None:
    page.goto(f"{live_server.url}/login/")
    path = tmp_path / "login.png"

    page.screenshot(path=str(path), full_page=True)
    page.locator("form").screenshot(path=str(tmp_path / "form.png"))

    if conftest.SCREENSHOTS:
        assert path.read_bytes().startswith(PNG)
        assert (tmp_path / "form.png").read_bytes().startswith(PNG)
    else:
        assert list(tmp_path.iterdir()) == []


def test_a_failure_keeps_a_screenshot_of_every_open_page(
    page: Any, live_server: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(conftest, "FAILED", tmp_path)
    page.goto(f"{live_server.url}/login/")
    second = page.context.new_page()
    second.goto(f"{live_server.url}/login/?next=/datasets/")

    taken = conftest._failure_screenshots("tests/browser/test_x.py::test_y[a b/c]")

    written = sorted(tmp_path.iterdir())
    assert [path.name for path in written] == [
        "tests_browser_test_x.py_test_y_a_b_c_-1.png",
        "tests_browser_test_x.py_test_y_a_b_c_-2.png",
    ]
    assert all(path.read_bytes().startswith(PNG) for path in written)
    assert taken == [f"{page.url}: {written[0]}", f"{second.url}: {written[1]}"]
