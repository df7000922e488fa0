from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from auditportal.accounts import views

app_name = "accounts"

urlpatterns: list[URLPattern | URLResolver] = [
    path("password/", views.password_change, name="password-change"),
    path("password/set/<uidb64>/<token>/", views.password_set, name="password-set"),
]
