from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.audits import views

app_name = "audits"

urlpatterns: list[URLPattern | URLResolver] = [
    path("predictions/", views.prediction_audit_list, name="predictions"),
    path("predictions/new/", views.prediction_audit_new, name="prediction-new"),
    path("predictions/<int:audit_id>/", views.prediction_audit_detail, name="prediction"),
    path("predictions/queued/<uuid:queued_id>/", views.prediction_audit_queued, name="prediction-queued"),
    path(
        "predictions/queued/<uuid:queued_id>/status/",
        views.prediction_audit_queued_status,
        name="prediction-queued-status",
    ),
    path(
        "predictions/<int:audit_id>/comparisons.csv",
        views.prediction_audit_comparisons_csv,
        name="prediction-comparisons-csv",
    ),
    path("predictions/<int:audit_id>/retire/", views.prediction_audit_retire, name="prediction-retire"),
    path("predictions/whatif/new/", views.whatif_new, name="whatif-new"),
    path("predictions/whatif/<int:whatif_id>/", views.whatif_detail, name="whatif"),
    path("predictions/whatif/<int:whatif_id>/freeze/", views.whatif_freeze, name="whatif-freeze"),
]
