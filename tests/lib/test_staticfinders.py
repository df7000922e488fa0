from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.test import override_settings

from auditportal.lib import staticfinders
from auditportal.lib.staticfinders import PackageFileFinder


def test_plotly_js_is_found_inside_the_installed_plotly_package() -> None:
    found = finders.find("vendor/plotly/plotly.min.js")
    assert found, "static/vendor/plotly/plotly.min.js is not found"
    path = Path(str(found))
    assert path.parent.parent.name == "plotly"
    assert path.read_bytes()[:200].lstrip().startswith(b"/**")  # plotly.js's licence banner
    assert b"plotly.js" in path.read_bytes()[:2000]


def test_only_the_listed_files_of_a_package_are_exposed() -> None:
    assert finders.find("vendor/plotly/widgetbundle.js") is None
    assert finders.find("vendor/plotly/../templates/plotly.json") is None


def test_collectstatic_copies_plotly_js(tmp_path: Path) -> None:
    with override_settings(STATIC_ROOT=tmp_path):
        call_command("collectstatic", interactive=False, verbosity=0)
    copied = tmp_path / "vendor" / "plotly" / "plotly.min.js"
    assert copied.is_file()
    assert copied.stat().st_size == Path(str(finders.find("vendor/plotly/plotly.min.js"))).stat().st_size


def test_a_missing_package_file_is_a_system_check_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(staticfinders.PACKAGE_FILES, "vendor/none/none.js", ("plotly", "package_data/none.js"))
    errors = PackageFileFinder().check()
    assert [error.id for error in errors] == ["auditportal.E001"]
    assert "plotly does not hold package_data/none.js" in str(errors[0].msg)
