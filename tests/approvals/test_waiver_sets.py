"""Waiver sets: one waiver (one reason, one expiry, one quorum vote) covers a set of FAIL comparisons,
stored comparison by comparison; a comparison has one live waiver per round; the approve refusal says
everything still missing at once."""

from __future__ import annotations

import pytest

from auditportal.accounts.models import User
from auditportal.activity.models import Event, Verb
from auditportal.approvals import selectors, services
from auditportal.approvals.context import review_request_context
from auditportal.approvals.models import (
    RequestState,
    ReviewRequest,
    VoteChoice,
    WaivedComparison,
    Waiver,
    WaiverState,
)
from auditportal.fairness.documents.findings import FAIL, INCONCLUSIVE
from tests.approvals.conftest import days_from_now, hashes, keys, vote
from tests.factories import PASSWORD


def _propose(request: ReviewRequest, user: User, **scope: object) -> Waiver:
    return services.waiver_propose(
        user=user,
        request=request,
        reason="the gap is explained by the vendor's data",
        compensating_measures="manual review of every rejection",
        expires_on=days_from_now(60),
        **scope,  # type: ignore[arg-type]
    )


def _cast(waiver: Waiver, member: User, request: ReviewRequest, choice: str = VoteChoice.APPROVE) -> None:
    services.waiver_vote_cast(
        user=member,
        waiver=waiver,
        choice=choice,
        reason="acceptable with manual review",
        password=PASSWORD,
        document_sha256=hashes(request),
    )


def test_one_waiver_covers_a_family_of_fail_comparisons_with_one_vote(
    family_request: ReviewRequest, carol: User, dave: User, frank: User
) -> None:
    request = family_request
    fails = [s.finding for s in selectors.review_request_findings(request=request) if s.finding.verdict == FAIL]
    assert [(f.attribute, f.metric, f.group) for f in fails] == [
        ("gender", "tpr", "female"),
        ("gender", "tpr", "nonbinary"),
    ]
    waiver = _propose(request, carol, finding_keys=[f.key for f in fails])
    scope = list(waiver.comparisons.order_by("id"))
    assert [(c.finding_key, c.group, c.reference, c.document_id) for c in scope] == [
        (f.key, f.group, "male", request.documents.get().pk) for f in fails
    ]
    assert waiver.label == "gender: tpr of female, nonbinary against male"
    proposed = Event.objects.get(verb=Verb.WAIVER_PROPOSED)
    assert [item["comparison"] for item in proposed.data["comparisons"]] == [f.label for f in fails]
    assert [item["key"] for item in proposed.data["comparisons"]] == [f.key for f in fails]

    _cast(waiver, dave, request)
    _cast(waiver, frank, request)
    waiver.refresh_from_db()
    assert waiver.state == WaiverState.APPROVED  # two signatures for the whole family, not two per comparison
    approved = Event.objects.get(verb=Verb.WAIVER_APPROVED)
    assert [item["key"] for item in approved.data["comparisons"]] == [f.key for f in fails]
    statuses = [s for s in selectors.review_request_findings(request=request) if s.finding.verdict == FAIL]
    assert [(s.waiver, s.waived) for s in statuses] == [(waiver, True), (waiver, True)]

    vote(request, dave)
    vote(request, frank)
    assert request.state == RequestState.APPROVED
    decided = Event.objects.get(verb=Verb.REVIEW_REQUEST_APPROVED)
    assert decided.data["waivers"] == [waiver.pk]
    # The signed report names each waived comparison (and counts them), with its waiver.
    context = review_request_context(request=request)
    short = request.documents.get().sha256[:12]
    assert [item.scope for item in context.waivers] == [
        f"gender: tpr of {group} against male (document {short}; waiver #{waiver.pk})"
        for group in ("female", "nonbinary")
    ]
    assert {item.reason for item in context.waivers} == {
        "the gap is explained by the vendor's data Compensating measures: manual review of every rejection"
    }
    assert "2 failing items were accepted by a waiver" in " ".join(context.summary)


