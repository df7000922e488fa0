from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from auditportal.datasets import views as dataset_views
from auditportal.experiments import views as experiment_views
from auditportal.reports import views as report_views

urlpatterns = [
    path("", dataset_views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("account/", include("auditportal.accounts.urls")),
    path("activity/", include("auditportal.activity.urls")),
    path("datasets/", include("auditportal.datasets.urls")),
    path("experiments/", include("auditportal.experiments.urls")),
    path("audits/", include("auditportal.audits.urls")),
    path("policy/", include("auditportal.policies.urls")),
    path("documents/", include("auditportal.evidence.urls")),
    # Freezing a trial's validation is the experiments app's (it reads the trial's metrics and builds the
    # document; evidence, below it, stores it), at the path under the documents where it always was.
    path(
        "documents/trials/<int:trial_id>/freeze/",
        experiment_views.trial_validation_freeze,
        name="trial-validation-freeze",
    ),
    path("comparisons/", include("auditportal.comparisons.urls")),
    path("attributions/", include("auditportal.attributions.urls")),
    path("approvals/", include("auditportal.approvals.urls")),
    # A deployment's monitoring reports are the reports app's (it sits above monitoring), on a page under
    # the deployment's, after its "/-/" (monitoring/names.py).
    path(
        "monitoring/<deployment:name>/-/reports/",
        report_views.deployment_reports,
        name="deployment-reports",
    ),
    path("monitoring/", include("auditportal.monitoring.urls")),
    path("reports/", include("auditportal.reports.urls")),
    path("api/v1/", include("auditportal.api.urls")),
    path("admin/", admin.site.urls),
]

# JSON for /api/ paths that match no route, the portal's 404 page elsewhere.
handler404 = "auditportal.api.views.not_found"
