"""Waivers of judged FAIL comparisons: one waiver covers a set of them (a family's, or any chosen
set), proposed on a submitted or in-review request, voted on by the committee like the request itself
(signed votes, the same quorum and rule)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import UTC, date, datetime

from django.db import transaction
from django.utils import timezone

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.approvals.models import (
    ReviewRequest,
    VoteChoice,
    WaivedComparison,
    Waiver,
    WaiverState,
    WaiverVote,
)
from auditportal.approvals.rules import IllegalTransition, check, decide, quorum, tally_votes
from auditportal.approvals.services.common import ApprovalError, _choice, _findings, _fresh, _locked, _required
from auditportal.approvals.services.decision import _decide
from auditportal.approvals.services.votes import VOTER_ROLE, _confirmed_hashes, _reauthenticate
from auditportal.fairness.documents.findings import FAIL, Finding


def waiver_propose(
    *,
    user: User,
    request: ReviewRequest,
    reason: str,
    compensating_measures: str,
    expires_on: date,
    finding_keys: Sequence[str] | None = None,
    finding_key: str | None = None,
) -> Waiver:
    """Propose one waiver of a set of judged FAIL comparisons (``finding_keys``: e.g. every FAIL of one
    attribute and metric, or any chosen set; ``finding_key``, one key, as before sets) of a submitted or
    in-review request: why, the compensating measures, and the date it expires (at 00:00 UTC that day).
    The committee votes on the whole set at once, like on a request, with the same quorum.

    The scope is stored comparison by comparison (``WaivedComparison``). A comparison has at most one
    live (proposed or approved) waiver per round: checked here, under the request's row lock, against
    every comparison of every live waiver; the refusal names each comparison and its waiver."""
    field = "finding_key" if finding_keys is None and finding_key is not None else "finding_keys"
    keys = _keys_given(finding_keys, finding_key)
    reason = _required(reason, "reason")
    compensating_measures = _required(compensating_measures, "compensating_measures")
    expires_at = datetime.combine(expires_on, datetime.min.time(), tzinfo=UTC)
    if expires_at <= timezone.now():
        raise ApprovalError(
            f"The expiry date {expires_on.isoformat()} has passed; give a later one.", field="expires_on"
        )
    with transaction.atomic():
        request = _locked(request)
        check(user, request, "propose_waiver")
        documents = list(request.documents.order_by("id"))
        fails = {f.key: f for f in _findings(documents) if f.verdict == FAIL}
        unknown = [key for key in keys if key not in fails]
        if unknown:
            listed = ", ".join(repr(key) for key in unknown[:5])
            listed += f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            raise ApprovalError(
                f"Review request #{request.pk} has no FAIL comparison with the key{'s' if len(unknown) > 1 else ''} "
                f"{listed}: only a judged FAIL comparison can be waived.",
                field=field,
            )
        findings = [fails[key] for key in keys]
        taken = _live_cover(request, keys)
        if taken:
            raise ApprovalError(
                "; ".join(
                    f"{fails[key].label}: waiver #{waiver.pk}, which covers it, is already "
                    f"{waiver.get_state_display().lower()}"
                    for key, waiver in taken.items()
                )
                + f". A comparison has one live waiver per round: leave {'it' if len(taken) == 1 else 'them'} "
                "out, or propose again once that waiver is rejected.",
                field=field,
            )
        by_hash = {document.sha256: document for document in documents}
        first = findings[0]
        waiver = Waiver.objects.create(
            request=request,
            round=request.round,
            finding_key=first.key,
            document=by_hash[first.document_sha256],
            attribute=first.attribute,
            metric=first.metric,
            group=first.group,
            reference=first.reference,
            reason=reason,
            compensating_measures=compensating_measures,
            expires_at=expires_at,
            proposed_by=user,
        )
        WaivedComparison.objects.bulk_create(
            WaivedComparison(
                waiver=waiver,
                finding_key=finding.key,
                document=by_hash[finding.document_sha256],
                attribute=finding.attribute,
                metric=finding.metric,
                group=finding.group,
                reference=finding.reference,
            )
            for finding in findings
        )
        event_record(
            actor=user,
            verb=Verb.WAIVER_PROPOSED,
            target=request,
            data={
                "waiver": waiver.pk,
                "round": request.round,
                "comparison": waiver.label,
                "comparisons": _event_scope(findings),
                "document_sha256": sorted({finding.document_sha256 for finding in findings}),
                "reason": reason,
                "compensating_measures": compensating_measures,
                "expires_at": expires_at.isoformat(),
            },
        )
    return waiver


def _keys_given(finding_keys: Sequence[str] | None, finding_key: str | None) -> list[str]:
    """The keys asked for, each once, in the order given."""
    if finding_keys is not None and finding_key is not None:
        raise ApprovalError("Give finding_keys (a list) or finding_key (one key), not both.", field="finding_keys")
    if finding_keys is None:
        given = [finding_key.strip()] if finding_key and finding_key.strip() else []
        field = "finding_key" if finding_key is not None else "finding_keys"
    else:
        if isinstance(finding_keys, str):
            raise ApprovalError("finding_keys is a list of finding keys, not one string.", field="finding_keys")
        given = [str(key).strip() for key in finding_keys if str(key).strip()]
        field = "finding_keys"
    if not given:
        raise ApprovalError("Choose the FAIL comparisons the waiver covers.", field=field)
    return list(dict.fromkeys(given))


def _live_cover(request: ReviewRequest, keys: Collection[str]) -> dict[str, Waiver]:
    """Of ``keys``, those a live (proposed or approved) waiver of the request's current round covers,
    with that waiver (the caller holds the request's row lock, so none appears meanwhile)."""
    covered = (
        WaivedComparison.objects.filter(
            waiver__request=request,
            waiver__round=request.round,
            waiver__state__in=[WaiverState.PROPOSED, WaiverState.APPROVED],
            finding_key__in=list(keys),
        )
        .select_related("waiver")
        .order_by("waiver_id", "id")
    )
    found = {comparison.finding_key: comparison.waiver for comparison in covered}
    return {key: found[key] for key in keys if key in found}


def _event_scope(findings: Sequence[Finding]) -> list[dict[str, str]]:
    return [
        {"key": finding.key, "comparison": finding.label, "document_sha256": finding.document_sha256}
        for finding in findings
    ]


def waiver_vote_cast(
    *,
    user: User,
    waiver: Waiver,
    choice: str,
    reason: str,
    password: str,
    document_sha256: Collection[str],
) -> WaiverVote:
    """A committee member's signed vote on a proposed waiver; the same re-authentication, separation of
    duties, quorum and rule as a request's vote. Must not run inside an open transaction."""
    choice, reason = _choice(choice), _required(reason, "reason")
    request = _fresh(waiver.request)
    check(user, request, "vote_waiver")
    _reauthenticate(user=user, password=password, request=request)
    with transaction.atomic():
        request = _locked(request)
        check(user, request, "vote_waiver")
        waiver = Waiver.objects.select_for_update().get(pk=waiver.pk)
        if waiver.state != WaiverState.PROPOSED or waiver.round != request.round:
            state = "from an earlier round" if waiver.round != request.round else waiver.get_state_display().lower()
            raise IllegalTransition(f"Waiver #{waiver.pk} is {state}: only a proposed waiver can be voted on.")
        hashes = _confirmed_hashes(request, list(request.documents.order_by("id")), document_sha256)
        previous = waiver.votes.filter(voter=user).order_by("-cast_at", "-id").first()
        vote = WaiverVote.objects.create(
            waiver=waiver,
            voter=user,
            voter_role=VOTER_ROLE,
            choice=choice,
            reason=reason,
            document_sha256=hashes,
            supersedes=previous,
        )
        event_record(
            actor=user,
            verb=Verb.WAIVER_VOTE_CAST,
            target=request,
            data={
                "waiver": waiver.pk,
                "vote": vote.pk,
                "voter_role": VOTER_ROLE.value,
                "choice": choice,
                "reason": reason,
                "document_sha256": hashes,
                "supersedes": previous.pk if previous else None,
            },
        )
        approvals, rejections = tally_votes(list(waiver.votes.all()), request)
        outcome = decide(approvals=len(approvals), rejections=len(rejections), quorum=quorum(request))
        if outcome is not None:
            waiver.state = WaiverState.APPROVED if outcome == VoteChoice.APPROVE else WaiverState.REJECTED
            waiver.decided_at = timezone.now()
            waiver.save(update_fields=["state", "decided_at"])
            event_record(
                actor=user,
                verb=Verb.WAIVER_APPROVED if outcome == VoteChoice.APPROVE else Verb.WAIVER_REJECTED,
                target=request,
                data={
                    "waiver": waiver.pk,
                    "comparison": waiver.label,
                    "comparisons": [
                        {"key": c.finding_key, "comparison": c.label, "document_sha256": c.document.sha256}
                        for c in waiver.comparisons.select_related("document").order_by("id")
                    ],
                    "approve": sorted(approvals),
                    "reject": sorted(rejections),
                    "quorum": quorum(request),
                    "expires_at": waiver.expires_at.isoformat(),
                },
            )
            if outcome == VoteChoice.APPROVE:
                # The approving votes may have rested on this waiver while it was proposed: the request
                # is decided now if they meet the rule (each check made again as it is decided).
                documents = list(request.documents.order_by("id"))
                _decide(request, documents, _findings(documents))
    return vote
