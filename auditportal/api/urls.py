from __future__ import annotations

from django.urls import include, path

from auditportal.api import views
from auditportal.datasets import apis as dataset_apis

urlpatterns = [
    # The OpenAPI 3 schema (YAML; ?format=json for JSON) and the Swagger UI page over it.
    path("schema/", views.SchemaView.as_view(), name="api-schema"),
    path("docs/", views.api_docs, name="api-docs"),
    path("datasets/", dataset_apis.DatasetListApi.as_view(), name="api-dataset-list"),
    path(
        "dataset-versions/<int:version_id>/", dataset_apis.DatasetVersionDetailApi.as_view(), name="api-dataset-version"
    ),
    path("", include("auditportal.experiments.api_urls")),
    path("", include("auditportal.audits.api_urls")),
    path("", include("auditportal.policies.api_urls")),
    path("", include("auditportal.evidence.api_urls")),
    path("", include("auditportal.comparisons.api_urls")),
    path("", include("auditportal.attributions.api_urls")),
    path("", include("auditportal.approvals.api_urls")),
    path("", include("auditportal.monitoring.api_urls")),
    path("", include("auditportal.reports.api_urls")),
]
