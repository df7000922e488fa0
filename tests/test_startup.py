"""What a management command's process imports: none of the heavy libraries that only some pages, tasks and
commands use (a CI pipeline runs `manage.py audit_predictions` on every build; bench/audit_predictions.py).

Each of these takes from 0.03 s to 1 s to import. The modules that use them import them inside the
functions that need them, so loading the apps (models, admin, services, selectors) never does. The
failure names the module that imported one, and what imported that.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from auditportal.audits.models import PredictionAudit
from tests.database import subprocess_database_url

ROOT = Path(__file__).resolve().parents[1]
WATCH = ROOT / "tests" / "importwatch.py"

# Module -> who may import it (inside the functions that use it).
HEAVY = {
    "weasyprint": "reports.rendering, to lay out a report's PDF",
    "fontTools": "WeasyPrint and reports.signing's stamp font",
    "pyhanko": "reports.signing and reports.verification",
    "pyhanko_certvalidator": "reports.signing and reports.verification",
    "aiohttp": "pyHanko's time-stamp client",
    "asn1crypto": "reports.signing and reports.verification",
    "cryptography": "reports.signing, for keys and certificates",
    "plotly": "fairness.figures, to draw the dashboard's figures",
    "narwhals": "plotly",
    "kaleido": "reports.figures, to export SVG in the Celery worker",
    "ruamel": "experiments.configs, to write and read a launch config",
    "scipy": "the tests, as an oracle",
    "statsmodels": "the tests, as an oracle",
    "pandas": "the tests and fairlearn in bench/",
    "sklearn": "fairlearn in bench/",
    "fairlearn": "bench/, as the statistics' baseline",
    "torch": "trainer/, on Determined's agents",
    "determined": "experiments.backends, to launch on a cluster",
    "celery": "the tasks modules and outbox.broker, which hands a committed task to the broker",
}
# On SQLite nothing needs PostgreSQL's driver (on PostgreSQL, Django's backend imports it first).
SQLITE_ONLY = {"psycopg": "Django's PostgreSQL backend, experiments.ingest and experiments.selectors"}
AUDIT_CSV = "label,score,group\n" + "1,0.9,a\n0,0.2,a\n1,0.4,a\n0,0.7,b\n1,0.8,b\n0,0.1,b\n1,0.6,\n" * 20


def _watched() -> dict[str, str]:
    on_sqlite = connection.vendor == "sqlite"
    return {**HEAVY, **(SQLITE_ONLY if on_sqlite else {})}


Imported = dict[str, list[str]]  # watched module -> the frames that imported it, innermost first


def _run_watched(
    tmp_path: Path, watched: dict[str, str], *argv: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], Imported]:
    report = tmp_path / "imported.json"
    result = subprocess.run(
        [sys.executable, str(WATCH), str(report), ",".join(watched), *argv],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "auditportal.settings.test", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert report.exists(), f"the process wrote no import report (exit {result.returncode}):\n{result.stderr}"
    imported: Imported = json.loads(report.read_text())
    return result, imported


def _explained(imported: Imported, watched: dict[str, str]) -> str:
    return "\n".join(
        f"{name} (needed only by {watched[name]}) imported by {frames[0]}"
        + (f", itself reached through {' <- '.join(frames[1:])}" if frames[1:] else "")
        for name, frames in imported.items()
    )


def test_the_audit_commands_start_imports_no_heavy_module(tmp_path: Path) -> None:
    # Settings, every app's models and admin (autodiscovery), the command and its parser.
    watched = _watched()
    result, imported = _run_watched(tmp_path, watched, "manage.py", "audit_predictions", "--help")
    assert result.returncode == 0, result.stderr
    assert "--fail-on" in result.stdout
    assert not imported, "heavy modules imported at start:\n" + _explained(imported, watched)


@pytest.mark.django_db(transaction=True)
def test_an_audit_from_the_command_line_imports_no_heavy_module(tmp_path: Path) -> None:
    # The whole process, as a CI job runs it: parse, count, judge, store, freeze the document, print.
    path = tmp_path / "predictions.csv"
    path.write_text(AUDIT_CSV)
    watched = _watched()
    result, imported = _run_watched(
        tmp_path, watched, "manage.py", "audit_predictions", str(path),
        "--label", "label", "--score", "score", "--threshold", "0.5", "--attribute", "group", "--format", "json",
        DATABASE_URL=subprocess_database_url(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["rows"] == 140
    assert PredictionAudit.objects.count() == 1
    assert not imported, "heavy modules imported by an audit:\n" + _explained(imported, watched)


def test_the_watch_names_the_module_that_imported_a_heavy_one(tmp_path: Path) -> None:
    # The check above can fail, and says where to look when it does.
    script = tmp_path / "draws.py"
    script.write_text("def draw() -> None:\n    import plotly.graph_objects\n\n\ndraw()\n")
    result, imported = _run_watched(tmp_path, {"plotly": "drawing"}, str(script))
    assert result.returncode == 0, result.stderr
    assert imported == {"plotly": [f"{script}:2", f"{script}:5"]}
    assert _explained(imported, {"plotly": "drawing"}) == (
        f"plotly (needed only by drawing) imported by {script}:2, itself reached through {script}:5"
    )
