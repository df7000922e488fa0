from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.comparisons import planner_views, views

app_name = "comparisons"

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.comparison_list, name="list"),
    path("new/", views.comparison_new, name="new"),
    path("new/audits/", views.comparison_new_audits, name="new-audits"),
    path("new/trials/", views.comparison_new_trials, name="new-trials"),
    path("plan/", planner_views.planner_page, name="planner"),
    path("<int:comparison_id>/", views.comparison_detail, name="detail"),
    path("<int:comparison_id>/status/", views.comparison_status, name="status"),
]
