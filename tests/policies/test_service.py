"""policy_create: administrators only, validated, versioned, with its event; values carry over."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied
from django.db import connection

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.policies.models import FairnessPolicy
from auditportal.policies.selectors import policy_active
from auditportal.policies.services import PolicyError, policy_create
from tests.policies.helpers import policy_change

ONE_OF = "the metrics are one or more of tpr, fpr, equalized_odds, selection_rate, ppv, not"
NEEDS_TPR = "the metrics must include tpr: trial verdicts judge recall (the trainer's EOD)"
NO_REASON = "give a reason for the new version: it is shown in the policy's history"


def test_version_1_is_seeded_from_the_settings(db: None) -> None:
    (policy,) = FairnessPolicy.objects.all()
    assert policy.as_document() == {
        "version": 1,
        "tolerance": 0.05,
        "alpha": 0.05,
        "metrics": ["tpr"],
        "reference_rule": "largest",
        "min_group_size": None,
    }
    assert policy.created_by is None


def test_the_default_judges_equal_opportunity_and_an_administrator_adds_fpr_at_once(erin: User) -> None:
    assert policy_active().metrics == ["tpr"]  # the TPR gap: the EOD the trainer reports and optimises
    policy = policy_create(user=erin, metrics=["tpr", "fpr"], reason="false positives harm patients here")
    assert isinstance(policy, FairnessPolicy)  # judging more tightens: no second administrator
    assert (policy_active(), policy.version, policy.metrics) == (policy, 2, ["tpr", "fpr"])


def test_an_administrator_creates_the_next_version_with_an_event(erin: User) -> None:
    policy = policy_create(user=erin, tolerance=0.01, alpha=0.01, reason="  Board decision 2026-11  ")
    assert isinstance(policy, FairnessPolicy)  # it only tightens: at once
    assert policy_active() == policy
    assert (policy.version, policy.tolerance, policy.alpha, policy.created_by) == (2, 0.01, 0.01, erin)
    assert policy.confirmed_by is None
    assert policy.reason == "Board decision 2026-11"
    event = Event.objects.get(verb=Verb.FAIRNESS_POLICY_CREATED, actor=erin)
    assert (event.target_type, event.target_id) == ("policies.fairnesspolicy", str(policy.pk))
    assert event.data == {**policy.as_document(), "approval_quorum": 2, "reason": "Board decision 2026-11"}


def test_values_not_given_carry_over_from_the_active_version(erin: User) -> None:
    policy_change(user=erin, tolerance=0.1, metrics=["tpr", "fpr"], min_group_size=30, reason="first")
    second = policy_change(user=erin, alpha=0.01, reason="second")
    assert second.as_document() == {
        "version": 3,
        "tolerance": 0.1,
        "alpha": 0.01,
        "metrics": ["tpr", "fpr"],
        "reference_rule": "largest",
        "min_group_size": 30,
    }
    third = policy_change(user=erin, min_group_size=None, reason="no minimum")
    assert (third.version, third.min_group_size, third.tolerance) == (4, None, 0.1)


def test_metrics_are_kept_in_one_order_without_repeats(erin: User) -> None:
    policy = policy_change(user=erin, metrics=["ppv", " tpr", "ppv"], reason="order")
    assert policy.metrics == ["tpr", "ppv"]


@pytest.mark.django_db  # the member comes from a fixture fetched by name
@pytest.mark.parametrize("name", ["bob", "carol", "dave", "alice", "oscar"])
def test_only_an_administrator_may_change_the_policy(name: str, request: pytest.FixtureRequest) -> None:
    user: User = request.getfixturevalue(name)
    with pytest.raises(PermissionDenied, match=r"^Only an administrator can change the fairness policy\.$"):
        policy_create(user=user, tolerance=0.1, reason="no")
    assert FairnessPolicy.objects.count() == 1
    assert not Event.objects.filter(verb=Verb.FAIRNESS_POLICY_CREATED, actor__isnull=False).exists()


QUORUM = "the approval quorum must be a whole number of committee members from 1 to 20, not"


@pytest.mark.parametrize(
    ("values", "field", "message"),
    [
        ({"tolerance": 1.0}, "tolerance", "the tolerance δ must be at least 0 and below 1, not 1.0"),
        ({"tolerance": -0.01}, "tolerance", "the tolerance δ must be at least 0 and below 1, not -0.01"),
        ({"tolerance": float("nan")}, "tolerance", "the tolerance δ must be at least 0 and below 1, not nan"),
        ({"alpha": 0}, "alpha", "alpha must be above 0 and at most 0.5, not 0"),
        ({"alpha": 0.51}, "alpha", "alpha must be above 0 and at most 0.5, not 0.51"),
        ({"metrics": []}, "metrics", f"{ONE_OF} none"),
        ({"metrics": ["tpr", "auc"]}, "metrics", f"{ONE_OF} auc"),
        ({"metrics": ["fpr", "ppv"]}, "metrics", NEEDS_TPR),
        ({"min_group_size": 0}, "min_group_size", "the minimum group size must be a positive integer or none, not 0"),
        ({"reference_rule": "smallest"}, "reference_rule", "the reference rule is one of largest, not 'smallest'"),
        ({"approval_quorum": 0}, "approval_quorum", f"{QUORUM} 0"),
        ({"approval_quorum": 21}, "approval_quorum", f"{QUORUM} 21"),
        ({"approval_quorum": True}, "approval_quorum", f"{QUORUM} True"),
        ({"tolerance": 0.1, "reason": "  "}, "reason", NO_REASON),
        ({"tolerance": 0.05, "alpha": 0.05}, None, "nothing changed: version 1 already has these values"),
        ({}, None, "nothing changed: version 1 already has these values"),
    ],
)  # fmt: skip
def test_impossible_or_empty_changes_are_refused(
    erin: User, values: dict[str, Any], field: str | None, message: str
) -> None:
    with pytest.raises(PolicyError) as caught:
        policy_create(user=erin, **{"reason": "because", **values})
    assert (caught.value.field, str(caught.value)) == (field, message)
    assert FairnessPolicy.objects.count() == 1


def test_going_back_to_earlier_values_is_a_new_version(erin: User) -> None:
    policy_change(user=erin, tolerance=0.1, reason="looser")
    back = policy_change(user=erin, tolerance=0.05, reason="back to the seed")
    assert (back.version, back.tolerance) == (3, 0.05)
    assert list(FairnessPolicy.objects.values_list("version", flat=True)) == [3, 2, 1]


@pytest.mark.django_db(transaction=True)
def test_two_administrators_at_once_each_get_a_version(erin: User) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SQLite serialises writers; the race needs PostgreSQL")
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    # Two tightenings of different values: the later one, re-read against the earlier, still only
    # tightens. (Two tolerances would not do: the second, larger one loosens the first and becomes a
    # proposal, as it should.)
    def create(field: str) -> None:
        try:
            barrier.wait()
            values: dict[str, Any] = {field: 0.01}
            policy_create(user=erin, reason=f"lower {field}", **values)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=create, args=(field,)) for field in ("tolerance", "alpha")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    rows = {
        version: (tolerance, alpha)
        for version, tolerance, alpha in FairnessPolicy.objects.values_list("version", "tolerance", "alpha")
    }
    assert sorted(rows) == [1, 2, 3]
    assert rows[2] in {(0.01, 0.05), (0.05, 0.01)}
    assert rows[3] == (0.01, 0.01)
    assert Event.objects.filter(verb=Verb.FAIRNESS_POLICY_CREATED, actor=erin).count() == 2
