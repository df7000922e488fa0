from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.comparisons import apis, planner_apis

# Mounted under /api/v1/ by auditportal/api/urls.py.
urlpatterns: list[URLPattern | URLResolver] = [
    path("comparisons/", apis.ComparisonListCreateApi.as_view(), name="api-comparison-list"),
    path("comparisons/trials/", apis.ComparisonTrialsCreateApi.as_view(), name="api-comparison-trials"),
    path("comparisons/audits/", apis.ComparisonAuditsCreateApi.as_view(), name="api-comparison-audits"),
    path("comparisons/plan/", planner_apis.ComparisonPlanApi.as_view(), name="api-comparisons-plan"),
    path("comparisons/<int:comparison_id>/", apis.ComparisonDetailApi.as_view(), name="api-comparison"),
]
