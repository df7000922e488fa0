from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.policies import views

app_name = "policies"

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.policy_page, name="page"),
]
