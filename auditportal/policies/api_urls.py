from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.policies import apis

# Mounted under /api/v1/ by auditportal/api/urls.py.
urlpatterns: list[URLPattern | URLResolver] = [
    path("policy/", apis.PolicyApi.as_view(), name="api-policy"),
    path("policy/proposals/", apis.PolicyProposalListApi.as_view(), name="api-policy-proposals"),
    path(
        "policy/proposals/<int:proposal_id>/confirm/",
        apis.PolicyProposalConfirmApi.as_view(),
        name="api-policy-proposal-confirm",
    ),
    path(
        "policy/proposals/<int:proposal_id>/withdraw/",
        apis.PolicyProposalWithdrawApi.as_view(),
        name="api-policy-proposal-withdraw",
    ),
]
