"""`python manage.py fairness_policy show|set`."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from auditportal.accounts.cli import CLI_USERNAME
from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.policies.models import FairnessPolicy
from auditportal.policies.selectors import policy_active

ONE_OF = "the metrics are one or more of tpr, fpr, equalized_odds, selection_rate, ppv, not"
POSITIVE = "the minimum group size must be a positive integer or none, not"


def _run(*args: str) -> str:
    out = StringIO()
    call_command("fairness_policy", *args, stdout=out)
    return out.getvalue()


def test_show_prints_the_active_version_and_its_values(db: None) -> None:
    text = _run("show")
    assert text.splitlines()[:6] == [
        "Fairness policy version 1 (active)",
        "  tolerance δ     0.05",
        "  alpha           0.05",
        "  metrics judged  tpr",
        "  reference       The largest group (most rows) of each attribute",
        "  min group size  none",
    ]
    assert "by the first migrate" in text


def test_set_creates_the_next_version_as_the_named_administrator(erin: User) -> None:
    text = _run(
        "set", "--tolerance", "0.01", "--alpha", "0.01", "--min-group-size", "30",
        "--reason", "Board decision", "--user", "erin",
    )  # fmt: skip
    assert text.startswith("Created fairness policy version 2; later verdicts are judged under it.\n")
    policy = policy_active()
    assert policy.as_document() == {
        "version": 2,
        "tolerance": 0.01,
        "alpha": 0.01,
        "metrics": ["tpr"],
        "reference_rule": "largest",
        "min_group_size": 30,
    }
    assert (policy.created_by, policy.reason) == (erin, "Board decision")
    assert Event.objects.filter(verb=Verb.FAIRNESS_POLICY_CREATED, actor=erin).count() == 1
    assert policy.approval_quorum == 2  # carried over
    _run("set", "--approval-quorum", "3", "--reason", "three signatures", "--user", "erin")
    assert policy_active().approval_quorum == 3
    assert "approval quorum 3 committee members" in _run("show")
    _run("set", "--min-group-size", "40", "--reason", "larger groups", "--user", "erin")
    assert (policy_active().version, policy_active().min_group_size, policy_active().tolerance) == (4, 40, 0.01)
    history = _run("show", "--history")
    assert [line for line in history.splitlines() if line.startswith("Fairness policy")] == [
        "Fairness policy version 4 (active)",
        "Fairness policy version 3",
        "Fairness policy version 2",
        "Fairness policy version 1",
    ]


def test_without_user_it_is_refused_and_no_account_takes_the_administrator_role(db: None) -> None:
    # Before: the portal-cli account granted itself the administrator role ("role granted admin, by -").
    with pytest.raises(CommandError, match=r"^--user is required: name the administrator acting"):
        _run("set", "--tolerance", "0.1", "--reason", "operator")
    assert FairnessPolicy.objects.count() == 1
    assert not User.objects.filter(username=CLI_USERNAME).exists()
    assert not Event.objects.filter(verb=Verb.ROLE_GRANTED).exists()


@pytest.mark.django_db  # the member comes from a fixture fetched by name
@pytest.mark.parametrize("name", ["bob", "carol", "dave"])
def test_a_user_without_the_administrator_role_is_refused(name: str, request: pytest.FixtureRequest) -> None:
    request.getfixturevalue(name)
    with pytest.raises(CommandError, match=f"--user '{name}' does not hold the administrator role"):
        _run("set", "--tolerance", "0.1", "--reason", "no", "--user", name)
    assert FairnessPolicy.objects.count() == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tolerance", "1.5"], "--tolerance: the tolerance δ must be at least 0 and below 1, not 1.5"),
        (["--alpha", "0.6"], "--alpha: alpha must be above 0 and at most 0.5, not 0.6"),
        (["--metrics", "fpr,ppv"], "--metrics: the metrics must include tpr: trial verdicts judge recall"),
        (["--metrics", "tpr,auc"], f"--metrics: {ONE_OF} auc"),
        (["--min-group-size", "0"], f"--min-group-size: {POSITIVE} 0"),
        (["--tolerance", "0.05"], "nothing changed: version 1 already has these values"),
    ],
)  # fmt: skip
def test_bad_values_name_the_option(erin: User, args: list[str], message: str) -> None:
    with pytest.raises(CommandError) as caught:
        _run("set", *args, "--reason", "because", "--user", "erin")
    assert str(caught.value).startswith(message)
    assert FairnessPolicy.objects.count() == 1


def test_an_empty_reason_names_the_option(erin: User) -> None:
    with pytest.raises(CommandError, match=r"^--reason: give a reason for the new version"):
        _run("set", "--tolerance", "0.1", "--reason", " ", "--user", "erin")
