from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.evidence import views

app_name = "evidence"

urlpatterns: list[URLPattern | URLResolver] = [
    path("<int:document_id>/", views.verdict_document_detail, name="document"),
    path("<int:document_id>/canonical.json", views.verdict_document_canonical, name="canonical"),
]
