"""Reads for the deployment pages, the API and the ``deployment`` command (docs/monitoring.md).

Every member reads every deployment; an account without a role reads none (404). A deployment's
status (``deployment_status``) is what a rollout controller polls; it is not scoped by user (the API
checks the reader first: a member, an API token with a role, a gate or a monitoring token).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from django.db.models import Case, F, JSONField, Prefetch, QuerySet, When
from django.http import Http404
from django.urls import reverse

from auditportal.accounts.models import User
from auditportal.approvals import selectors as approval_selectors
from auditportal.fairness.files.intersections import attribute_key
from auditportal.monitoring import rules
from auditportal.monitoring.alerts import Alert, look_alerts
from auditportal.monitoring.models import (
    Deployment,
    DeploymentChange,
    DeploymentState,
    Incident,
    Look,
    MonitorPolicy,
    MonitorPolicyProposal,
    PredictionBatch,
    WebhookDelivery,
    WebhookEndpoint,
)
from auditportal.monitoring.names import name_problem
from auditportal.monitoring.spec import METRIC_LABELS

if TYPE_CHECKING:
    from auditportal.fairness.figures.lookpoints import PointLine

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
    if request.paired_comparison is not None:
        # The challenger was approved on the comparison's file: its rows per group (every row counts in
        # the accuracy's denominator).
        training = {}
        for name, section in request.paired_comparison.result.get("attributes", {}).items():
            rows = (section.get("metrics", {}).get("accuracy") or {}).get("groups") or {}
            groups = {str(group): int((rows.get(group) or {}).get("n", 0)) for group in section.get("groups", [])}
            training[str(name)] = (groups, int(section.get("unknown", 0)))
        return ModelReference(tuple(training), training)
    audit = request.prediction_audit
    assert audit is not None  # a request's subject is a trial, an audit or a paired comparison (its constraint)
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


def batch_rows(*, deployment: Deployment) -> QuerySet[PredictionBatch]:
    """The batches table of the deployment page, newest first: the columns it shows, and each batch's
    rows per group of its first attribute (from its counts)."""
    return batch_list(deployment=deployment).only(
        "batch_id", "model_identifier", "received_at", "state", "rows", "error", "error_field", "counts", "format"
    )


def batch_group_rows(batch: PredictionBatch) -> list[tuple[str, list[tuple[str, int]]]]:
    """Per attribute of ``batch``'s counts, each group's rows (its unknown rows last, as "unknown")."""
    summary = []
    for attribute, section in sorted((batch.counts or {}).items()):
        cells = [(str(group), _rows(row)) for group, row in sorted((section.get("groups") or {}).items())]
        unknown_rows = _rows(section.get("unknown") or {})
        if unknown_rows:
            cells.append(("unknown", unknown_rows))
        summary.append((attribute, cells))
    return summary


def _rows(cells: dict[str, Any]) -> int:
    return sum(int(cells.get(cell, 0)) for cell in ("tp", "fn", "fp", "tn", "unlabelled"))


def incident_list(*, deployment: Deployment) -> QuerySet[Incident]:
    """The deployment's incidents, newest first (their evidence document stays out: its SHA-256 names it)."""
    return deployment.incidents.defer("document").order_by("-opened_at", "-pk")


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


# --------------------------------------------------------------------------- the deployment page's charts

BATCHES_SHOWN: Final = 20


@dataclass(frozen=True)
class DeploymentCharts:
    """What the deployment page draws and warns about: its figures (``{"id", "title", "figure"}``,
    figure as plotly JSON), the latest look and its alerts (monitoring.alerts)."""

    looks: int
    figures: list[dict[str, Any]]
    latest: dict[str, Any] | None
    alerts: list[Alert]


