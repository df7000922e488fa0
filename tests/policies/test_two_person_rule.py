"""The two-person rule: a policy change that loosens governance is a proposal until a different
administrator confirms it; tightening applies at once (docs/governance.md)."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from auditportal.accounts.models import Role, User
from auditportal.activity.models import Event, Verb
from auditportal.approvals import services as approval_services
from auditportal.approvals.models import RequestState, ReviewRequest
from auditportal.evidence.selectors import verdict_document_of_audit
from auditportal.policies.models import FairnessPolicy, PolicyProposal, PolicyProposalClosure
from auditportal.policies.rules import policy_loosenings
from auditportal.policies.selectors import policy_active
from auditportal.policies.services import (
    PolicyError,
    policy_create,
    policy_proposal_confirm,
    policy_proposal_withdraw,
)
from tests.approvals.conftest import in_review, vote
from tests.factories import PredictionAuditFactory, client_for, make_user
from tests.policies.helpers import judge_every_metric

API = "/api/v1/policy/"
SEED = {
    "tolerance": 0.05,
    "alpha": 0.05,
    "metrics": ["tpr", "fpr", "equalized_odds", "selection_rate", "ppv"],
    "reference_rule": "largest",
    "min_group_size": 30,
    "approval_quorum": 2,
}


@pytest.fixture
def irene(db: None) -> User:
    """A second administrator."""
    return make_user("irene", [Role.ADMIN])


def _propose(user: User, **values: Any) -> PolicyProposal:
    made = policy_create(user=user, reason="why not", **values)
    assert isinstance(made, PolicyProposal)
    return made


def _request(engineer: User) -> ReviewRequest:
    """A review request for an audit judged under the active policy (the request is bound to it)."""
    audit = PredictionAuditFactory.create(created_by=engineer)
    return approval_services.review_request_create(
        user=engineer,
        title="Vendor scoring model",
        intended_use="Ranking applications for manual review",
        documents=[verdict_document_of_audit(audit=audit)],
        model_identifier="vendor-score:2.1",
    )


# -- what loosens ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "loosens"),
    [
        ({"tolerance": 0.1}, ["tolerance"]),
        ({"tolerance": 0.01}, []),
        ({"alpha": 0.1}, ["alpha"]),
        ({"alpha": 0.01}, []),
        ({"metrics": ["tpr", "fpr"]}, ["metrics"]),
        ({"metrics": ["tpr", "fpr", "ppv", "selection_rate", "equalized_odds"]}, []),
        ({"reference_rule": "smallest"}, ["reference_rule"]),
        ({"min_group_size": 20}, ["min_group_size"]),
        ({"min_group_size": None}, ["min_group_size"]),
        ({"min_group_size": 40}, []),
        ({"approval_quorum": 1}, ["approval_quorum"]),
        ({"approval_quorum": 3}, []),
        ({"tolerance": 0.01, "approval_quorum": 1, "alpha": 0.5}, ["alpha", "approval_quorum"]),
    ],
)
def test_policy_loosenings_names_each_loosened_value(changes: dict[str, Any], loosens: list[str]) -> None:
    assert policy_loosenings(SEED, {**SEED, **changes}) == loosens


def test_no_minimum_group_size_before_is_never_loosened() -> None:
    assert policy_loosenings({**SEED, "min_group_size": None}, {**SEED, "min_group_size": 1}) == []


# -- the finding: one administrator lowers the quorum, then one vote approves ---------------------


def test_one_administrator_lowering_the_quorum_does_not_let_one_vote_approve(
    erin: User, bob: User, carol: User, dave: User, dataset_storage: Path
) -> None:
    policy_create(user=erin, approval_quorum=1, reason="faster approvals")
    assert policy_active().approval_quorum == 2
    request = vote(in_review(_request(bob), carol), dave)
    assert request.state == RequestState.IN_REVIEW  # one approval of a quorum of two
    assert not Event.objects.filter(verb=Verb.REVIEW_REQUEST_APPROVED).exists()


def test_a_second_administrators_confirmation_lowers_the_quorum(
    erin: User, irene: User, bob: User, carol: User, dave: User, dataset_storage: Path
) -> None:
    proposal = _propose(erin, approval_quorum=1)
    policy_proposal_confirm(user=irene, proposal=proposal)
    assert policy_active().approval_quorum == 1
    request = vote(in_review(_request(bob), carol), dave)
    assert request.state == RequestState.APPROVED


# -- proposals, confirmation, withdrawal ------------------------------------------------------------


def test_a_loosening_is_a_pending_proposal_with_its_event(erin: User) -> None:
    proposal = _propose(erin, approval_quorum=1, min_group_size=50)
    assert (policy_active().version, FairnessPolicy.objects.count()) == (1, 1)
    assert (proposal.base.version, proposal.proposed_by, proposal.loosens) == (1, erin, ["approval_quorum"])
    assert (proposal.approval_quorum, proposal.min_group_size, proposal.tolerance) == (1, 50, 0.05)
    event = Event.objects.get(verb=Verb.FAIRNESS_POLICY_PROPOSED)
    assert (event.actor, event.target_type, event.target_id) == (erin, "policies.policyproposal", str(proposal.pk))
    assert event.data == {
        "base_version": 1, **proposal.values(), "loosens": ["approval_quorum"], "reason": "why not"
    }  # fmt: skip
    assert not Event.objects.filter(verb=Verb.FAIRNESS_POLICY_CREATED, actor=erin).exists()


def test_a_different_administrator_confirms_and_both_are_recorded(erin: User, irene: User) -> None:
    judge_every_metric(erin)  # version 2 (the default judges tpr only): judging fewer then loosens
    proposal = _propose(erin, tolerance=0.1, metrics=["tpr", "fpr"])
    proposed = PolicyProposal.objects.values().get(pk=proposal.pk)
    policy = policy_proposal_confirm(user=irene, proposal=proposal)
    assert policy_active() == policy
    assert (policy.version, policy.tolerance, policy.metrics) == (3, 0.1, ["tpr", "fpr"])
    assert (policy.created_by, policy.confirmed_by, policy.proposal) == (erin, irene, proposal)
    assert policy.reason == "why not"
    assert PolicyProposal.objects.values().get(pk=proposal.pk) == proposed  # never edited
    closure = PolicyProposalClosure.objects.get(proposal=proposal)
    assert (closure.outcome, closure.closed_by) == ("confirmed", irene)
    confirmed = Event.objects.get(verb=Verb.FAIRNESS_POLICY_PROPOSAL_CONFIRMED)
    assert (confirmed.actor, confirmed.target_id) == (irene, str(proposal.pk))
    assert confirmed.data == {
        "version": 3, "loosens": ["tolerance", "metrics"], "proposed_by": "erin", "confirmed_by": "irene"
    }  # fmt: skip
    created = Event.objects.get(verb=Verb.FAIRNESS_POLICY_CREATED, actor=irene)
    assert created.data == {
        **policy.as_json(), "reason": "why not", "proposal": proposal.pk, "proposed_by": "erin", "confirmed_by": "irene"
    }  # fmt: skip
    assert confirmed.seq < created.seq


def test_the_proposer_cannot_confirm_their_own_proposal(erin: User) -> None:
    proposal = _propose(erin, approval_quorum=1)
    before = Event.objects.count()
    message = rf"^You proposed fairness policy proposal #{proposal.pk}: a different administrator must confirm it"
    with pytest.raises(PermissionDenied, match=message):
        policy_proposal_confirm(user=erin, proposal=proposal)
    assert (policy_active().version, Event.objects.count()) == (1, before)
    assert not PolicyProposalClosure.objects.exists()


@pytest.mark.parametrize("name", ["bob", "carol", "dave", "alice"])
def test_only_an_administrator_confirms_or_withdraws(name: str, erin: User, request: pytest.FixtureRequest) -> None:
    user: User = request.getfixturevalue(name)
    proposal = _propose(erin, approval_quorum=1)
    for service in (policy_proposal_confirm, policy_proposal_withdraw):
        with pytest.raises(PermissionDenied, match=r"^Only an administrator can change the fairness policy\.$"):
            service(user=user, proposal=proposal)
    assert not PolicyProposalClosure.objects.exists()


def test_tightening_applies_at_once(erin: User) -> None:
    policy = policy_create(
        user=erin, tolerance=0.02, alpha=0.01, min_group_size=30, approval_quorum=3, reason="stricter"
    )
    assert isinstance(policy, FairnessPolicy)
    assert (policy_active(), policy.created_by, policy.confirmed_by) == (policy, erin, None)
    assert not PolicyProposal.objects.exists()
    assert Event.objects.filter(verb=Verb.FAIRNESS_POLICY_CREATED, actor=erin).count() == 1


def test_a_proposal_against_an_older_version_is_stale_and_cannot_be_confirmed(erin: User, irene: User) -> None:
    proposal = _propose(erin, approval_quorum=1)
    policy_create(user=irene, tolerance=0.01, reason="stricter meanwhile")  # version 2, at once
    with pytest.raises(PolicyError) as caught:
        policy_proposal_confirm(user=irene, proposal=proposal)
    assert str(caught.value) == (
        f"proposal #{proposal.pk} is stale: it was made against version 1, but version 2 is active now; "
        "withdraw it and propose the change again"
    )
    assert (policy_active().version, policy_active().approval_quorum) == (2, 2)
    assert not Event.objects.filter(verb=Verb.FAIRNESS_POLICY_PROPOSAL_CONFIRMED).exists()
    policy_proposal_withdraw(user=irene, proposal=proposal)
    assert PolicyProposalClosure.objects.get(proposal=proposal).outcome == "withdrawn"


def test_a_withdrawn_proposal_stays_and_cannot_be_confirmed(erin: User, irene: User) -> None:
    proposal = _propose(erin, alpha=0.1)
    policy_proposal_withdraw(user=erin, proposal=proposal)
    withdrawn = Event.objects.get(verb=Verb.FAIRNESS_POLICY_PROPOSAL_WITHDRAWN)
    assert (withdrawn.actor, withdrawn.target_id) == (erin, str(proposal.pk))
    assert withdrawn.data == {"base_version": 1, "proposed_by": "erin"}
    already = rf"^proposal #{proposal.pk} cannot be confirmed: it was already withdrawn by erin$"
    with pytest.raises(PolicyError, match=already):
        policy_proposal_confirm(user=irene, proposal=proposal)
    assert PolicyProposal.objects.filter(pk=proposal.pk).exists()
    assert policy_active().version == 1


def test_a_confirmed_proposal_cannot_be_confirmed_again_or_withdrawn(erin: User, irene: User) -> None:
    proposal = _propose(erin, alpha=0.1)
    policy_proposal_confirm(user=irene, proposal=proposal)
    third = make_user("jack", [Role.ADMIN])
    with pytest.raises(PolicyError, match=r"cannot be confirmed: it was already confirmed by irene$"):
        policy_proposal_confirm(user=third, proposal=proposal)
    with pytest.raises(PolicyError, match=r"cannot be withdrawn: it was already confirmed by irene$"):
        policy_proposal_withdraw(user=erin, proposal=proposal)
    assert FairnessPolicy.objects.count() == 2


# -- the API ----------------------------------------------------------------------------------------


def test_the_api_answers_a_loosening_with_202_and_the_proposal(erin: User, irene: User, bob: User) -> None:
    response = client_for(erin).post(API, {"approval_quorum": 1, "reason": "faster"}, content_type="application/json")
    assert response.status_code == 202, response.content.decode()
    body = response.json()
    proposal = PolicyProposal.objects.get()
    assert body == {
        "id": proposal.pk, "state": "pending", "base_version": 1, **proposal.values(), "loosens": ["approval_quorum"],
        "reason": "faster", "proposed_by": "erin", "proposed_at": proposal.proposed_at.isoformat(),
        "closed_by": None, "closed_at": None, "version": None,
    }  # fmt: skip
    assert policy_active().version == 1
    listed = client_for(bob).get(f"{API}proposals/")
    assert listed.status_code == 200
    assert [item["id"] for item in listed.json()] == [proposal.pk]

    confirm = f"{API}proposals/{proposal.pk}/confirm/"
    own = client_for(erin).post(confirm)
    assert own.status_code == 403
    assert own.json()["detail"].startswith(f"You proposed fairness policy proposal #{proposal.pk}")
    assert client_for(bob).post(confirm).status_code == 403
    done = client_for(irene).post(confirm)
    assert done.status_code == 200, done.content.decode()
    assert (done.json()["version"], done.json()["approval_quorum"]) == (2, 1)
    assert (done.json()["created_by"], done.json()["confirmed_by"], done.json()["proposal"]) == (
        "erin", "irene", proposal.pk,
    )  # fmt: skip
    (item,) = client_for(bob).get(f"{API}proposals/").json()
    assert (item["state"], item["closed_by"], item["version"]) == ("confirmed", "irene", 2)
    assert client_for(irene).post(f"{API}proposals/999/confirm/").status_code == 404


def test_the_api_refuses_a_stale_proposal_and_withdraws_it(erin: User, irene: User) -> None:
    proposal = _propose(erin, tolerance=0.2)
    policy_create(user=erin, min_group_size=10, reason="stricter")
    (item,) = client_for(irene).get(f"{API}proposals/").json()
    assert item["state"] == "stale"
    response = client_for(irene).post(f"{API}proposals/{proposal.pk}/confirm/")
    assert response.status_code == 400
    assert response.json()["detail"].startswith(f"proposal #{proposal.pk} is stale: it was made against version 1")
    response = client_for(irene).post(f"{API}proposals/{proposal.pk}/withdraw/")
    assert response.status_code == 200
    assert (response.json()["state"], response.json()["closed_by"]) == ("withdrawn", "irene")


# -- the page -----------------------------------------------------------------------------------------


def test_the_page_shows_a_pending_proposal_and_what_it_loosens(erin: User, irene: User, bob: User) -> None:
    client = client_for(erin)
    response = client.post(
        reverse("policies:page"),
        {
            "tolerance": "0.05", "alpha": "0.05", "metrics": ["tpr", "fpr", "equalized_odds", "selection_rate", "ppv"],
            "min_group_size": "", "approval_quorum": "1", "reason": "faster approvals",
        },
    )  # fmt: skip
    assert response.status_code == 302
    proposal = PolicyProposal.objects.get()
    html = client.get(reverse("policies:page")).content.decode()
    assert f"Proposal #{proposal.pk} loosens the policy (approval_quorum)" in html
    assert f'id="proposal-{proposal.pk}" data-state="pending"' in html
    assert "a lower approval quorum (fewer committee members decide): <code>2</code> → <code>1</code>" in html
    assert "Waiting for an administrator other than erin to confirm it." in html
    assert 'class="inline confirm-proposal"' not in html  # not for the proposer
    assert 'class="inline withdraw-proposal"' in html
    member = client_for(bob).get(reverse("policies:page")).content.decode()
    assert f'id="proposal-{proposal.pk}"' in member
    assert "confirm-proposal" not in member
    assert "withdraw-proposal" not in member

    confirm = reverse("policies:proposal-confirm", args=[proposal.pk])
    assert client.post(confirm).status_code == 403
    assert client_for(bob).post(confirm).status_code == 403
    other = client_for(irene)
    assert 'class="inline confirm-proposal"' in other.get(reverse("policies:page")).content.decode()
    assert other.post(confirm).status_code == 302
    html = other.get(reverse("policies:page")).content.decode()
    assert "Fairness policy version 2 is active (proposed by erin, confirmed by you)" in html
    assert "erin, confirmed by irene" in html
    assert 'id="policy-proposals"' not in html
    assert policy_active().approval_quorum == 1


def test_the_page_withdraws_and_says_why_a_confirmation_failed(erin: User, irene: User) -> None:
    proposal = _propose(erin, alpha=0.2)
    policy_create(user=erin, alpha=0.01, reason="stricter")
    client = client_for(irene)
    html = client.get(reverse("policies:page")).content.decode()
    assert f'id="proposal-{proposal.pk}" data-state="stale"' in html
    assert 'class="inline confirm-proposal"' not in html
    response = client.post(reverse("policies:proposal-confirm", args=[proposal.pk]), follow=True)
    assert f"proposal #{proposal.pk} is stale" in response.content.decode()
    response = client.post(reverse("policies:proposal-withdraw", args=[proposal.pk]), follow=True)
    assert f"Proposal #{proposal.pk} is withdrawn; the policy is unchanged." in response.content.decode()
    assert client.get(reverse("policies:proposal-withdraw", args=[proposal.pk])).status_code == 405


# -- the command line ---------------------------------------------------------------------------------


def _run(*args: str) -> str:
    out = StringIO()
    call_command("fairness_policy", *args, stdout=out)
    return out.getvalue()


def test_the_command_proposes_and_a_second_administrator_confirms(erin: User, irene: User) -> None:
    text = _run("set", "--approval-quorum", "1", "--reason", "faster", "--user", "erin")
    proposal = PolicyProposal.objects.get()
    assert text == (
        f"Proposed #{proposal.pk}: it loosens approval_quorum, so it takes effect only when a different "
        f"administrator runs `fairness_policy confirm {proposal.pk} --user NAME`.\n"
    )
    assert policy_active().version == 1
    assert f"Proposal #{proposal.pk} (pending, against version 1, by erin) loosens approval_quorum" in _run("show")
    with pytest.raises(CommandError, match=f"^You proposed fairness policy proposal #{proposal.pk}"):
        _run("confirm", str(proposal.pk), "--user", "erin")
    with pytest.raises(CommandError, match=r"^ID 999: no such fairness policy proposal$"):
        _run("confirm", "999", "--user", "irene")
    text = _run("confirm", str(proposal.pk), "--user", "irene")
    assert text.startswith(f"Confirmed proposal #{proposal.pk}: version 2 is active.\n")
    assert "by erin, confirmed by irene" in text
    assert policy_active().approval_quorum == 1


def test_the_command_withdraws_a_proposal(erin: User, irene: User) -> None:
    _run("set", "--tolerance", "0.2", "--reason", "looser", "--user", "erin")
    proposal = PolicyProposal.objects.get()
    assert _run("withdraw", str(proposal.pk), "--user", "irene") == (
        f"Withdrew proposal #{proposal.pk}; the policy is unchanged.\n"
    )
    with pytest.raises(CommandError, match="cannot be confirmed: it was already withdrawn by irene"):
        _run("confirm", str(proposal.pk), "--user", "irene")
