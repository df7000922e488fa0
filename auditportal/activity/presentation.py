"""Events as the pages show them: the verb in words, the target in words and linked to its page where
one exists and the reader may open it, and the data the reader may see (selectors.event_data_visible)
as short "name: value" details. The log page (activity.views) and a member's page (accounts.views)
show events this way."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.urls import NoReverseMatch, reverse

from auditportal.activity import rules, selectors
from auditportal.activity.models import Event, Verb

if TYPE_CHECKING:
    from django.contrib.auth.models import _User as User

# A target's page: the URL's name and its one keyword argument (the target's id), by the target's
# model label. Named, never imported: activity sits below the apps whose pages these are.
_PAGES: dict[str, tuple[str, str | None]] = {
    "datasets.dataset": ("datasets:detail", "dataset_id"),
    "datasets.datasetversion": ("datasets:version", "version_id"),
    "experiments.experiment": ("experiments:detail", "experiment_id"),
    "audits.predictionaudit": ("audits:prediction", "audit_id"),
    "audits.queuedpredictionaudit": ("audits:prediction-queued", "queued_id"),
    "audits.whatif": ("audits:whatif", "whatif_id"),
    "evidence.verdictdocument": ("evidence:document", "document_id"),
    "attributions.trialattribution": ("attributions:detail", "attribution_id"),
    "approvals.reviewrequest": ("approvals:request", "request_id"),
    "reports.report": ("reports:detail", "report_id"),
    "reports.certificateauthority": ("reports:authorities", None),
    "policies.fairnesspolicy": ("policies:page", None),
    "policies.policyproposal": ("policies:page", None),
}
# Pages named by a deployment's name, which the events of these targets carry in ``data["deployment"]``.
_DEPLOYMENT_PAGES = frozenset({"monitoring.deployment", "monitoring.monitorpolicy", "monitoring.monitorpolicyproposal"})
# Accounts' pages are the administrators' (accounts.views, the members pages).
_ACCOUNT_PAGES: dict[str, tuple[str, str]] = {
    "accounts.user": ("accounts:member", "target"),
    "accounts.rolegrantproposal": ("accounts:member", "user_id"),
}
# Shown first, in this order; the rest of the data follows by name.
_FIRST = (
    "username",
    "role",
    "user",
    "title",
    "dataset",
    "deployment",
    "model",
    "number",
    "file",
    "from",
    "to",
    "choice",
    "reason",
    "ok",
    "events",
    "head_seq",
    "broken_at_seq",
    "problem",
)
_MAX_VALUE = 200  # characters of one value shown; the full event is in the log (and the admin)


@dataclass(frozen=True)
class EventRow:
    event: Event
    verb: str  # in words
    target: str  # in words, with its id
    target_url: str | None
    details: list[tuple[str, str]]


def event_rows(events: Iterable[Event], *, viewer: User) -> list[EventRow]:
    return [_row(event, viewer=viewer) for event in events]


def _row(event: Event, *, viewer: User) -> EventRow:
    data = selectors.event_data_visible(event, viewer=viewer)
    verb = Verb(event.verb).label if event.verb in Verb.values else event.verb
    return EventRow(
        event=event,
        verb=verb,
        target=_target(event, data),
        target_url=_target_url(event, data, viewer=viewer),
        details=_details(data),
    )


def _target(event: Event, data: dict[str, Any]) -> str:
    if event.verb == Verb.ACTIVITY_LOG_VERIFIED:
        # Its target is the newest event that verified (or the first that did not): named by its
        # place in the chain, as the log shows events, not by its row id.
        seq = data.get("broken_at_seq") or data.get("head_seq")
        if seq is not None:
            return f"the chain up to seq {seq}" if data.get("ok") else f"event seq {seq}"
    return f"{selectors.target_label(event.target_type)} #{event.target_id}"


def _target_url(event: Event, data: dict[str, Any], *, viewer: User) -> str | None:
    name, kwarg = _PAGES.get(event.target_type, ("", None))
    value: object = event.target_id
    if not name and event.target_type in _ACCOUNT_PAGES and rules.sees_account_details(viewer):
        name, key = _ACCOUNT_PAGES[event.target_type]
        kwarg = "user_id"
        value = event.target_id if key == "target" else data.get(key)
    elif not name and event.target_type == "experiments.trial" and isinstance(data.get("experiment"), int):
        name, kwarg, value = "experiments:detail", "experiment_id", data["experiment"]
    elif not name and event.target_type in _DEPLOYMENT_PAGES and isinstance(data.get("deployment"), str):
        name, kwarg, value = "monitoring:deployment", "name", data["deployment"]
    if not name:
        return None
    if event.target_type == "audits.queuedpredictionaudit" and event.actor_id != viewer.pk:
        return None
    try:
        return reverse(name, kwargs={kwarg: value} if kwarg else None)
    except NoReverseMatch:
        return None


def _details(data: dict[str, Any]) -> list[tuple[str, str]]:
    names = [name for name in _FIRST if name in data] + sorted(name for name in data if name not in _FIRST)
    details = []
    for name in names:
        value = data[name]
        if value is None or value == "" or value == [] or value == {}:
            continue
        text = _text(value)
        if len(text) > _MAX_VALUE:
            text = text[: _MAX_VALUE - 1] + "…"
        details.append((name.replace("_", " "), text))
    return details


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(_text(item) for item in value)
    if isinstance(value, dict):
        return "; ".join(f"{key}: {_text(item)}" for key, item in value.items())
    return str(value)
