"""The API's OpenAPI schema, generated once per process; its documentation page: Swagger UI over the
schema, every file served from static/ (the drf-spectacular-sidecar package's Swagger UI,
static/js/api-docs.js), with no inline script; and the 404 of a URL under /api/ that matches no route,
in JSON like the API's other errors."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import translation
from django.views import defaults
from django.views.decorators.http import require_GET
from drf_spectacular.renderers import (
    OpenApiJsonRenderer,
    OpenApiJsonRenderer2,
    OpenApiYamlRenderer,
    OpenApiYamlRenderer2,
)
from drf_spectacular.views import SpectacularAPIView
from rest_framework.request import Request
from rest_framework.response import Response

API_PREFIX = "/api/"
# Rendered texts kept per generated schema: one per renderer and accepted media type (an Accept header
# may add parameters, so the variants are not a closed set).
RENDERED_VARIANTS = 8


@dataclass
class GeneratedSchema:
    data: dict[str, Any]
    rendered: dict[tuple[type[Any], str | None], bytes] = field(default_factory=dict)


@functools.lru_cache(maxsize=8)
def _generated(version: str | None, language: str | None) -> GeneratedSchema:
    # The language is part of the key: DRF's own texts in the schema (pagination's parameters) are
    # translated.
    generator = SchemaView.generator_class(
        urlconf=SchemaView.urlconf, api_version=version, patterns=SchemaView.patterns
    )
    return GeneratedSchema(generator.get_schema(request=None, public=True))  # type: ignore[no-untyped-call]


class _KeptRendering:
    """A schema renderer that renders the view's generated schema once per media type."""

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: dict[str, Any] | None = None
    ) -> bytes:
        memo: GeneratedSchema | None = getattr((renderer_context or {}).get("view"), "schema_memo", None)
        if memo is None or memo.data is not data:
            return super().render(data, accepted_media_type, renderer_context)  # type: ignore[misc,no-any-return]
        key = (type(self), accepted_media_type)
        kept = memo.rendered.get(key)
        if kept is None:
            kept = super().render(data, accepted_media_type, renderer_context)  # type: ignore[misc]
            if len(memo.rendered) < RENDERED_VARIANTS:
                memo.rendered[key] = kept
        return kept


class _Yaml(_KeptRendering, OpenApiYamlRenderer):  # type: ignore[misc]
    pass


class _Yaml2(_KeptRendering, OpenApiYamlRenderer2):  # type: ignore[misc]
    pass


class _Json(_KeptRendering, OpenApiJsonRenderer):  # type: ignore[misc]
    pass


class _Json2(_KeptRendering, OpenApiJsonRenderer2):  # type: ignore[misc]
    pass


class SchemaView(SpectacularAPIView):
    """GET /api/v1/schema/: drf-spectacular's view, with the schema generated once per process (per
    version and language asked for) and each rendering of it kept, instead of both on every request
    (about a second of CPU). The schema is the code's: served public (``SERVE_PUBLIC``), it does not
    depend on who asks, and nothing in it is read from the database."""

    renderer_classes = [_Yaml, _Yaml2, _Json, _Json2]  # drf-spectacular's, in its order

    def _get_schema_response(self, request: Request) -> Response:
        if not self.serve_public:  # filtered by the asker's permissions: theirs alone
            response: Response = super()._get_schema_response(request)  # type: ignore[no-untyped-call]
            return response
        version = self.api_version or request.version or self._get_version_parameter(request)  # type: ignore[no-untyped-call]
        self.schema_memo = _generated(version, translation.get_language())
        return Response(
            data=self.schema_memo.data,
            headers={"Content-Disposition": f'inline; filename="{self._get_filename(request, version)}"'},  # type: ignore[no-untyped-call]
        )


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
