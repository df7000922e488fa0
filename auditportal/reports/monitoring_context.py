"""A monitoring report's context from monitoring's records (docs/monitoring.md, "Monitoring reports").

reports sits above monitoring, so it reads the deployment's history, batches, looks and incidents
through monitoring's selectors and models and fills the Django-free ``MonitoringReportContext``
(fairness/documents/monitoring_report.py). Everything is taken as it stood at the period's end: a
batch received in ``[start, end)``, the labels for it that arrived before ``end``, the looks and
incidents and changes made in it. So a period that has ended gives the same context whenever it is
built (until the records themselves change, which evidence never does).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from django.conf import settings

from auditportal.accounts.models import Role, User
from auditportal.fairness.documents.canonical import canonical_json
from auditportal.fairness.documents.monitoring_report import (
    BatchEntry,
    ChangeEntry,
    GroupTotal,
    IncidentEntry,
    LookEntry,
    MetricRow,
    MonitoringReportContext,
    PolicyVersion,
    ServingSpan,
    ShareRow,
)
from auditportal.fairness.documents.report_context import Person
from auditportal.fairness.statistics.batchcount import CELLS, cells_add, cells_zero
from auditportal.monitoring import selectors as monitoring_selectors
from auditportal.monitoring.models import BatchState, Deployment, Incident, Look

# The requester's role as the report names it: the first of these they hold.
_ROLE_ORDER = (Role.ADMIN, Role.ETHICS_COMMITTEE, Role.REVIEWER, Role.ML_ENGINEER, Role.DATA_STEWARD)


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat()


def requester(user: User) -> Person:
    role = next((item for item in _ROLE_ORDER if user.has_role(item)), None)
    return Person(
        key=user.get_username(),
        name=user.get_full_name() or user.get_username(),
        role=str(role.label) if role is not None else "",
    )


def monitoring_report_context(
    *, deployment: Deployment, start: dt.datetime, end: dt.datetime, requested_by: User
) -> MonitoringReportContext:
    looks = list(
        monitoring_selectors.look_list(deployment=deployment)
        .filter(created_at__gte=start, created_at__lt=end)
        .order_by("seq")
    )
    return MonitoringReportContext(
        title=f"Monitoring report: {deployment.name}",
        organisation=settings.REPORT_ORGANISATION,
        deployment=deployment.name,
        description=deployment.description,
        start=iso(start),
        end=iso(end),
        requested_by=requester(requested_by),
        serving=_serving(deployment, start, end),
        changes=_changes(deployment, start, end),
        batches=(batches := _batches(deployment, start, end)),
        totals=_totals(batches),
        looks=tuple(_look(look) for look in looks),
        metrics=tuple(row for look in _last_per_model(looks) for row in _metrics(look)),
        drift=tuple(row for look in _last_per_model(looks) for row in _shares(look)),
        incidents=_incidents(deployment, start, end),
        policies=_policies(deployment, looks, end),
    )


def _serving(deployment: Deployment, start: dt.datetime, end: dt.datetime) -> tuple[ServingSpan, ...]:
    history = list(monitoring_selectors.deployment_history(deployment=deployment).filter(at__lt=end).order_by("seq"))
    before = [change for change in history if change.at < start]
    within = [change for change in history if change.at >= start]
    spans: list[ServingSpan] = []
    current = before[-1] if before else None
    begin = start
    for change in within:
        if change.at > begin:
            spans.append(_span(current, begin, change.at))
        current, begin = change, change.at
    spans.append(_span(current, begin, end))
    return tuple(spans)


def _span(change: Any, begin: dt.datetime, until: dt.datetime) -> ServingSpan:
    if change is None:
        return ServingSpan(model="", review_request=None, start=iso(begin), end=iso(until), change="empty")
    return ServingSpan(
        model=change.model_identifier,
        review_request=change.review_request_id,
        start=iso(begin),
        end=iso(until),
        change=change.kind,
    )


def _changes(deployment: Deployment, start: dt.datetime, end: dt.datetime) -> tuple[ChangeEntry, ...]:
    changes = monitoring_selectors.deployment_history(deployment=deployment).filter(at__gte=start, at__lt=end)
    return tuple(
        ChangeEntry(
            seq=change.seq,
            at=iso(change.at),
            kind=change.kind,
            model=change.model_identifier,
            from_model=change.from_model,
            reason=change.reason,
            incident=change.incident_id,
            by=change.by.get_username() if change.by is not None else "",
        )
        for change in changes.order_by("seq")
    )


def _batches(deployment: Deployment, start: dt.datetime, end: dt.datetime) -> tuple[BatchEntry, ...]:
    batches = (
        monitoring_selectors.batch_list(deployment=deployment)
        .filter(received_at__gte=start, received_at__lt=end)
        .prefetch_related("labels")
        .order_by("received_at", "id")
    )
    entries = []
    for batch in batches:
        counts: dict[str, Any] = {}
        if batch.state == BatchState.COUNTED and batch.counts:
            counts = _with_labels(batch.counts, [
                labels.counts
                for labels in batch.labels.all()
                if labels.state == BatchState.COUNTED and labels.counts and labels.received_at < end
            ])  # fmt: skip
        entries.append(
            BatchEntry(
                batch_id=batch.batch_id,
                model=batch.model_identifier,
                received_at=iso(batch.received_at),
                state=batch.state,
                rows=batch.rows,
                sha256=batch.sha256,
                error=batch.error,
                counts=counts,
            )
        )
    return tuple(entries)


def _with_labels(counts: dict[str, Any], deltas: list[dict[str, Any]]) -> dict[str, Any]:
    """A batch's stored counts with the labels that arrived for it added (each labels row is a delta)."""
    total: dict[str, Any] = {}
    for attribute, section in counts.items():
        groups = {group: {**cells_zero(), **cells} for group, cells in (section.get("groups") or {}).items()}
        unknown = {**cells_zero(), **(section.get("unknown") or {})}
        for delta in deltas:
            other = delta.get(attribute) or {}
            for group, cells in (other.get("groups") or {}).items():
                cells_add(groups.setdefault(group, cells_zero()), cells)
            cells_add(unknown, other.get("unknown") or {})
        total[attribute] = {"groups": {group: groups[group] for group in sorted(groups)}, "unknown": unknown}
    return total


