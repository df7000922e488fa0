"""The deployment pages: the list, and one deployment with what serves now, its monitor policy and its
history (docs/monitoring.md). Read only: promotions go through the API or ``manage.py deployment``."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from auditportal.accounts.permissions import request_user
from auditportal.monitoring import rules, selectors
from auditportal.monitoring.alerts import NEAR_FRACTION
from auditportal.monitoring.models import DeploymentState
from auditportal.monitoring.spec import METRIC_LABELS, METRICS

# The badge of each state, in the verdicts' colours: serving is fine, rolled back needs a look,
# suspended means nothing may serve.
STATE_BADGES = {
    DeploymentState.SERVING: "verdict-PASS",
    DeploymentState.ROLLED_BACK: "verdict-INCONCLUSIVE",
    DeploymentState.SUSPENDED: "verdict-FAIL",
    DeploymentState.EMPTY: "verdict-none",
}


@login_required
@require_GET
def deployment_list(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    rules.check_view(user)
    deployments = [
        {"deployment": deployment, "badge": STATE_BADGES[DeploymentState(deployment.state)]}
        for deployment in selectors.deployment_list(user=user)
    ]
    return render(request, "monitoring/list.html", {"deployments": deployments, "can_deploy": rules.can_deploy(user)})


@login_required
@require_GET
def deployment_page(request: HttpRequest, name: str) -> HttpResponse:
    user = request_user(request)
    deployment = selectors.deployment_get(user=user, name=name)
    status = selectors.deployment_status_of(deployment=deployment)
    policy = selectors.monitor_policy_active(deployment=deployment)
    spec = policy.monitor_spec
    limits = [{"metric": metric, "label": METRIC_LABELS[metric], **spec.limits(metric).as_json()} for metric in METRICS]
    charts = selectors.deployment_charts(deployment=deployment)
    batches = Paginator(selectors.batch_rows(deployment=deployment), selectors.BATCHES_SHOWN).get_page(
        request.GET.get("batches")
    )
    return render(
        request,
        "monitoring/deployment.html",
        {
            "deployment": deployment,
            "status": status,
            "badge": STATE_BADGES[DeploymentState(deployment.state)],
            "history": selectors.deployment_history(deployment=deployment),
            "policy": policy,
            "spec": spec,
            "limits": limits,
            "open_proposals": selectors.monitor_policy_proposals(deployment=deployment, open_only=True),
            "charts": charts,
            "metric_labels": METRIC_LABELS,
            "batches": batches,
            "batch_rows": [{"batch": batch, "groups": selectors.batch_group_rows(batch)} for batch in batches],
            "incidents": selectors.incident_list(deployment=deployment),
            "can_read_batches": rules.can_read_batches(user),
            "near_percent": round(NEAR_FRACTION * 100),
        },
    )
