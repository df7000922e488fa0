from __future__ import annotations

from django.urls import URLPattern, URLResolver

# Mounted under /api/v1/ by auditportal/api/urls.py.
urlpatterns: list[URLPattern | URLResolver] = []