def _totals(batches: tuple[BatchEntry, ...]) -> tuple[GroupTotal, ...]:
    sums: dict[tuple[str, str, bool], dict[str, int]] = defaultdict(cells_zero)
    for batch in batches:
        for attribute, section in batch.counts.items():
            for group, cells in (section.get("groups") or {}).items():
                cells_add(sums[(attribute, group, False)], cells)
            unknown = section.get("unknown") or {}
            if any(unknown.get(cell) for cell in CELLS):
                cells_add(sums[(attribute, "", True)], unknown)
    return tuple(
        GroupTotal(attribute=attribute, group=group, unknown=unknown, **{cell: int(sums[key][cell]) for cell in CELLS})
        for key in sorted(sums)
        for attribute, group, unknown in [key]
    )


def _look(look: Look) -> LookEntry:
    return LookEntry(
        seq=look.seq,
        at=iso(look.created_at),
        model=look.model_identifier,
        batch_id=look.batch.batch_id,
        window=look.window,
        rows=look.rows,
        status=look.status,
        breached=look.breached,
    )


def _last_per_model(looks: list[Look]) -> list[Look]:
    """Each model's last look in the period, in the order of those looks."""
    last: dict[str, Look] = {}
    for look in looks:
        last[look.model_identifier] = look
    return sorted(last.values(), key=lambda look: look.seq)


def _metrics(look: Look) -> list[MetricRow]:
    rows = []
    for attribute, judgement in sorted((look.judgements or {}).items()):
        for rate in judgement.get("rates") or []:
            rows.append(
                MetricRow(
                    model=look.model_identifier,
                    look=look.seq,
                    attribute=attribute,
                    kind="rate",
                    metric=str(rate["metric"]),
                    group=str(rate["group"]),
                    reference="",
                    limit=float(rate["limit"]),
                    bound=str(rate.get("bound", "")),
                    estimate=rate.get("estimate"),
                    low=rate.get("low"),
                    high=rate.get("high"),
                    rows=int(rate.get("rows") or 0),
                    status=str(rate.get("status", "")),
                )
            )
        for gap in judgement.get("gaps") or []:
            rows.append(
                MetricRow(
                    model=look.model_identifier,
                    look=look.seq,
                    attribute=attribute,
                    kind="gap",
                    metric=str(gap["metric"]),
                    group=str(gap["group"]),
                    reference=str(gap.get("reference", "")),
                    limit=float(gap["limit"]),
                    bound=str(gap.get("side", "")),
                    estimate=gap.get("difference"),
                    low=gap.get("low"),
                    high=gap.get("high"),
                    rows=int(gap.get("rows") or 0),
                    status=str(gap.get("status", "")),
                )
            )
    return rows


def _shares(look: Look) -> list[ShareRow]:
    rows = []
    for attribute, judgement in sorted((look.judgements or {}).items()):
        drift = judgement.get("drift") or {}
        for finding in drift.get("findings") or []:
            rows.append(
                ShareRow(
                    model=look.model_identifier,
                    look=look.seq,
                    attribute=attribute,
                    group=str(finding.get("group") or ""),
                    unknown=bool(finding.get("unknown")),
                    production_share=finding.get("production_share"),
                    training_share=finding.get("training_share"),
                    shift=finding.get("shift"),
                    low=finding.get("low"),
                    high=finding.get("high"),
                    limit=float(drift.get("limit") or 0.0),
                    status=str(finding.get("status", "")),
                )
            )
    return rows


def _incidents(deployment: Deployment, start: dt.datetime, end: dt.datetime) -> tuple[IncidentEntry, ...]:
    incidents = Incident.objects.filter(deployment=deployment, opened_at__gte=start, opened_at__lt=end)
    return tuple(
        IncidentEntry(
            id=incident.pk,
            opened_at=iso(incident.opened_at),
            model=incident.model_identifier,
            reason=incident.reason,
            sha256=incident.document_sha256,
            canonical=canonical_json(incident.document).decode() if incident.document is not None else "",
        )
        for incident in incidents.order_by("opened_at", "id")
    )


def _policies(deployment: Deployment, looks: list[Look], end: dt.datetime) -> tuple[PolicyVersion, ...]:
    policies = {look.policy.version: look.policy for look in looks}
    if not policies:
        active = monitoring_selectors.monitor_policy_history(deployment=deployment).filter(created_at__lt=end).first()
        if active is not None:
            policies[active.version] = active
    return tuple(
        PolicyVersion(version=version, spec=canonical_json(policies[version].spec).decode())
        for version in sorted(policies)
    )
