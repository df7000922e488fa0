from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.monitoring import views

app_name = "monitoring"

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.deployment_list, name="list"),
    path("<deployment:name>/", views.deployment_page, name="deployment"),
]
