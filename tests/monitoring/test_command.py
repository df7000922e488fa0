"""``manage.py deployment``: status exits 0 only when the deployment serves its promoted model and the
gate still approves it, 1 otherwise, 2 for a name no deployment has; create and promote act as a named
ML engineer or administrator, and refuse as the services do, in one line naming the argument."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.monitoring import services
from auditportal.monitoring.models import Deployment, DeploymentState
from tests.database import subprocess_database_url
from tests.monitoring.conftest import Approve, suspend

ROOT = Path(__file__).resolve().parents[2]


def _status(name: str, *flags: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("deployment", "status", name, *flags, stdout=out)
    except SystemExit as exit_:
        return int(exit_.code or 0), out.getvalue()
    return 0, out.getvalue()


def test_status_exits_0_while_the_promoted_model_serves_and_1_once_it_is_rolled_back(
    deployment: Deployment, approve: Approve, bob: User
) -> None:
    assert _status("credit-scoring/prod")[0] == 1  # empty
    approve("credit:3")
    second = approve("credit:4")
    services.deployment_promote(deployment=deployment, model_identifier="credit:3", by=bob)
    services.deployment_promote(deployment=deployment, model_identifier="credit:4", by=bob, reason="Better recall")
    code, out = _status("credit-scoring/prod")
    assert code == 0
    assert out.splitlines()[:3] == ["deployment  credit-scoring/prod", "state       serving", "model       credit:4"]
    assert "reason      Better recall" in out
    assert "approved    yes" in out

    suspend(second)
    code, out = _status("credit-scoring/prod")
    assert code == 1, "the gate no longer approves it, though nothing rolled it back yet"
    assert "approved    no: the gate does not approve it now" in out

    services.deployments_reconcile()
    code, out = _status("credit-scoring/prod", "--json")
    assert code == 1
    body = json.loads(out)
    assert (body["state"], body["model"], body["approved"]) == ("rolled_back", "credit:3", True)


def test_status_of_an_unknown_deployment_is_an_error_of_its_own(db: None) -> None:
    with pytest.raises(CommandError, match=r"NAME: No deployment is named 'fraud/prod'\.") as raised:
        call_command("deployment", "status", "fraud/prod")
    assert raised.value.returncode == 2


def test_create_and_promote_act_as_the_named_engineer(approve: Approve, bob: User) -> None:
    approve("credit:4")
    out = io.StringIO()
    call_command("deployment", "create", "credit/prod", "--description", "Loans", "--user", "bob", stdout=out)
    call_command("deployment", "promote", "credit/prod", "credit:4", "--user", "bob", stdout=out)
    assert out.getvalue().splitlines() == [
        "Created deployment credit/prod (empty).",
        "credit:4 serves in credit/prod from now on.",
    ]
    deployment = Deployment.objects.get(name="credit/prod")
    assert (deployment.state, deployment.created_by) == (DeploymentState.SERVING, bob)
    event = Event.objects.get(verb=Verb.DEPLOYMENT_PROMOTED)
    assert (event.actor, event.data["cli"]["command"]) == (bob, "deployment")
    listed = io.StringIO()
    call_command("deployment", "list", stdout=listed)
    assert listed.getvalue().startswith("credit/prod\tserving\tcredit:4\t")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["create", "Credit Prod", "--user", "bob"], "NAME: A deployment's name is 1 to 100 characters"),
        (["create", "credit/prod", "--user", "carol"], "--user 'carol' is neither an ML engineer nor an administrator"),
        (["create", "credit/prod", "--user", "nobody"], "--user 'nobody': no active user with that name"),
        (["promote", "credit/prod", "credit:9", "--user", "bob"], "NAME: No deployment is named 'credit/prod'."),
        (["promote", "credit-scoring/prod", "credit:9", "--user", "bob"], "MODEL: 'credit:9' cannot be promoted"),
    ],
)
def test_bad_arguments_are_refused_in_one_line_naming_them(
    deployment: Deployment, carol: User, arguments: list[str], message: str
) -> None:
    with pytest.raises(CommandError) as raised:
        call_command("deployment", *arguments)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)
    assert Deployment.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_from_a_shell_the_exit_code_is_what_a_ci_job_reads(bob: User) -> None:
    services.deployment_create(user=bob, name="credit/prod")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "auditportal.settings.test",
        "DATABASE_URL": subprocess_database_url(),
    }

    def run(name: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", "deployment", "status", name],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    empty = run("credit/prod")
    assert (empty.returncode, empty.stdout.splitlines()[1]) == (1, "state       empty")
    unknown = run("fraud/prod")
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == "CommandError: NAME: No deployment is named 'fraud/prod'."
