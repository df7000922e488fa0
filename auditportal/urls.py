from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from auditportal.datasets import views as dataset_views

urlpatterns = [
    path("", dataset_views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("datasets/", include("auditportal.datasets.urls")),
    path("experiments/", include("auditportal.experiments.urls")),
    path("audits/", include("auditportal.audits.urls")),
    path("policy/", include("auditportal.policies.urls")),
    path("documents/", include("auditportal.evidence.urls")),
    path("approvals/", include("auditportal.approvals.urls")),
    path("reports/", include("auditportal.reports.urls")),
    path("api/v1/", include("auditportal.api.urls")),
    path("admin/", admin.site.urls),
]

# JSON for /api/ paths that match no route, the portal's 404 page elsewhere.
handler404 = "auditportal.api.views.not_found"
