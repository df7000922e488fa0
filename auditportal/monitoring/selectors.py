"""Reads for the deployment pages, the API and the ``deployment`` command (docs/monitoring.md).

Every member reads every deployment; an account without a role reads none (404). A deployment's
status (``deployment_status``) is what a rollout controller polls; it is not scoped by user (the API
checks the reader first: a member, an API token with a role, a gate or a monitoring token).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.db.models import Prefetch, QuerySet
from django.http import Http404
from django.urls import reverse

from auditportal.accounts.models import User
from auditportal.approvals import selectors as approval_selectors
from auditportal.fairness.files.intersections import attribute_key
from auditportal.monitoring import rules
from auditportal.monitoring.models import (
    Deployment,
    DeploymentChange,
    DeploymentState,
    Look,
    MonitorPolicy,
    MonitorPolicyProposal,
    PredictionBatch,
    WebhookDelivery,
    WebhookEndpoint,
)
from auditportal.monitoring.names import name_problem

# How many earlier changes a status lists (the page and the history show them all).
PREVIOUS_SHOWN: Final = 20
# How many of an endpoint's latest deliveries its listing summarizes (the delivery log has them all).
RECENT_DELIVERIES: Final = 5


class DeploymentNotFound(Http404):
    """No deployment has this name (or the name cannot be one); the message says which name."""


def deployment_list(*, user: User) -> QuerySet[Deployment]:
    if not rules.can_view(user):
        return Deployment.objects.none()
    return Deployment.objects.select_related("created_by").order_by("name")


def deployment_list_all() -> QuerySet[Deployment]:
    """Every deployment, for the portal host's shell (``manage.py deployment list``)."""
    return Deployment.objects.order_by("name")


def deployment_get(*, user: User, name: str) -> Deployment:
    """The deployment named ``name`` that ``user`` may read; DeploymentNotFound otherwise."""
    return _named(deployment_list(user=user), name)


def deployment_find(*, name: str) -> Deployment:
    """The deployment named ``name``, whoever asks (for the status a token reads; check first)."""
    return _named(Deployment.objects.all(), name)


def _named(deployments: QuerySet[Deployment], name: str) -> Deployment:
    if name_problem(name) is not None:
        raise DeploymentNotFound(f"No deployment is named {name[:120]!r}: {name_problem(name)}")
    found = deployments.filter(name=name).first()
    if found is None:
        raise DeploymentNotFound(f"No deployment is named {name!r}.")
    return found


def deployment_history(*, deployment: Deployment) -> QuerySet[DeploymentChange]:
    """Every change of what serves in ``deployment``, newest first."""
    return deployment.changes.select_related("by", "review_request", "incident").order_by("-seq")


@dataclass(frozen=True)
class PreviousEntry:
    """One earlier change of a deployment, as its status lists it."""

    seq: int
    change: str
    model: str | None
    at: datetime
    reason: str
    review_request: int | None
    incident: int | None

    def as_json(self) -> dict[str, Any]:
        return {
            "change": self.change,
            "model": self.model,
            "at": self.at.isoformat(),
            "reason": self.reason,
            "review_request": self.review_request,
            "incident": self.incident,
        }


@dataclass(frozen=True)
class DeploymentStatus:
    """What should serve in a deployment now, since when and why, and what served before.

    ``model`` is what should serve (None: nothing may, the deployment is empty or suspended);
    ``approved`` is the gate's answer about it now (None without a model): a serving model whose
    approval lapsed since is rolled back by the reconciliation (services.deployments_reconcile), and
    until then its status says so.
    """

    name: str
    description: str
    state: str
    model: str | None
    since: datetime | None
    reason: str
    review_request: int | None
    approved: bool | None
    policy_version: int
    previous: list[PreviousEntry]

    @property
    def serving_promoted(self) -> bool:
        """The model promoted last serves, and the gate still approves it."""
        return self.state == DeploymentState.SERVING and self.approved is True

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "url": reverse("api-deployment", kwargs={"name": self.name}),
            "description": self.description,
            "model": self.model,
            "state": self.state,
            "since": self.since.isoformat() if self.since is not None else None,
            "reason": self.reason,
            "review_request": self.review_request,
            "approved": self.approved,
            "monitor_policy_version": self.policy_version,
            "previous": [entry.as_json() for entry in self.previous],
        }


