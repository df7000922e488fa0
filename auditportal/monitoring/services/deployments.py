"""Deployments: created, a model promoted into one, rolled back to an earlier approved model (or
suspended when none is left), and reconciled with the gate (docs/monitoring.md, "Deployments").

What "approved" means is the gate's: approvals.selectors.gate_answer, the one source (approved, not
revoked or suspended, no waiver it rests on expired). Every change writes a DeploymentChange, the
deployment's cached state and an event in one transaction, under the deployment's row lock
(common.deployment_lock, which also says the lock order).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from auditportal.accounts.models import User
from auditportal.activity.models import Verb
from auditportal.activity.services import event_record
from auditportal.approvals import selectors as approval_selectors
from auditportal.approvals.models import RequestState, ReviewRequest
from auditportal.approvals.selectors import GateAnswer
from auditportal.monitoring import rules
from auditportal.monitoring.models import (
    ChangeKind,
    Deployment,
    DeploymentChange,
    DeploymentState,
    Incident,
    MonitorPolicy,
)
from auditportal.monitoring.names import name_problem
from auditportal.monitoring.services.common import DeploymentError, deployment_lock, text_checked
from auditportal.monitoring.services.webhooks import change_data, webhook_event_queue
from auditportal.monitoring.spec import MonitorSpec

MAX_MODEL = 255  # ReviewRequest.model_identifier's length


def deployment_create(*, user: User, name: str, description: str = "", model_identifier: str = "") -> Deployment:
    """A deployment named ``name`` (ML engineers, administrators), empty, with version 1 of its monitor
    policy (the defaults, monitoring/spec.py); with ``model_identifier``, that model promoted into it
    in the same transaction (refused, and nothing made, unless the gate approves it)."""
    rules.check_create(user)
    name = name.strip() if isinstance(name, str) else name
    problem = name_problem(name)
    if problem is not None:
        raise DeploymentError(problem, field="name")
    description = text_checked(description, "description", required=False)
    model = _model(model_identifier) if (model_identifier or "").strip() else ""
    try:
        with transaction.atomic():
            if Deployment.objects.filter(name=name).exists():
                raise DeploymentError(f"A deployment named {name!r} exists already.", field="name")
            deployment = Deployment.objects.create(name=name, description=description, created_by=user)
            policy = MonitorPolicy.objects.create(
                deployment=deployment,
                version=1,
                spec=MonitorSpec().as_json(),
                reason="The defaults, made with the deployment.",
                created_by=user,
            )
            event_record(
                actor=user,
                verb=Verb.DEPLOYMENT_CREATED,
                target=deployment,
                data={"deployment": name, "description": description, "monitor_policy_version": policy.version},
            )
            if model:
                deployment = _promote(deployment, model=model, by=user, reason="")
    except IntegrityError as exc:  # the same name, created at the same moment
        if Deployment.objects.filter(name=name).exists():
            raise DeploymentError(f"A deployment named {name!r} exists already.", field="name") from exc
        raise
    return deployment


def deployment_promote(*, deployment: Deployment, model_identifier: str, by: User, reason: str = "") -> Deployment:
    """``model_identifier`` serves in ``deployment`` from now on (ML engineers, administrators): only a
    model the gate approves now; refused with the gate's reason otherwise (``field`` "model"). The
    history keeps every earlier entry; the deployment returned is the updated copy."""
    rules.check_promote(by)
    model = _model(model_identifier)
    reason = text_checked(reason, "reason", required=False)
    with transaction.atomic():
        return _promote(deployment, model=model, by=by, reason=reason)


def _promote(deployment: Deployment, *, model: str, by: User, reason: str) -> Deployment:
    deployment = deployment_lock(deployment=deployment)
    answer = _approved(model)
    if deployment.state == DeploymentState.SERVING and deployment.model_identifier == model:
        raise DeploymentError(
            f"{model!r} already serves in {deployment.name} (since {deployment.since:%Y-%m-%d %H:%M} UTC): "
            "there is nothing to promote.",
            field="model",
        )
    before = deployment.model_identifier
    change = _change(
        deployment,
        kind=ChangeKind.PROMOTED,
        model=model,
        request_id=answer.request,
        by=by,
        reason=reason or f"Promoted by {by.username}: review request #{answer.request} approves it.",
    )
    event_record(
        actor=by,
        verb=Verb.DEPLOYMENT_PROMOTED,
        target=deployment,
        data={
            "deployment": deployment.name,
            "model": model,
            "from_model": before or None,
            "review_request": answer.request,
            "change": change.seq,
            "reason": change.reason,
        },
    )
    webhook_event_queue(deployment=deployment, event="deployment.promoted", data=change_data(deployment, change))
    return deployment


def deployment_rollback(
    *,
    deployment: Deployment,
    reason: str,
    by: User | None = None,
    cause: dict[str, Any] | None = None,
    incident: Incident | None = None,
    from_model: str | None = None,
    exclude: Iterable[str] = (),
) -> DeploymentChange | None:
    """Stop serving the deployment's current model: fall back to the most recent model promoted before
    it that the gate still approves (and that is not in ``exclude``, e.g. models with an open incident),
    or suspend the deployment (nothing serves) when there is none. One transaction: the change, the
    deployment's state and an event (which names every earlier model passed over and why).

    ``by``: None for the system (a monitor's breach, the reconciliation); a person must be an ML
    engineer or an administrator. ``cause`` is what happened as data (``kind`` and ids); ``incident``,
    the deployment's incident that caused it. ``from_model``: roll back only if that model still serves
    (a breach judged on a model the deployment no longer serves changes nothing: None is returned).
    Runs in the caller's transaction when there is one (with approval_suspend: lock the deployment
    first, common.deployment_lock)."""
    if by is not None:
        rules.check_rollback(by)
    reason = text_checked(reason, "reason", required=True)
    cause = dict(cause or {})
    with transaction.atomic():
        deployment = deployment_lock(deployment=deployment)
        if incident is not None and incident.deployment_id != deployment.pk:
            raise ValueError(f"incident #{incident.pk} is not one of {deployment.name}'s")
        if from_model is not None and (not deployment.serves or deployment.model_identifier != from_model):
            return None
        if not deployment.serves:
            raise DeploymentError(
                f"Nothing serves in {deployment.name} ({deployment.get_state_display().lower()}): there is "
                "nothing to roll back.",
                field="state",
            )
        current = deployment.model_identifier
        target, passed_over = _fallback(deployment, current=current, exclude={current, *exclude})
        data: dict[str, Any] = {
            "deployment": deployment.name,
            "from_model": current,
            "reason": reason,
            "cause": cause,
            "incident": incident.pk if incident is not None else None,
            "passed_over": passed_over,
        }
        if target is not None:
            change = _change(
                deployment,
                kind=ChangeKind.ROLLED_BACK,
                model=target.model,
                request_id=target.answer.request,
                by=by,
                reason=reason,
                cause=cause,
                incident=incident,
            )
            data.update(model=target.model, review_request=target.answer.request, change=change.seq)
            event_record(actor=by, verb=Verb.DEPLOYMENT_ROLLED_BACK, target=deployment, data=data)
        else:
            change = _change(
                deployment,
                kind=ChangeKind.SUSPENDED,
                model="",
                request_id=None,
                by=by,
                reason=reason,
                cause=cause,
                incident=incident,
            )
            data.update(model=None, change=change.seq)
            event_record(actor=by, verb=Verb.DEPLOYMENT_SUSPENDED, target=deployment, data=data)
        event = f"deployment.{change.kind}"  # deployment.rolled_back or deployment.suspended
        webhook_event_queue(deployment=deployment, event=event, data=change_data(deployment, change))
    return change


def deployments_reconcile(*, model_identifier: str | None = None) -> list[DeploymentChange]:
    """Roll back every deployment (or those serving ``model_identifier``) whose serving model the gate
    no longer approves: its approval was suspended (evidence retired, a breach elsewhere), revoked, or
    lapsed with a waiver it rests on. The system acts (``by`` None); the cause names the request.
    Beat runs it (monitoring.reconcile_deployments); the breach handling calls it for the other
    deployments serving a model it suspends."""
    serving = Deployment.objects.filter(state__in=[DeploymentState.SERVING, DeploymentState.ROLLED_BACK])
    if model_identifier is not None:
        serving = serving.filter(model_identifier=model_identifier)
    changes = []
    for deployment in serving.order_by("pk"):
        model = deployment.model_identifier
        answer = approval_selectors.gate_answer(model_identifier=model)
        refusal = approval_refusal(model, answer)
        if refusal is None:
            continue
        change = deployment_rollback(
            deployment=deployment,
            reason=f"The gate no longer approves {model!r}: {refusal}",
            cause={"kind": "approval_lost", "model": model, "review_request": answer.request if answer else None},
            from_model=model,
        )
        if change is not None:
            changes.append(change)
    return changes


def approval_refusal(model: str, answer: GateAnswer | None) -> str | None:
    """Why the gate's ``answer`` about ``model`` does not let it serve, in words; None when it does."""
    if answer is None:
        return f"no review request names the model {model!r}, so it is not approved."
    if answer.approved:
        return None
    if answer.suspension is not None:
        return f"its approval (review request #{answer.request}) is suspended: {answer.suspension['reason']}"
    if answer.state == RequestState.APPROVED and answer.expires is not None:
        return (
            f"its approval (review request #{answer.request}) lapsed at {answer.expires:%Y-%m-%d %H:%M} UTC, "
            "when a waiver it rests on expired."
        )
    if answer.state == RequestState.REVOKED and answer.revoked_at is not None:
        return f"its approval (review request #{answer.request}) was revoked on {answer.revoked_at:%Y-%m-%d %H:%M} UTC."
    state = RequestState(answer.state).label.lower()
    return f"it is not approved: its review request #{answer.request} is {state}."


