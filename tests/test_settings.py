from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load_settings(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DEBUG", "SECRET_KEY", "DATABASE_URL", "REPORT_KEY_PASSPHRASE", "REPORT_KEY_PASSPHRASE_FILE"}
    }
    clean.update(env)
    clean["DJANGO_SETTINGS_MODULE"] = "auditportal.settings.base"
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.conf import settings; print(settings.DEBUG)",
        ],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_production_settings_require_a_secret_key(tmp_path: Path) -> None:
    result = _load_settings({"PORTAL_VAR_DIR": str(tmp_path)})
    assert result.returncode != 0
    assert "SECRET_KEY is required when DEBUG is off" in result.stderr


def test_debug_is_off_unless_asked(tmp_path: Path) -> None:
    result = _load_settings(
        {"PORTAL_VAR_DIR": str(tmp_path), "SECRET_KEY": "x" * 50, "REPORT_KEY_PASSPHRASE": "p" * 20}
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_a_misspelt_debug_flag_stops_the_process(tmp_path: Path) -> None:
    result = _load_settings({"PORTAL_VAR_DIR": str(tmp_path), "DEBUG": "yess"})
    assert result.returncode != 0
    assert "DEBUG='yess' is not a boolean" in result.stderr


@pytest.mark.parametrize("url", ["mysql//nope", "not a url"])
def test_a_malformed_database_url_is_named(tmp_path: Path, url: str) -> None:
    result = _load_settings({"PORTAL_VAR_DIR": str(tmp_path), "DEBUG": "true", "DATABASE_URL": url})
    assert result.returncode != 0
    assert "DATABASE_URL" in result.stderr


def test_production_settings_require_a_report_key_passphrase(tmp_path: Path) -> None:
    result = _load_settings({"PORTAL_VAR_DIR": str(tmp_path), "SECRET_KEY": "x" * 50})
    assert result.returncode != 0
    assert "REPORT_KEY_PASSPHRASE is required when DEBUG is off" in result.stderr


def test_a_short_report_key_passphrase_is_refused(tmp_path: Path) -> None:
    result = _load_settings({"PORTAL_VAR_DIR": str(tmp_path), "DEBUG": "true", "REPORT_KEY_PASSPHRASE": "short"})
    assert result.returncode != 0
    assert "REPORT_KEY_PASSPHRASE must be at least 16 characters long" in result.stderr


def test_the_report_key_passphrase_may_come_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "passphrase"
    secret.write_text("a-passphrase-from-a-secret-file\n", encoding="utf-8")
    clean = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "SECRET_KEY", "REPORT_KEY_PASSPHRASE"}}
    clean.update(
        PORTAL_VAR_DIR=str(tmp_path),
        SECRET_KEY="x" * 50,
        REPORT_KEY_PASSPHRASE_FILE=str(secret),
        DJANGO_SETTINGS_MODULE="auditportal.settings.base",
    )
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.conf import settings; print(settings.REPORT_KEY_PASSPHRASE)",
        ],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "a-passphrase-from-a-secret-file"
