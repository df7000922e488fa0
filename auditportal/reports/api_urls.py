from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.reports import apis

# Mounted under /api/v1/ by auditportal/api/urls.py.
urlpatterns: list[URLPattern | URLResolver] = [
    path("reports/verify/", apis.ReportVerifyApi.as_view(), name="api-report-verify"),
]
