from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.audits import apis

# Mounted under /api/v1/ by auditportal/api/urls.py.
urlpatterns: list[URLPattern | URLResolver] = [
    path("audits/predictions/", apis.PredictionAuditListCreateApi.as_view(), name="api-prediction-audit-list"),
    path(
        "audits/predictions/<int:audit_id>/",
        apis.PredictionAuditDetailApi.as_view(),
        name="api-prediction-audit",
    ),
    path(
        "audits/predictions/queued/<uuid:queued_id>/",
        apis.QueuedPredictionAuditApi.as_view(),
        name="api-prediction-audit-queued",
    ),
    path(
        "audits/predictions/<int:audit_id>/retire/",
        apis.PredictionAuditRetireApi.as_view(),
        name="api-prediction-audit-retire",
    ),
    path("audits/whatif/", apis.WhatIfCreateApi.as_view(), name="api-whatif-list"),
    path("audits/whatif/<int:whatif_id>/", apis.WhatIfApi.as_view(), name="api-whatif"),
    path("audits/whatif/<int:whatif_id>/suggestion/", apis.WhatIfSuggestionApi.as_view(), name="api-whatif-suggestion"),
    path("audits/whatif/<int:whatif_id>/freeze/", apis.WhatIfFreezeApi.as_view(), name="api-whatif-freeze"),
]
