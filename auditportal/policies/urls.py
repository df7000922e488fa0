from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.policies import views

app_name = "policies"

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.policy_page, name="page"),
    path("proposals/<int:proposal_id>/confirm/", views.proposal_confirm, name="proposal-confirm"),
    path("proposals/<int:proposal_id>/withdraw/", views.proposal_withdraw, name="proposal-withdraw"),
]
