from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.reports import views

app_name = "reports"

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.report_list, name="list"),
    path("<int:report_id>/", views.report_detail, name="detail"),
    path("<int:report_id>/sign/", views.report_sign, name="sign"),
    path("<int:report_id>/revisions/<int:number>.pdf", views.report_revision_download, name="revision"),
    path("verify/", views.report_verify, name="verify"),
    path("authorities/", views.certificate_authority_list, name="authorities"),
    path("authorities/<int:authority_id>.pem", views.certificate_authority_pem, name="authority-pem"),
]
