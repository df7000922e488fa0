"""A deployment's monitor policy: versioned and audited like the fairness policy. A tightening applies
at once; a loosening is a proposal that a different administrator confirms (two-person rule)."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied

from auditportal.accounts.models import Role, User
from auditportal.activity.models import Event, Verb
from auditportal.monitoring import selectors, services
from auditportal.monitoring.models import Deployment, MonitorPolicy, MonitorPolicyProposal
from auditportal.monitoring.services import MonitorPolicyError
from auditportal.monitoring.spec import MonitorSpec, SpecError
from tests.factories import make_user


@pytest.fixture
def iris(db: None) -> User:
    """A second administrator."""
    return make_user("iris", [Role.ADMIN])


def _active(deployment: Deployment) -> MonitorPolicy:
    return selectors.monitor_policy_active(deployment=deployment)


def test_a_tightening_is_the_next_version_at_once_with_its_event(deployment: Deployment, erin: User) -> None:
    made = services.monitor_policy_create(
        user=erin, deployment=deployment, changes={"limits": {"fnr": {"upper": 0.04}}}, reason="Tighter FNR"
    )
    assert isinstance(made, MonitorPolicy)
    assert (made.version, made.created_by, made.confirmed_by, made.reason) == (2, erin, None, "Tighter FNR")
    assert made.monitor_spec.fnr.upper == 0.04
    assert _active(deployment) == made
    assert [p.version for p in selectors.monitor_policy_history(deployment=deployment)] == [2, 1]
    event = Event.objects.get(verb=Verb.MONITOR_POLICY_CREATED)
    assert (event.actor, event.data["deployment"], event.data["version"], event.data["spec"]) == (
        erin,
        "credit-scoring/prod",
        2,
        made.spec,
    )


def test_a_loosening_waits_for_a_second_administrator(deployment: Deployment, erin: User, iris: User) -> None:
    made = services.monitor_policy_create(
        user=erin, deployment=deployment, changes={"limits": {"fnr": {"upper": 0.08}}, "alpha": 0.01}, reason="Noisy"
    )
    assert isinstance(made, MonitorPolicyProposal)
    assert made.loosens == ["limits.fnr.upper", "alpha"]
    assert _active(deployment).version == 1
    proposed = Event.objects.get(verb=Verb.MONITOR_POLICY_PROPOSED)
    assert (proposed.actor, proposed.data["loosens"], proposed.data["base_version"]) == (
        erin,
        ["limits.fnr.upper", "alpha"],
        1,
    )

    with pytest.raises(PermissionDenied, match=f"You proposed monitor policy proposal #{made.pk}"):
        services.monitor_policy_proposal_confirm(user=erin, proposal=made)
    assert _active(deployment).version == 1

    policy = services.monitor_policy_proposal_confirm(user=iris, proposal=made)
    assert (policy.version, policy.created_by, policy.confirmed_by, policy.proposal) == (2, erin, iris, made)
    assert policy.monitor_spec == MonitorSpec().changed({"limits": {"fnr": {"upper": 0.08}}, "alpha": 0.01})
    assert _active(deployment) == policy
    confirmed = Event.objects.get(verb=Verb.MONITOR_POLICY_PROPOSAL_CONFIRMED)
    assert (confirmed.data["proposed_by"], confirmed.data["confirmed_by"]) == ("erin", "iris")
    assert selectors.monitor_policy_proposal_state(made, active=policy) == "confirmed"
    with pytest.raises(MonitorPolicyError, match="it was already confirmed by iris"):
        services.monitor_policy_proposal_withdraw(user=erin, proposal=made)


def test_a_proposal_made_against_an_older_version_is_stale_and_only_withdrawn(
    deployment: Deployment, erin: User, iris: User
) -> None:
    proposal = services.monitor_policy_create(
        user=erin, deployment=deployment, changes={"horizon": 500}, reason="Shorter horizon"
    )
    assert isinstance(proposal, MonitorPolicyProposal)
    services.monitor_policy_create(user=iris, deployment=deployment, changes={"min_group_rows": 50}, reason="More")
    assert selectors.monitor_policy_proposal_state(proposal, active=_active(deployment)) == "stale"
    with pytest.raises(MonitorPolicyError, match="is stale: it was made against version 1, but version 2 is active"):
        services.monitor_policy_proposal_confirm(user=iris, proposal=proposal)
    services.monitor_policy_proposal_withdraw(user=erin, proposal=proposal)
    assert Event.objects.get(verb=Verb.MONITOR_POLICY_PROPOSAL_WITHDRAWN).actor == erin
    assert not selectors.monitor_policy_proposals(deployment=deployment, open_only=True).exists()


@pytest.mark.parametrize("who", ["bob", "carol", "dave"])
def test_only_administrators_change_a_monitor_policy(
    deployment: Deployment, who: str, request: pytest.FixtureRequest
) -> None:
    user: User = request.getfixturevalue(who)
    with pytest.raises(PermissionDenied, match="Only an administrator can change a deployment's monitor policy"):
        services.monitor_policy_create(user=user, deployment=deployment, changes={"alpha": 0.1}, reason="x")
    assert MonitorPolicy.objects.filter(deployment=deployment).count() == 1


def test_bad_changes_name_their_value_and_change_nothing(deployment: Deployment, erin: User) -> None:
    with pytest.raises(SpecError) as refused:
        services.monitor_policy_create(
            user=erin, deployment=deployment, changes={"limits": {"fnr": {"upper": 2}}}, reason="x"
        )
    assert refused.value.field == "limits.fnr.upper"
    with pytest.raises(MonitorPolicyError, match="The reason is required") as missing:
        services.monitor_policy_create(user=erin, deployment=deployment, changes={"alpha": 0.1}, reason=" ")
    assert missing.value.field == "reason"
    with pytest.raises(MonitorPolicyError, match="Nothing changed: version 1 already has these values"):
        services.monitor_policy_create(user=erin, deployment=deployment, changes={"alpha": 0.05}, reason="same")
    assert MonitorPolicy.objects.filter(deployment=deployment).count() == 1
    assert not MonitorPolicyProposal.objects.exists()


def test_each_deployment_has_its_own_versions(deployment: Deployment, bob: User, erin: User) -> None:
    other = services.deployment_create(user=bob, name="credit-scoring/staging")
    services.monitor_policy_create(user=erin, deployment=other, changes={"alpha": 0.1}, reason="Staging is noisy")
    assert (_active(deployment).version, _active(other).version) == (1, 2)
