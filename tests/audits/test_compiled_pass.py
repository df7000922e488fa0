"""Which processes load the compiled counting pass: the web processes at start, not the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from auditportal.audits import counting, textcodes
from tests.audits.conftest import PREDICTIONS_CSV, write

REPO = Path(__file__).resolve().parents[2]


def _python(code: str, tmp_path: Path) -> str:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "auditportal.settings.test", "PORTAL_VAR_DIR": str(tmp_path / "var")}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_web_application_loads_the_compiled_pass_as_it_starts(tmp_path: Path) -> None:
    code = (
        "import auditportal.wsgi\n"
        "from auditportal.audits import counting\n"
        "print(counting.compiled_pass_loaded(), 'numba' in __import__('sys').modules)"
    )
    assert _python(code, tmp_path) == "True True"


def test_a_command_line_audit_does_not_load_numba(tmp_path: Path) -> None:
    path = write(tmp_path / "scores.csv", PREDICTIONS_CSV)
    code = (
        "import sys, django\n"
        "django.setup()\n"
        "from django.core.management import call_command\n"
        "call_command('migrate', verbosity=0)\n"
        f"call_command('audit_predictions', {str(path)!r}, '--label', 'label', '--prediction', 'pred',\n"
        "             '--attribute', 'gender', '--format', 'json', stdout=open('/dev/null', 'w'))\n"
        "print('numba' in sys.modules)"
    )
    assert _python(code, tmp_path) == "False"


def test_a_pass_that_cannot_be_loaded_leaves_audits_on_pyarrows_encoding(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: Any, **kwargs: Any) -> bool:
        raise RuntimeError("no LLVM target for this machine")

    monkeypatch.setattr(counting, "_compiled_pass_loaded", False)
    monkeypatch.setattr(textcodes.TextCodes, "add", broken)
    assert counting.load_compiled_pass() is False
    assert counting.compiled_pass_loaded() is False
    assert "could not be loaded" in caplog.text
    assert "no LLVM target" in caplog.text
