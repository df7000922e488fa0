"""A confirmed breach of a deployment's monitor (docs/monitoring.md, "Breach and rollback"): in one
transaction the model's approval is suspended, every deployment serving it rolls back to the most
recent earlier model still approved without an open breach (or is suspended), and an incident records
the evidence as a frozen document with its SHA-256; after the commit (the outbox) the committee and
the requester are mailed and the deployment's webhooks are posted.

The judgement is the pure statistics' (fairness/statistics/monitor.LookJudgement); which batches and
which look it rests on are the caller's ids, recorded in the incident's document and cause.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from django.db import transaction

from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.approvals.models import OPEN_STATES, RequestState, ReviewRequest
from auditportal.approvals.services.suspension import approval_suspend
from auditportal.fairness.documents.canonical import canonical_json, canonical_sha256
from auditportal.fairness.statistics.monitor import LookJudgement
from auditportal.fairness.statistics.sequential import Status
from auditportal.monitoring.models import Deployment, DeploymentChange, DeploymentState, Incident, MonitorPolicy
from auditportal.monitoring.services.common import MAX_TEXT
from auditportal.monitoring.services.deployments import deployment_rollback
from auditportal.monitoring.services.webhooks import webhook_event_queue
from auditportal.outbox.services import task_enqueue

BREACH_CAUSE: Final = "monitoring_breach"
INCIDENT_SCHEMA: Final = 1
MAIL_INCIDENT_TASK: Final = "monitoring.mail_incident_opened"


def breach_confirm(
    *,
    deployment: Deployment,
    model_identifier: str,
    judgement: LookJudgement | None = None,
    batch_ids: list[int],
    look_id: int | None = None,
    attribute: str = "",
    judgements: Mapping[str, LookJudgement] | None = None,
) -> Incident | None:
    """``judgement`` confirmed a breach of ``model_identifier``'s monitor in ``deployment``: open an
    incident, suspend the model's approval, roll back every deployment serving it. One transaction.

    None, and nothing written, when the model already has an open breach incident (a second look that
    confirms the same breach). A model that no longer serves in ``deployment`` is still suspended (it
    must not come back) and the incident opened, but no deployment changes unless one serves it.
    ValueError when no judgement confirms a breach or the ids are not whole numbers. ``attribute``
    names the sensitive attribute whose groups ``judgement`` compares (a look judges each attribute
    apart); a look that breaches under several attributes passes ``judgements`` instead (attribute ->
    judgement), and the incident names every attribute in breach: its reason, its document's
    ``attributes``, ``breaches`` (each finding with its ``attribute``) and ``judgements``.
    """
    if (judgement is None) == (judgements is None):
        raise ValueError("give the judgement (with its attribute) or the judgements by attribute, one of them")
    named: dict[str, LookJudgement] = dict(judgements or {})
    if judgement is not None:
        named[attribute] = judgement
    breached = {name: named[name] for name in sorted(named) if named[name].breached}
    if not breached:
        raise ValueError("the judgement confirms no breach: nothing to open an incident for")
    model = model_identifier.strip() if isinstance(model_identifier, str) else ""
    if not model or len(model) > 255 or "\x00" in model:
        raise ValueError(f"{model_identifier!r} is not a model identifier")
    batches = _ids(batch_ids, "batch_ids")
    if look_id is not None:
        _ids([look_id], "look_id")
    judged_by = {name: found.as_json() for name, found in breached.items()}
    breaches = [
        {"attribute": name, **finding} if name else finding
        for name, judged in judged_by.items()
        for finding in _breaches(judged)
    ]
    attributes = [name for name in judged_by if name]
    with transaction.atomic():
        # The lock order (common.deployment_lock): deployments' rows (this one and every other serving
        # the model, by id), then the model's review requests (approval_suspend), then the event chain.
        locked = _lock_deployments(deployment, model)
        primary = locked[deployment.pk]
        if incident_open(model_identifier=model) is not None:
            return None
        request = _request_to_suspend(model)
        document = _document(primary, model, request, judged_by, breaches, batches, look_id)
        reason = _reason(primary, model, breaches, look_id, attributes)
        incident = Incident.objects.create(
            deployment=primary,
            model_identifier=model,
            review_request=request,
            reason=reason,
            cause={"kind": BREACH_CAUSE, "look": look_id, "batches": batches, "findings": len(breaches)},
            document=document,
            document_sha256=canonical_sha256(document),
        )
        cause = {"kind": BREACH_CAUSE, "incident": incident.pk, "deployment": primary.name, "model": model}
        if request is not None:
            approval_suspend(request=request, reason=reason, by=None, cause=cause)
        changes = []
        exclude = open_breach_models(_history_models(locked.values()))
        for locked_deployment in locked.values():
            change = deployment_rollback(
                deployment=locked_deployment,
                reason=reason,
                cause=cause,
                incident=incident if locked_deployment.pk == primary.pk else None,
                from_model=model,
                exclude=exclude,
            )
            if change is not None:
                changes.append({"deployment": locked_deployment.name, "change": change.seq, "kind": change.kind})
        event_record(
            actor=None,
            verb=Verb.INCIDENT_OPENED,
            target=incident,
            data={
                "incident": incident.pk,
                "deployment": primary.name,
                "model": model,
                "review_request": request.pk if request is not None else None,
                "look": look_id,
                "batches": batches,
                "document_sha256": incident.document_sha256,
                "changes": changes,
                "reason": reason,
            },
        )
        primary.refresh_from_db()
        webhook_event_queue(deployment=primary, event="incident.opened", data=incident_data(incident, primary))
        task_enqueue(name=MAIL_INCIDENT_TASK, args=[incident.pk])
    return incident


def incident_open(*, model_identifier: str) -> Incident | None:
    """The model's open breach incident, if any: its latest, unless a review request for the model
    was approved after it opened (the committee's decision is the only way back)."""
    incident = (
        Incident.objects.filter(model_identifier=model_identifier, cause__kind=BREACH_CAUSE)
        .order_by("-opened_at", "-id")
        .first()
    )
    if incident is None:
        return None
    reinstated = ReviewRequest.objects.filter(
        model_identifier=model_identifier, decided_at__gt=incident.opened_at, state=RequestState.APPROVED
    ).exists()
    return None if reinstated else incident


def open_breach_models(models: Iterable[str]) -> set[str]:
    """Those of ``models`` with an open breach incident (incident_open)."""
    return {model for model in set(models) if incident_open(model_identifier=model) is not None}


def incident_data(incident: Incident, deployment: Deployment) -> dict[str, Any]:
    """An incident as a webhook's ``data``: what breached and what serves now."""
    document = incident.document or {}
    return {
        "incident": incident.pk,
        "model": incident.model_identifier,
        "review_request": incident.review_request_id,
        "reason": incident.reason,
        "document_sha256": incident.document_sha256,
        "breaches": document.get("breaches", []),
        "look": document.get("look"),
        "batches": document.get("batches", []),
        "state": deployment.state,
        "serving": deployment.model_identifier or None,
        "opened_at": incident.opened_at.isoformat(),
    }


def incident_canonical(incident: Incident) -> bytes:
    """The incident document's canonical bytes: their SHA-256 is ``document_sha256``."""
    return canonical_json(incident.document)


def _ids(values: object, field: str) -> list[int]:
    if not isinstance(values, list | tuple) or not all(
        isinstance(value, int) and not isinstance(value, bool) and value > 0 for value in values
    ):
        raise ValueError(f"{field} must be a list of positive whole numbers, not {values!r}")
    return sorted(set(values))


def _lock_deployments(deployment: Deployment, model: str) -> dict[int, Deployment]:
    serving = Deployment.objects.filter(
        state__in=[DeploymentState.SERVING, DeploymentState.ROLLED_BACK], model_identifier=model
    ).values_list("pk", flat=True)
    ids = sorted({deployment.pk, *serving})
    rows = Deployment.objects.select_for_update(of=("self",)).filter(pk__in=ids).order_by("pk")
    locked = {row.pk: row for row in rows}
    # The primary first, then the others serving the model now (under the lock: a promotion of the
    # model elsewhere waits for its approved request's lock, then finds it suspended).
    others = {
        pk: row for pk, row in locked.items() if pk != deployment.pk and row.serves and row.model_identifier == model
    }
    return {deployment.pk: locked[deployment.pk], **others}


def _request_to_suspend(model: str) -> ReviewRequest | None:
    """The model's approved request, or else its latest request still open (a draft or one in review
    for a model whose approval was lost otherwise); None when every request is final already."""
    requests = ReviewRequest.objects.filter(model_identifier=model)
    approved = requests.filter(state=RequestState.APPROVED).order_by("-decided_at", "-id").first()
    if approved is not None:
        return approved
    latest = requests.order_by("-created_at", "-id").first()
    return latest if latest is not None and latest.state in OPEN_STATES else None


def _history_models(deployments: Iterable[Deployment]) -> set[str]:
    return set(
        DeploymentChange.objects.filter(deployment__in=[d.pk for d in deployments])
        .exclude(model_identifier="")
        .values_list("model_identifier", flat=True)
    )


def _breaches(judged: dict[str, Any]) -> list[dict[str, Any]]:
    """The breached findings of a judgement's JSON, each with what it compares (``kind``)."""
    found: list[dict[str, Any]] = []
    for kind, findings in (("rate", judged["rates"]), ("gap", judged["gaps"])):
        found += [{"kind": kind, **f} for f in findings if f["status"] == Status.BREACH.value]
    drift = judged.get("drift")
    if drift:
        found += [
            {"kind": "share", "limit": drift["limit"], **f}
            for f in drift["findings"]
            if f["status"] == Status.BREACH.value
        ]
    return found


def _document(
    deployment: Deployment,
    model: str,
    request: ReviewRequest | None,
    judged_by: dict[str, dict[str, Any]],
    breaches: list[dict[str, Any]],
    batches: list[int],
    look_id: int | None,
) -> dict[str, Any]:
    """The evidence. ``judged_by``: each attribute in breach's judgement (sorted; the key "" when the
    caller named none). The method, alpha and comparisons at the top and ``judgement`` are the first
    attribute's (the same method and alpha for each: the spec's alpha split over the attributes);
    ``judgements`` holds every attribute's."""
    attributes = [name for name in judged_by if name]
    first, judged = next(iter(judged_by.items()))
    policy = MonitorPolicy.objects.filter(deployment=deployment).order_by("-version").first()
    document = {
        "schema": INCIDENT_SCHEMA,
        "kind": BREACH_CAUSE,
        "deployment": deployment.name,
        "model": model,
        "review_request": request.pk if request is not None else None,
        "monitor_policy_version": policy.version if policy is not None else None,
        "look": look_id,
        "attribute": first or None,
        "attributes": attributes,
        "batches": batches,
        "method": judged["method"],
        "source": judged["source"],
        "alpha_split": judged["alpha_split"],
        "alpha": judged["alpha"],
        "window": judged["window"],
        "window_alpha": judged["window_alpha"],
        "comparisons": judged["comparisons"],
        "comparison_alpha": judged["comparison_alpha"],
        "breaches": breaches,
        "judgement": judged,
        "judgements": {name: found for name, found in judged_by.items() if name},
    }
    canonical_json(document)  # refuses what is not canonical JSON (NaN), before anything is written
    return document


def _reason(
    deployment: Deployment, model: str, breaches: list[dict[str, Any]], look_id: int | None, attributes: list[str]
) -> str:
    look = f" at look #{look_id}" if look_id is not None else ""
    among = f" ({', '.join(attributes)})" if attributes else ""
    several = len(attributes) > 1
    parts = [(f"{f['attribute']}: " if several else "") + _finding_text(f) for f in breaches]
    text = f"{model} breached its monitor in {deployment.name}{look}{among}: " + "; ".join(parts) + "."
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _finding_text(f: dict[str, Any]) -> str:
    if f["kind"] == "rate":
        side = "above the limit (at most" if f["bound"] == "at_most" else "below the limit (at least"
        return (
            f"{f['metric']} of group {f['group']!r} is {f['estimate']:.4f} ({f['successes']}/{f['trials']}), "
            f"its confidence sequence [{f['low']:.4f}, {f['high']:.4f}] lies entirely {side} {f['limit']})"
        )
    if f["kind"] == "gap":
        return (
            f"{f['metric']} gap of group {f['group']!r} to {f['reference']!r} is {f['difference']:+.4f}, "
            f"its interval [{f['low']:.4f}, {f['high']:.4f}] lies entirely beyond the gap limit {f['limit']}"
        )
    group = "rows of unknown group" if f.get("unknown") else f"group {f['group']!r}"
    return (
        f"the share of {group} moved {f['shift']:+.4f} from training, its interval "
        f"[{f['low']:.4f}, {f['high']:.4f}] lies entirely beyond the drift limit {f['limit']}"
    )


__all__ = [
    "BREACH_CAUSE",
    "breach_confirm",
    "incident_canonical",
    "incident_data",
    "incident_open",
    "open_breach_models",
]
