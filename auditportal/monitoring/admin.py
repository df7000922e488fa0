"""Admin pages: view only (lib/admin.EvidenceAdmin). Deployments change only through
monitoring.services (promotions, rollbacks), which write their history and events."""

from __future__ import annotations

from django.contrib import admin

from auditportal.lib.admin import EvidenceAdmin
from auditportal.monitoring.models import (
    Deployment,
    DeploymentChange,
    Incident,
    MonitorPolicy,
    MonitorPolicyProposal,
    WebhookDelivery,
    WebhookEndpoint,
)


@admin.register(Deployment)
class DeploymentAdmin(EvidenceAdmin[Deployment]):
    list_display = ["id", "name", "state", "model_identifier", "since", "created_by", "created_at"]
    list_filter = ["state"]
    search_fields = ["name", "model_identifier"]


@admin.register(DeploymentChange)
class DeploymentChangeAdmin(EvidenceAdmin[DeploymentChange]):
    list_display = ["id", "deployment", "seq", "kind", "model_identifier", "from_model", "by", "at"]
    list_filter = ["kind"]
    search_fields = ["model_identifier", "from_model"]


@admin.register(Incident)
class IncidentAdmin(EvidenceAdmin[Incident]):
    list_display = ["id", "deployment", "model_identifier", "opened_at", "document_sha256"]


@admin.register(MonitorPolicy)
class MonitorPolicyAdmin(EvidenceAdmin[MonitorPolicy]):
    list_display = ["id", "deployment", "version", "created_by", "confirmed_by", "created_at"]


@admin.register(MonitorPolicyProposal)
class MonitorPolicyProposalAdmin(EvidenceAdmin[MonitorPolicyProposal]):
    list_display = ["id", "deployment", "base", "loosens", "proposed_by", "proposed_at"]


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(EvidenceAdmin[WebhookEndpoint]):
    list_display = ["id", "deployment", "url", "active", "created_by", "created_at"]
    list_filter = ["active"]
    # The signing secret is shown once, to whoever registered the endpoint; never here.
    exclude = ["secret"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(EvidenceAdmin[WebhookDelivery]):
    list_display = ["id", "endpoint", "event", "status", "attempts", "response_code", "delivered_at"]
    list_filter = ["status", "event"]
