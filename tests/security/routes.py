"""Every route of the URLconf, found by walking auditportal.urls' resolver (includes, the admin site
and the API included), so that a route added tomorrow is in the matrix without anyone listing it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.apps import apps
from django.db.models import Model
from django.urls import URLPattern, URLResolver, get_resolver

# Routes the matrix does not request, and why. Static files and media are not in the URLconf at all
# (WhiteNoise serves static/ before the URLconf; the portal serves no user media): a test below holds
# that, so that a static() or media route added to the URLconf is noticed here.
EXCLUDED: dict[str, str] = {}

_PARAM = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>[^>]+)>")
_ADMIN_MODEL = re.compile(r"^admin/(?P<app>[a-z_]+)/(?P<model>[a-z_]+)/")


@dataclass(frozen=True)
class Route:
    pattern: str  # the full route, e.g. "datasets/versions/<int:version_id>/"
    name: str | None  # the namespaced name, e.g. "datasets:version"
    parameters: tuple[str, ...]  # the keyword arguments the route takes

    @property
    def key(self) -> str:
        """How the expectation table names the route: its name, or its pattern where it has none."""
        return self.name or self.pattern

    @property
    def is_api(self) -> bool:
        return self.pattern.startswith("api/")

    @property
    def is_admin(self) -> bool:
        return self.pattern.startswith("admin/")

    @property
    def admin_model(self) -> type[Model] | None:
        """The model of an admin route of one registered model (admin/<app>/<model>/...)."""
        match = _ADMIN_MODEL.match(self.pattern)
        if match is None:
            return None
        try:
            return apps.get_model(match["app"], match["model"])
        except LookupError:
            return None


def _walk(patterns: list[URLPattern | URLResolver], prefix: str, namespace: str) -> list[Route]:
    routes: list[Route] = []
    for entry in patterns:
        text = str(entry.pattern)
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            routes.extend(_walk(entry.url_patterns, prefix + text, inner))
            continue
        regex = entry.pattern.regex
        parameters = tuple(sorted(regex.groupindex)) if regex.groupindex else ()
        name = f"{namespace}{entry.name}" if entry.name else None
        routes.append(Route(pattern=prefix + text, name=name, parameters=parameters))
    return routes


def url_routes() -> list[Route]:
    """Every route of the URLconf (auditportal.urls and all it includes), in URLconf order."""
    return _walk(get_resolver().url_patterns, "", "")


def all_routes() -> list[Route]:
    """The routes the matrix asks: all but the EXCLUDED ones."""
    return [route for route in url_routes() if route.key not in EXCLUDED]


def fill(route: Route, values: dict[str, object]) -> str:
    """The route's URL with each parameter replaced by ``values[name]`` (a regex route's groups too)."""
    if "(?P<" in route.pattern or route.pattern.startswith("^"):
        url = route.pattern
        for name in route.parameters:
            url = re.sub(rf"\(\?P<{name}>(?:[^()]|\([^()]*\))*\)", str(values[name]), url)
        url = url.replace("^", "").replace("$", "")
        return "/" + url
    return "/" + _PARAM.sub(lambda match: str(values[match["name"]]), route.pattern)
