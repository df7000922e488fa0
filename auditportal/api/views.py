"""The API's documentation page: Swagger UI over the OpenAPI schema, every file served from static/
(the drf-spectacular-sidecar package's Swagger UI, static/js/api-docs.js), with no inline script; and
the 404 of a URL under /api/ that matches no route, in JSON like the API's other errors."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views import defaults
from django.views.decorators.http import require_GET

API_PREFIX = "/api/"


@login_required
@require_GET
def api_docs(request: HttpRequest) -> HttpResponse:
    return render(request, "api/docs.html")


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler404``: the portal's page, or for the API (``/api/v1/experiments/x/``, a path no route
    takes) the JSON body its documented 404s have."""
    if request.path.startswith(API_PREFIX):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)
