"""Mail about review requests, through Django's mail (settings/mail.py): committee members when a request
is submitted, the requester on each decision (changes requested, approved, rejected, revoked).

Sent by approvals.tasks' mail tasks, which the services queue through the outbox with the change: nobody
hears of a change that rolled back, and a committed one is told even if the broker was down when it
committed. A mail server that fails is logged; the committed change stands (the request page and the
activity log are the record, mail is a courtesy).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings

from auditportal.accounts.models import Role, User
from auditportal.activity.models import Event, Verb
from auditportal.approvals import rules
from auditportal.approvals.models import ReviewRequest
from auditportal.lib.mail import mail_send

_DECISIONS = {
    Verb.REVIEW_REQUEST_CHANGES_REQUESTED: "changes requested",
    Verb.REVIEW_REQUEST_APPROVED: "approved",
    Verb.REVIEW_REQUEST_REJECTED: "rejected",
    Verb.REVIEW_REQUEST_REVOKED: "approval revoked",
    Verb.REVIEW_REQUEST_SUSPENDED: "suspended",
}


def request_submitted(*, request_id: int) -> int:
    """Tell every committee member who may vote on it; returns how many messages went out."""
    request = _request(request_id)
    ineligible = rules.ineligible_voters(request)
    members = (
        User.objects.filter(role_grants__role=Role.ETHICS_COMMITTEE, is_active=True)
        .exclude(email="")
        .exclude(pk__in=list(ineligible))
        .order_by("username")
    )
    documents = request.documents.order_by("id")
    lines = [
        f"{request.requested_by.username} submitted review request #{request.pk} for the committee's vote.",
        "",
        *_facts(request),
        "",
        "Documents:",
        *(f"  {d.sha256}  verdict {d.document.get('verdict') or 'none'}" for d in documents),
        "",
        f"Open it: {_url(request)}",
    ]
    subject = f"Review request #{request.pk} submitted: {request.title}"
    return _send(subject, "\n".join(lines), ((m.email, m.username) for m in members))


def request_decided(*, request_id: int, verb: Verb) -> int:
    """Tell the requester what was decided, with the reasons given."""
    request = _request(request_id)
    decision = _DECISIONS[verb]
    event = (
        Event.objects.filter(target_type=request._meta.label_lower, target_id=str(request.pk), verb=verb)
        .order_by("-seq")
        .first()
    )
    data = event.data if event is not None else {}
    lines = [f"Review request #{request.pk}: {decision}.", "", *_facts(request), ""]
    if verb in (Verb.REVIEW_REQUEST_APPROVED, Verb.REVIEW_REQUEST_REJECTED):
        lines.append(f"Quorum: {data.get('quorum')} committee members.")
        for vote in request.votes.filter(round=request.round).select_related("voter").order_by("cast_at", "id"):
            if not hasattr(vote, "superseded_by"):
                lines.append(f"  {vote.voter.username}: {vote.choice} — {vote.reason}")
        if data.get("expires"):
            lines.append(f"The approval rests on waivers; it lapses at {data['expires']}.")
    elif data.get("reason"):
        by = event.actor_username if event is not None else ""
        lines.append(f"{by}: {data['reason']}")
    lines += ["", f"Open it: {_url(request)}"]
    subject = f"Review request #{request.pk} {decision}: {request.title}"
    requester = request.requested_by
    recipients = [(requester.email, requester.username)] if requester.email else []
    return _send(subject, "\n".join(lines), recipients)


def _facts(request: ReviewRequest) -> list[str]:
    return [
        f"Title:            {request.title}",
        f"Model:            {request.model_identifier}",
        f"Subject:          {request.subject_label}",
        f"Intended use:     {request.intended_use}",
        f"Policy version:   {request.policy.version}",
        f"State:            {request.get_state_display()}",
    ]


def _request(request_id: int) -> ReviewRequest:
    return ReviewRequest.objects.select_related(
        "requested_by", "policy", "prediction_audit", "trial__experiment__dataset_version__dataset"
    ).get(pk=request_id)


def _url(request: ReviewRequest) -> str:
    return f"{settings.PORTAL_BASE_URL}{request.get_absolute_url()}"


def _send(subject: str, body: str, recipients: Iterable[tuple[str, str]]) -> int:
    # One message per person: committee members do not see each other's addresses.
    return mail_send(subject=subject, body=body, addresses=[email for email, _ in recipients])
