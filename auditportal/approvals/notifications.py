"""Mail about review requests, through Django's mail (settings/mail.py): committee members when a request
is submitted, the requester on each decision (changes requested, approved, rejected, revoked).

Sent by approvals.tasks' mail tasks, which the services queue through the outbox with the change: nobody
hears of a change that rolled back, and a committed one is told even if the broker was down when it
committed. A mail server that fails is logged; the committed change stands (the request page and the
activity log are the record, mail is a courtesy).

What went out is recorded: each sending writes a ``review_request.mail_sent`` event naming who was
told (only when the mail server took every message), who was not and why (no e-mail address, or the
mail server failed). The request page says "has been told" from those events only; before the task
has run it says who *will* be told (``submission_recipients``), never that anyone was.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.db import transaction

from auditportal.accounts.models import Role, User
from auditportal.activity.models import Event, Verb
from auditportal.activity.services import event_record
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


# Why a person was not told (``not_notified`` in the mail_sent event).
NO_ADDRESS = "no e-mail address"
MAIL_FAILED = "the mail server did not take the message"


def submission_recipients(*, request: ReviewRequest) -> tuple[list[User], list[User]]:
    """Who a submission's mail goes to: the active committee members who may vote on ``request``, as
    (those with an e-mail address, those without), each by username."""
    ineligible = rules.ineligible_voters(request)
    members = list(
        User.objects.filter(role_grants__role=Role.ETHICS_COMMITTEE, is_active=True)
        .exclude(pk__in=list(ineligible))
        .order_by("username")
        .distinct()
    )
    return [m for m in members if m.email], [m for m in members if not m.email]


def request_submitted(*, request_id: int) -> int:
    """Tell every committee member who may vote on it; returns how many messages went out, and
    records who was told and who was not (the mail_sent event)."""
    request = _request(request_id)
    members, without = submission_recipients(request=request)
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
    sent = _send(subject, "\n".join(lines), ((m.email, m.username) for m in members))
    _record(request, "submitted", members, without, sent)
    return sent


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
    sent = _send(subject, "\n".join(lines), recipients)
    _record(request, verb.value, [requester] if requester.email else [], [] if requester.email else [requester], sent)
    return sent


def _record(request: ReviewRequest, mail: str, addressed: list[User], without: list[User], sent: int) -> None:
    """The mail_sent event: who was told (only when the mail server took every message), who was not
    and why. ``mail``: which mail (``submitted``, or the decision's verb)."""
    delivered = sent == len(addressed)
    not_notified = {user.username: NO_ADDRESS for user in without}
    if not delivered:
        not_notified.update({user.username: MAIL_FAILED for user in addressed})
    with transaction.atomic():
        event_record(
            actor=None,
            verb=Verb.REVIEW_REQUEST_MAIL_SENT,
            target=request,
            data={
                "mail": mail,
                "round": request.round,
                "sent": sent,
                "to": [user.username for user in addressed] if delivered else [],
                "not_notified": dict(sorted(not_notified.items())),
            },
        )


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