def test_a_comparison_has_one_live_waiver_per_round_and_the_refusal_names_it(
    family_request: ReviewRequest, carol: User, dave: User, frank: User, gina: User
) -> None:
    request = family_request
    female, nonbinary = keys(request, FAIL)
    first = _propose(request, carol, finding_keys=[female])
    with pytest.raises(services.ApprovalError) as refused:
        _propose(request, carol, finding_keys=[nonbinary, female])
    assert refused.value.field == "finding_keys"
    assert str(refused.value) == (
        f"gender: tpr of female against male: waiver #{first.pk}, which covers it, is already proposed. "
        "A comparison has one live waiver per round: leave it out, or propose again once that waiver is rejected."
    )
    assert (Waiver.objects.count(), WaivedComparison.objects.count()) == (1, 1)
    second = _propose(request, carol, finding_keys=[nonbinary])  # the rest of the family is free
    for member in (dave, frank):
        _cast(first, member, request, VoteChoice.REJECT)
    first.refresh_from_db()
    assert first.state == WaiverState.REJECTED
    with pytest.raises(services.ApprovalError, match=rf"waiver #{second.pk}, which covers it, is already proposed"):
        _propose(request, carol, finding_keys=[female, nonbinary])
    third = _propose(request, carol, finding_keys=[female])  # a rejected waiver frees its comparisons
    assert [c.finding_key for c in third.comparisons.all()] == [female]
    assert gina  # a third member exists: the quorum stays 2


def test_what_cannot_be_waived_is_refused_naming_the_field(family_request: ReviewRequest, carol: User) -> None:
    request = family_request
    fail = keys(request, FAIL)[0]
    cases: list[tuple[dict[str, object], str, str]] = [
        ({"finding_keys": []}, "finding_keys", "Choose the FAIL comparisons the waiver covers."),
        ({}, "finding_keys", "Choose the FAIL comparisons the waiver covers."),
        ({"finding_keys": [fail], "finding_key": fail}, "finding_keys", "not both"),
        ({"finding_keys": [fail, "zzz", "yyy"]}, "finding_keys", "has no FAIL comparison with the keys 'zzz', 'yyy'"),
        ({"finding_key": "zzz"}, "finding_key", "has no FAIL comparison with the key 'zzz': only a judged FAIL"),
    ]
    inconclusive = keys(request, INCONCLUSIVE)
    if inconclusive:
        cases.append(({"finding_keys": inconclusive[:1]}, "finding_keys", "only a judged FAIL comparison"))
    for scope, field, message in cases:
        with pytest.raises(services.ApprovalError, match=message) as refused:
            _propose(request, carol, **scope)
        assert refused.value.field == field, scope
    assert not Waiver.objects.exists()


def test_a_single_finding_key_still_proposes_a_waiver_of_one_comparison(
    family_request: ReviewRequest, carol: User
) -> None:
    key = keys(family_request, FAIL)[1]
    waiver = _propose(family_request, carol, finding_key=key)
    assert (waiver.finding_key, waiver.group) == (key, "nonbinary")
    assert [c.finding_key for c in waiver.comparisons.all()] == [key]
    assert waiver.label == "gender: tpr of nonbinary against male"
    # The same key twice in a list is one comparison.
    other = _propose(family_request, carol, finding_keys=[keys(family_request, FAIL)[0]] * 2)
    assert other.comparisons.count() == 1


def test_the_approve_refusal_says_everything_still_missing_at_once(
    family_request: ReviewRequest, carol: User, dave: User
) -> None:
    request = family_request
    inconclusive = keys(request, INCONCLUSIVE)
    assert inconclusive, "the fixture has INCONCLUSIVE comparisons"
    with pytest.raises(services.ApprovalError) as refused:
        services.review_vote_cast(
            user=dave,
            request=request,
            choice="approve",
            reason="ok",
            password=PASSWORD,
            document_sha256=hashes(request),
            acknowledged=[],
        )
    message = str(refused.value)
    assert refused.value.field == "choice"
    assert "gender: tpr — 2 FAIL comparisons not waived (female, nonbinary)" in message
    if inconclusive:
        count = len(inconclusive)
        assert f"{count} INCONCLUSIVE comparison{'s' if count != 1 else ''} not acknowledged" in message
    assert message.startswith(f"Review request #{request.pk} can be approved only once every FAIL comparison has")
    assert not request.votes.exists()
