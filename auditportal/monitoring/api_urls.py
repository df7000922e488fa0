from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.monitoring import apis

# Mounted under /api/v1/ by auditportal/api/urls.py. A deployment's name keeps its slashes; what acts on
# it follows "/-/" (monitoring/names.py).
_D = "deployments/<deployment:name>/"

urlpatterns: list[URLPattern | URLResolver] = [
    path("deployments/", apis.DeploymentListApi.as_view(), name="api-deployments"),
    path(_D, apis.DeploymentDetailApi.as_view(), name="api-deployment"),
    path(_D + "-/promote/", apis.DeploymentPromoteApi.as_view(), name="api-deployment-promote"),
    path(_D + "-/policy/", apis.MonitorPolicyApi.as_view(), name="api-deployment-policy"),
    path(
        _D + "-/policy/proposals/<int:monitor_proposal_id>/confirm/",
        apis.MonitorPolicyProposalConfirmApi.as_view(),
        name="api-deployment-policy-proposal-confirm",
    ),
    path(
        _D + "-/policy/proposals/<int:monitor_proposal_id>/withdraw/",
        apis.MonitorPolicyProposalWithdrawApi.as_view(),
        name="api-deployment-policy-proposal-withdraw",
    ),
    path(_D + "-/batches/", apis.BatchListApi.as_view(), name="api-deployment-batches"),
    path(_D + "-/batches/<str:batch_id>/", apis.BatchDetailApi.as_view(), name="api-deployment-batch"),
    path(_D + "-/batches/<str:batch_id>/labels/", apis.BatchLabelsApi.as_view(), name="api-deployment-batch-labels"),
    path(_D + "-/looks/", apis.LookListApi.as_view(), name="api-deployment-looks"),
    path(_D + "-/webhooks/", apis.WebhookListApi.as_view(), name="api-deployment-webhooks"),
    path(
        _D + "-/webhooks/<int:webhook_id>/deactivate/",
        apis.WebhookDeactivateApi.as_view(),
        name="api-deployment-webhook-deactivate",
    ),
    path(
        _D + "-/webhooks/<int:webhook_id>/deliveries/",
        apis.WebhookDeliveryListApi.as_view(),
        name="api-deployment-webhook-deliveries",
    ),
]
