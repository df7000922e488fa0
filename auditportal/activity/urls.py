from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.activity import views

app_name = "activity"

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.event_log, name="log"),
    path("verify/", views.chain_verify, name="verify"),
]
