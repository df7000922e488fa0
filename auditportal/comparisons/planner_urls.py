from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.comparisons import planner_views

# Mounted under /comparisons/ by auditportal/urls.py.
app_name = "planner"
urlpatterns: list[URLPattern | URLResolver] = [
    path("plan/", planner_views.planner_page, name="page"),
]