def deployment_status(*, name: str) -> DeploymentStatus:
    """The status of the deployment named ``name`` (DeploymentNotFound when none is): not scoped by
    user, as the gate is not; the API checks who asks."""
    return deployment_status_of(deployment=deployment_find(name=name))


def deployment_status_of(*, deployment: Deployment) -> DeploymentStatus:
    changes = list(deployment_history(deployment=deployment)[: PREVIOUS_SHOWN + 1])
    model = deployment.model_identifier or None
    approved = None
    if model is not None:
        answer = approval_selectors.gate_answer(model_identifier=model)
        approved = answer is not None and answer.approved
    return DeploymentStatus(
        name=deployment.name,
        description=deployment.description,
        state=deployment.state,
        model=model,
        since=deployment.since,
        reason=deployment.reason,
        review_request=deployment.review_request_id,
        approved=approved,
        policy_version=monitor_policy_active(deployment=deployment).version,
        previous=[
            PreviousEntry(
                seq=change.seq,
                change=change.kind,
                model=change.model_identifier or None,
                at=change.at,
                reason=change.reason,
                review_request=change.review_request_id,
                incident=change.incident_id,
            )
            for change in changes[1:]
        ],
    )


def monitor_policy_active(*, deployment: Deployment) -> MonitorPolicy:
    """The version the deployment's batches are judged under now: the highest."""
    policy = deployment.monitor_policies.order_by("-version").first()
    if policy is None:
        raise RuntimeError(f"deployment {deployment.name} has no monitor policy (deployment_create makes version 1)")
    return policy


def monitor_policy_history(*, deployment: Deployment) -> QuerySet[MonitorPolicy]:
    return deployment.monitor_policies.select_related("created_by", "confirmed_by").order_by("-version")


def monitor_policy_proposals(*, deployment: Deployment, open_only: bool = False) -> QuerySet[MonitorPolicyProposal]:
    """The deployment's proposals newest first; ``open_only``: neither confirmed nor withdrawn."""
    proposals = deployment.monitor_policy_proposals.select_related(
        "base", "proposed_by", "closure", "closure__closed_by", "policy"
    ).order_by("-pk")
    return proposals.filter(closure__isnull=True) if open_only else proposals


def monitor_policy_proposal_get(*, deployment: Deployment, proposal_id: int) -> MonitorPolicyProposal:
    try:
        return monitor_policy_proposals(deployment=deployment).get(pk=proposal_id)
    except MonitorPolicyProposal.DoesNotExist:
        raise Http404(f"{deployment.name} has no monitor policy proposal #{proposal_id}.") from None


def monitor_policy_proposal_state(proposal: MonitorPolicyProposal, *, active: MonitorPolicy) -> str:
    """pending (a different administrator may confirm it), stale (made against an older version than
    the active one: it can only be withdrawn), confirmed or withdrawn."""
    closure = getattr(proposal, "closure", None)
    if closure is not None:
        return str(closure.outcome)
    return "pending" if proposal.base_id == active.pk else "stale"


# --------------------------------------------------------------------------- production batches


@dataclass(frozen=True)
class ModelReference:
    """What a model's batches are counted and judged against: the sensitive attributes of the data its
    approval rests on (a trial's dataset version, or an audit's audited file), and per attribute that
    data's rows per group and of unknown group (group-share drift's training counts)."""

    attributes: tuple[str, ...]
    training: dict[str, tuple[dict[str, int], int]]