@dataclass(frozen=True)
class _Candidate:
    model: str
    answer: GateAnswer


def _fallback(
    deployment: Deployment, *, current: str, exclude: set[str]
) -> tuple[_Candidate | None, list[dict[str, str]]]:
    """The most recent model promoted into ``deployment`` before ``current`` was last promoted that the
    gate approves now, and each model passed over on the way with why."""
    promotions = deployment.changes.filter(kind=ChangeKind.PROMOTED)
    last = promotions.filter(model_identifier=current).order_by("-seq").values_list("seq", flat=True).first()
    earlier = promotions.filter(seq__lt=last) if last is not None else promotions
    passed_over: list[dict[str, str]] = []
    seen: set[str] = set()
    for model in earlier.order_by("-seq").values_list("model_identifier", flat=True):
        if model in seen:
            continue
        seen.add(model)
        if model in exclude:
            passed_over.append({"model": model, "why": "excluded by the caller (an open incident)"})
            continue
        _lock_approval(model)
        answer = approval_selectors.gate_answer(model_identifier=model)
        refusal = approval_refusal(model, answer)
        if refusal is None and answer is not None:
            return _Candidate(model=model, answer=answer), passed_over
        passed_over.append({"model": model, "why": refusal or ""})
    return None, passed_over


def _approved(model: str) -> GateAnswer:
    """The gate's answer for ``model``, with its approved request locked (a suspension waits for this
    transaction); a DeploymentError with the reason when the gate does not approve it."""
    _lock_approval(model)
    answer = approval_selectors.gate_answer(model_identifier=model)
    refusal = approval_refusal(model, answer)
    if refusal is not None or answer is None:
        raise DeploymentError(f"{model!r} cannot be promoted: {refusal}", field="model")
    return answer


