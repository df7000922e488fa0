from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.attributions import apis

# Mounted under /api/v1/ by auditportal/api/urls.py.
urlpatterns: list[URLPattern | URLResolver] = [
    path(
        "trials/<int:trial_id>/attributions/", apis.TrialAttributionCreateApi.as_view(), name="api-trial-attributions"
    ),
    path(
        "trials/<int:trial_id>/attributions/<int:attribution_id>/",
        apis.TrialAttributionDetailApi.as_view(),
        name="api-trial-attribution",
    ),
]
