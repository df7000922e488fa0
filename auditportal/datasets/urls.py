from __future__ import annotations

from django.urls import path

from auditportal.datasets import views

app_name = "datasets"

urlpatterns = [
    path("", views.dataset_index, name="index"),
    path("new/", views.dataset_upload, name="upload"),
    path("new/<uuid:staged_id>/", views.dataset_declare, name="declare"),
    path("new/<uuid:staged_id>/status/", views.dataset_staged_status, name="staged-status"),
    path("new/<uuid:staged_id>/discard/", views.dataset_discard, name="discard"),
    path("<int:dataset_id>/", views.dataset_detail, name="detail"),
    path("<int:dataset_id>/stewards/", views.dataset_stewards, name="stewards"),
    path("versions/<int:version_id>/", views.dataset_version_detail, name="version"),
    path("versions/<int:version_id>/integrity-check/", views.dataset_version_check, name="check"),
    path("versions/<int:version_id>/retire/", views.dataset_version_retire, name="retire"),
]
