from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.reports import apis

# Mounted under /api/v1/ by auditportal/api/urls.py.
urlpatterns: list[URLPattern | URLResolver] = [
    path("reports/", apis.ReportListApi.as_view(), name="api-report-list"),
    path("reports/verify/", apis.ReportVerifyApi.as_view(), name="api-report-verify"),
    path("reports/<int:report_id>/", apis.ReportDetailApi.as_view(), name="api-report"),
    path("reports/<int:report_id>/pdf", apis.ReportPdfApi.as_view(), name="api-report-pdf"),
    path("reports/<int:report_id>/sign/", apis.ReportSignApi.as_view(), name="api-report-sign"),
    # A deployment's monitoring report: the deployment's name keeps its slashes (monitoring/names.py).
    path(
        "deployments/<deployment:name>/-/reports/",
        apis.DeploymentReportCreateApi.as_view(),
        name="api-deployment-reports",
    ),
]
