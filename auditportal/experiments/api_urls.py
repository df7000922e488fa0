from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.experiments import apis

# Mounted under /api/v1/ by auditportal/api/urls.py.
urlpatterns: list[URLPattern | URLResolver] = [
    path("experiments/", apis.ExperimentListApi.as_view(), name="api-experiment-list"),
    path("experiments/<int:experiment_id>/", apis.ExperimentDetailApi.as_view(), name="api-experiment"),
    path("experiments/<int:experiment_id>/cancel/", apis.ExperimentCancelApi.as_view(), name="api-experiment-cancel"),
]
