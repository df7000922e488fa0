from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.evidence import apis

# Mounted under /api/v1/ by auditportal/api/urls.py.
urlpatterns: list[URLPattern | URLResolver] = [
    path("documents/", apis.VerdictDocumentListApi.as_view(), name="api-verdict-document-list"),
    path("documents/<int:document_id>/", apis.VerdictDocumentDetailApi.as_view(), name="api-verdict-document"),
    path(
        "documents/<int:document_id>/canonical",
        apis.VerdictDocumentCanonicalApi.as_view(),
        name="api-verdict-document-canonical",
    ),
]