def _lock_approval(model: str) -> None:
    list(ReviewRequest.objects.select_for_update().filter(model_identifier=model, state=RequestState.APPROVED))


def _change(
    deployment: Deployment,
    *,
    kind: ChangeKind,
    model: str,
    request_id: int | None,
    by: User | None,
    reason: str,
    cause: dict[str, Any] | None = None,
    incident: Incident | None = None,
) -> DeploymentChange:
    """The change, and the deployment's cached state to match (``deployment`` is locked)."""
    last = deployment.changes.order_by("-seq").values_list("seq", flat=True).first()
    change = DeploymentChange.objects.create(
        deployment=deployment,
        seq=(last or 0) + 1,
        kind=kind,
        model_identifier=model,
        from_model=deployment.model_identifier,
        review_request_id=request_id,
        reason=reason,
        cause=cause or {},
        incident=incident,
        by=by,
    )
    deployment.state = {
        ChangeKind.PROMOTED: DeploymentState.SERVING,
        ChangeKind.ROLLED_BACK: DeploymentState.ROLLED_BACK,
        ChangeKind.SUSPENDED: DeploymentState.SUSPENDED,
    }[kind]
    deployment.model_identifier = model
    deployment.review_request_id = request_id
    deployment.since = change.at
    deployment.reason = reason
    deployment.save(update_fields=["state", "model_identifier", "review_request", "since", "reason"])
    return change


def _model(model_identifier: object) -> str:
    model = model_identifier.strip() if isinstance(model_identifier, str) else ""
    if not model:
        raise DeploymentError(
            "Name the model to promote (its identifier, as its review request names it).", field="model"
        )
    if len(model) > MAX_MODEL:
        raise DeploymentError(
            f"A model identifier is at most {MAX_MODEL} characters, not {len(model)}: no review request names it.",
            field="model",
        )
    if "\x00" in model:
        raise DeploymentError("A model identifier cannot contain NUL characters.", field="model")
    return model
