from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.policies import apis

# Mounted under /api/v1/ by auditportal/api/urls.py.
urlpatterns: list[URLPattern | URLResolver] = [
    path("policy/", apis.PolicyApi.as_view(), name="api-policy"),
]