def model_reference(*, deployment: Deployment, model_identifier: str) -> ModelReference:
    """The reference of ``model_identifier`` as it served in ``deployment``: the review request of its
    latest change there."""
    change = deployment.changes.filter(model_identifier=model_identifier).order_by("-seq").first()
    if change is None or change.review_request is None:
        raise Http404(f"{model_identifier!r} never served in {deployment.name}.")
    request = change.review_request
    if request.trial_id is not None:
        version = request.trial.experiment.dataset_version  # type: ignore[union-attr]
        names = list(version.attributes.order_by("position").values_list("name", flat=True))
        training: dict[str, tuple[dict[str, int], int]] = {}
        for name in names:
            summaries = version.group_summaries.filter(is_intersection=False, attribute=attribute_key([name]))
            groups = {summary.group: int(summary.rows) for summary in summaries if not summary.is_unknown}
            unknown = sum(int(summary.rows) for summary in summaries if summary.is_unknown)
            training[name] = (groups, unknown)
        return ModelReference(tuple(names), training)
    audit = request.prediction_audit
    assert audit is not None  # a request's subject is a trial or an audit (its constraint)
    training = {}
    for section in audit.result.get("attributes", {}).values():
        columns = section.get("columns") or []
        if len(columns) != 1:
            continue  # an intersection: its attributes are judged one by one
        groups = {
            str((entry.get("values") or [key])[0]): int(entry.get("n", 0))
            for key, entry in section.get("groups", {}).items()
        }
        training[str(columns[0])] = (groups, int(section.get("unknown", 0)))
    return ModelReference(tuple(training), training)


def batch_list(*, deployment: Deployment) -> QuerySet[PredictionBatch]:
    return deployment.batches.order_by("-received_at", "-id")


def batch_get(*, deployment: Deployment, batch_id: str) -> PredictionBatch:
    found = deployment.batches.filter(batch_id=batch_id).first()
    if found is None:
        raise Http404(f"{deployment.name} has no batch {batch_id[:120]!r}.")
    return found


def batch_look(*, batch: PredictionBatch) -> Look | None:
    """The latest look judged on ``batch`` (its own, or after labels for it arrived)."""
    return batch.looks.order_by("-seq").first()


def look_latest(*, deployment: Deployment) -> Look | None:
    return deployment.looks.order_by("-seq").first()


def look_list(*, deployment: Deployment) -> QuerySet[Look]:
    return deployment.looks.select_related("batch", "policy").order_by("-seq")


def webhook_list(*, user: User, deployment: Deployment) -> QuerySet[WebhookEndpoint]:
    """``deployment``'s endpoints, oldest first, each with its RECENT_DELIVERIES latest deliveries
    prefetched as ``recent_deliveries`` (newest first); none for a user who may not manage them."""
    if not rules.can_manage_webhooks(user):
        return WebhookEndpoint.objects.none()
    recent = WebhookDelivery.objects.order_by("-pk")[:RECENT_DELIVERIES]
    return (
        WebhookEndpoint.objects.filter(deployment=deployment)
        .select_related("created_by", "deactivated_by")
        .prefetch_related(Prefetch("deliveries", queryset=recent, to_attr="recent_deliveries"))
        .order_by("pk")
    )


def webhook_get(*, user: User, deployment: Deployment, webhook_id: int) -> WebhookEndpoint:
    """One endpoint of ``deployment`` that ``user`` may manage; Http404 naming it otherwise."""
    found = webhook_list(user=user, deployment=deployment).filter(pk=webhook_id).first()
    if found is None:
        raise Http404(f"{deployment.name} has no webhook #{webhook_id}.")
    return found


def webhook_deliveries(*, endpoint: WebhookEndpoint) -> QuerySet[WebhookDelivery]:
    """``endpoint``'s delivery log, newest first (read ``endpoint`` through webhook_get)."""
    return WebhookDelivery.objects.filter(endpoint=endpoint).order_by("-pk")