def deployment_charts(*, deployment: Deployment) -> DeploymentCharts:
    """The deployment's looks as charts: a figure per attribute for each metric with an absolute limit
    (per group), each metric with a gap limit, and the group shares. Two queries whatever the number of
    looks: the latest look's judgements (its alerts), and every look's points (what the charts draw,
    written with the look: fairness/figures/lookpoints), read without parsing any JSON per look; a look
    without points (written before they were, and not back-filled) is read from its judgements."""
    from auditportal.fairness.figures.lookpoints import points_lines

    looks = deployment.looks.all()
    latest = looks.order_by("-seq").values("seq", "judgements", "status", "created_at").first()
    if latest is None:
        return DeploymentCharts(looks=0, figures=[], latest=None, alerts=[])
    rows = _point_rows(looks)
    return DeploymentCharts(
        looks=len(rows),
        figures=_figures(points_lines(rows)),
        latest=dict(latest),
        alerts=look_alerts(latest["judgements"] or {}),
    )


def look_figures(*, deployment: Deployment, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """The deployment page's figures (``deployment_charts``) drawn from the looks made in ``[start, end)``
    only: what a monitoring report of that period prints (docs/monitoring.md, "Monitoring reports").
    One query; none when no look was made in the period."""
    from auditportal.fairness.figures.lookpoints import points_lines

    looks = deployment.looks.filter(created_at__gte=start, created_at__lt=end)
    return _figures(points_lines(_point_rows(looks)))


def _point_rows(looks: QuerySet[Look]) -> list[tuple[int, str, bytes | memoryview]]:
    """Each of ``looks``' (seq, points layout, points), by seq; a look without points (written before
    they were, and not back-filled) is read from its judgements."""
    from auditportal.fairness.figures.lookpoints import look_points

    missing = Case(When(points__isnull=True, then=F("judgements")), default=None, output_field=JSONField())
    rows: list[tuple[int, str, bytes | memoryview]] = []
    for seq, layout, values, judgements in looks.order_by("seq").values_list("seq", "points_layout", "points", missing):
        if values is None:
            points = look_points(judgements or {})
            layout, values = points.layout, points.values
        rows.append((seq, layout, values))
    return rows


def _figures(lines: list[PointLine]) -> list[dict[str, Any]]:
    from auditportal.fairness.figures import monitoring as figures
    from auditportal.fairness.figures.serialize import figure_json

    charts: dict[tuple[str, ...], list[PointLine]] = {}
    for line in lines:
        kind, attribute, metric, qualifier, _ = line.key
        chart: tuple[str, ...] = (kind, attribute, metric, qualifier) if kind == "rate" else (kind, attribute, metric)
        charts.setdefault(chart if kind != "share" else (kind, attribute), []).append(line)
    made: list[dict[str, Any]] = []
    order = {"rate": 0, "gap": 1, "share": 2}
    for number, (chart, members) in enumerate(sorted(charts.items(), key=lambda item: (item[0][1], order[item[0][0]]))):
        kind, attribute = chart[0], chart[1]
        if kind == "rate":
            metric, bound = chart[2], chart[3]
            label = METRIC_LABELS.get(metric, metric)
            title = f"{attribute}: {label}, {'at most' if bound == 'at_most' else 'at least'} the limit"
            figure = figures.rate_figure(
                [figures.RateSeries(group=line.key[4], seq=line.seq, **line.values) for line in members],
                title="",
                metric_label=label,
            )
        elif kind == "gap":
            label = METRIC_LABELS.get(chart[2], chart[2])
            title = f"{attribute}: {label}, gap to the reference group"
            figure = figures.gap_figure(
                [
                    figures.GapSeries(group=line.key[4], reference=line.key[3], seq=line.seq, **line.values)
                    for line in members
                ],
                title="",
                metric_label=label,
            )
        else:
            title = f"{attribute}: group shares against the training data"
            figure = figures.drift_figure(
                [
                    figures.ShareSeries(
                        group=line.key[4],
                        unseen=line.key[3] == "unseen",
                        seq=line.seq,
                        production=line.values["production_share"],
                        low=line.values["low"],
                        high=line.values["high"],
                        training=line.values["training_share"],
                        limit=line.values["limit"],
                        status=line.values["status"],
                    )
                    for line in sorted(members, key=lambda line: line.key[3] == "unseen")
                ],
                title="",
            )
        made.append({"id": f"monitor-figure-{number}", "kind": kind, "title": title, "figure": figure_json(figure)})
    return made
