from __future__ import annotations

from django.urls import URLPattern, URLResolver

app_name = "comparisons"

urlpatterns: list[URLPattern | URLResolver] = []
