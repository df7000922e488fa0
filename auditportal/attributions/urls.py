from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.attributions import views

app_name = "attributions"

urlpatterns: list[URLPattern | URLResolver] = [
    path("trials/<int:trial_id>/", views.trial_attributions, name="trial"),
    path("trials/<int:trial_id>/request/", views.attribution_request, name="request"),
    path("<int:attribution_id>/", views.attribution_detail, name="detail"),
]
