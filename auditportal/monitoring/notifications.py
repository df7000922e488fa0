"""Mail about a confirmed breach: the committee (who decide whether the model comes back) and the
model's requester, each in a message of their own, after the incident committed (the outbox's task).
The approval's suspension mails the requester too (approvals.notifications); this one carries what the
monitor found and what serves now. A mail server that fails is logged; the incident stands."""

from __future__ import annotations

from django.conf import settings

from auditportal.accounts.models import Role, User
from auditportal.lib.mail import mail_send
from auditportal.monitoring.models import Incident


def incident_opened(*, incident_id: int) -> int:
    """Mail the incident to every active committee member with an address and to the requester of the
    review request it suspended; how many messages went out."""
    incident = Incident.objects.select_related("deployment", "review_request__requested_by").get(pk=incident_id)
    deployment = incident.deployment
    document = incident.document or {}
    recipients = list(
        User.objects.filter(role_grants__role=Role.ETHICS_COMMITTEE, is_active=True)
        .exclude(email="")
        .order_by("username")
        .distinct()
        .values_list("email", flat=True)
    )
    request = incident.review_request
    if request is not None and request.requested_by.email and request.requested_by.email not in recipients:
        recipients.append(request.requested_by.email)
    serving = (
        f"{deployment.model_identifier} ({deployment.get_state_display().lower()})"
        if deployment.serves
        else f"nothing ({deployment.get_state_display().lower()})"
    )
    lines = [
        f"The monitor of {deployment.name} confirmed a breach by {incident.model_identifier}.",
        "",
        f"Deployment:       {deployment.name}",
        f"Model:            {incident.model_identifier}",
        f"Review request:   {'#' + str(request.pk) + ' (now suspended)' if request is not None else 'none open'}",
        f"Serves now:       {serving}",
        f"Method:           {document.get('method')}, {document.get('alpha_split')}",
        f"Look:             {document.get('look')}; batches {', '.join(map(str, document.get('batches', [])))}",
        "",
        "What breached:",
    ]
    for finding in document.get("breaches", []):
        group = finding.get("group") if not finding.get("unknown") else "(unknown group)"
        metric = finding.get("metric", "share")
        attribute = f"{finding['attribute']} " if finding.get("attribute") else ""
        lines.append(
            f"  {metric} of {attribute}{group}: interval [{finding.get('low')}, {finding.get('high')}], "
            f"limit {finding.get('limit')} ({finding.get('bound') or finding.get('side') or 'drift'})"
        )
    lines += [
        "",
        f"Evidence: incident #{incident.pk}, document SHA-256 {incident.document_sha256}",
        "The model comes back only through the committee: a new review request, approved, then a promotion.",
        f"Deployment: {settings.PORTAL_BASE_URL}{deployment.get_absolute_url()}",
    ]
    subject = f"Breach: {incident.model_identifier} in {deployment.name} (incident #{incident.pk})"
    return mail_send(subject=subject, body="\n".join(lines), addresses=recipients)
