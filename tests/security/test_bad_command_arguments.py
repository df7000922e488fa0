"""Management commands given bad arguments: a one-line error that names the argument, a non-zero
exit, no traceback (through call_command, where the error is a CommandError, and in a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from auditportal.accounts.models import Role, User
from auditportal.datasets.models import DatasetVersion
from tests.database import subprocess_database_url
from tests.experiments.conftest import demo_version
from tests.factories import make_user
from tests.security.bad_inputs import DEEP, HUGE

__all__ = ["demo_version"]

ROOT = Path(__file__).resolve().parents[2]
LOG_OVERFLOW = '{"learning_rate": {"type": "log", "base": 10, "minval": -4, "maxval": 400}}'

# (command, arguments; "{version}" is a registered dataset version's id, "{missing}" a file that
# does not exist), and what the one-line error must say.
BAD_ARGUMENTS: list[tuple[str, list[str], str]] = [
    ("launch_experiment", ["--dataset", str(HUGE), "--template", "single"], f"--dataset {HUGE}: no such dataset"),
    ("launch_experiment", ["--dataset", "{version}", "--template", "random", "--hparams", LOG_OVERFLOW,
                           "--print-config"], "10**400 is out of range"),
    ("launch_experiment", ["--dataset", "{version}", "--template", "single", "--hparams", "[" * DEEP,
                           "--print-config"], "--hparams: JSON nested more than 32 levels"),
    ("launch_experiment", ["--dataset", "{version}", "--template", "single", "--hparams", '{"dropout": NaN}',
                           "--print-config"], "NaN is not a JSON number"),
    ("launch_experiment", ["--dataset", "{version}", "--template", "single", "--batches", str(HUGE),
                           "--print-config"], "batches"),
    ("launch_experiment", ["--dataset", "x", "--template", "single"], "argument --dataset: invalid int value"),
    ("shard_dataset", [str(HUGE), "--parts", "2"], f"dataset version {HUGE} does not exist"),
    ("shard_dataset", ["{version}", "--parts", "0"], "--parts must be at least 1"),
    ("shard_dataset", ["{version}", "--parts", str(HUGE)], "parts"),
    ("fairness_policy", ["set", "--min-group-size", str(HUGE), "--reason", "x", "--user", "erin"],
     "the minimum group size must be at most"),
    ("fairness_policy", ["set", "--tolerance", "nan", "--reason", "x", "--user", "erin"], "tolerance"),
    ("api_token", ["create", "--account", "bot", "--name", "n" * 101, "--user", "erin"],
     "The name is longer than 100 characters"),
    ("api_token", ["create", "--account", "b" * 151, "--name", "n", "--user", "erin"],
     "The account is longer than 150 characters"),
    ("api_token", ["create", "--account", "bot", "--name", "n", "--days", str(HUGE), "--user", "erin"], "days"),
    ("grant_role", ["nobody", "admin"], "nobody"),
    ("grant_role", ["x" * 300, "admin"], "x" * 20),
    ("register_dataset", ["{missing}", "--name", "loans", "--label", "y", "--positive", "1", "--attribute", "g",
                          "--user", "erin"], "missing.csv"),
    ("audit_predictions", ["{missing}", "--label", "y", "--prediction", "p", "--attribute", "g", "--user", "erin"],
     "missing.csv"),
    ("audit_predictions", ["{missing}", "--label", "y", "--score", "s", "--threshold", "inf", "--attribute", "g",
                           "--user", "erin"], "--threshold: the threshold must be a finite number"),
    ("compare_predictions", ["--champion-audit", str(HUGE), "--challenger-audit", "1", "{missing}", "--user", "erin"],
     "no such audit"),
    ("compare_predictions", ["--champion-audit", "1", "--user", "erin"], "--challenger-audit is required"),
    ("verify_report", ["{missing}"], "missing.csv"),
    ("make_demo_dataset", ["--rows", "5"], "--rows must be at least 100"),
    ("verify_audit_log", ["--expect-head", "not-a-hash"], "the expected head not-a-hash"),
    ("deployment", ["create", "x" * 300, "--user", "erin"], "NAME: A deployment's name is 1 to 100 characters"),
    ("deployment", ["create", "credit/prod", "--description", "a\x00b", "--user", "erin"],
     "--description: The description cannot contain NUL characters."),
    ("deployment", ["create", "credit/prod", "--model", "m" * 300, "--user", "erin"],
     "--model: A model identifier is at most 255 characters"),
    ("deployment", ["status", "x" * 300], "NAME: No deployment is named"),
    ("deployment", ["promote", "credit/prod", "m:1", "--user", "x" * 300], "--user 'xxxxxxxxxx"),
    ("simulate_traffic", ["--deployment", "x" * 300, "--account", "bot"], "--deployment 'xxxxxxxxxx"),
    ("simulate_traffic", ["--deployment", "fraud/prod", "--batches", "x"], "argument --batches: invalid int value"),
    ("seed_demo_deployment", ["--password", "x"], "refuses to run with DEBUG off"),
]  # fmt: skip


def _argv(arguments: list[str], version: DatasetVersion, directory: Path) -> list[str]:
    missing = str(directory / "missing.csv")
    return [a.replace("{version}", str(version.pk)).replace("{missing}", missing) for a in arguments]


@pytest.mark.django_db
@pytest.mark.parametrize(("command", "arguments", "message"), BAD_ARGUMENTS, ids=lambda v: str(v)[:40])
def test_a_command_refuses_a_bad_argument_with_a_one_line_error_that_names_it(
    command: str, arguments: list[str], message: str, demo_version: DatasetVersion, tmp_path: Path
) -> None:
    make_user("erin", list(Role))
    users = User.objects.count()
    with pytest.raises(CommandError) as raised:
        call_command(command, *_argv(arguments, demo_version, tmp_path))
    text = str(raised.value)
    assert message in text
    assert "\n" not in text.strip()
    assert User.objects.count() == users


@pytest.mark.django_db(transaction=True)
def test_from_a_shell_a_bad_argument_prints_one_line_and_exits_non_zero(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "launch_experiment", "--dataset", str(HUGE), "--template", "single"],
        cwd=ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "auditportal.settings.test",
            "DATABASE_URL": subprocess_database_url(),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == f"CommandError: --dataset {HUGE}: no such dataset version"
