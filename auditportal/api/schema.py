"""The OpenAPI 3 schema of /api/v1/ (drf-spectacular): how operations are named, tagged and secured,
and the error responses every operation can give.

Each API class describes its own request and response bodies with serializers (``@extend_schema``
where the body is built by a selector); ``tests/api/test_schema.py`` checks real responses against the
schema and ``tests/api/test_fuzz.py`` fuzzes every operation with schemathesis.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import build_bearer_security_scheme_object

from auditportal.fairness.statistics.stats import Verdict
from auditportal.lib.rest import OPEN_COMPONENTS, component_name

# One enum component for every verdict field (settings.SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"]).
VERDICT_CHOICES = Verdict.choices()


class PortalAutoSchema(AutoSchema):
    def get_tags(self) -> list[str]:
        # One tag per app: auditportal.<app>.apis.
        module = type(self.view).__module__.split(".")
        return [module[1]] if len(module) > 2 and module[0] == "auditportal" else super().get_tags()

    def get_operation_id(self) -> str:
        # ``ExperimentListApi.post`` -> ``experiment_list_post``: unique, and the same as the code's name.
        view = type(self.view)
        words = re.sub(r"(?<!^)(?=[A-Z])", "_", view.__name__.removesuffix("Api")).lower()
        methods = [m for m in ("get", "post", "put", "patch", "delete") if hasattr(view, m)]
        return words if len(methods) == 1 else f"{words}_{self.method.lower()}"

    def get_serializer_name(self, serializer: Any, direction: str) -> str:
        cls = serializer if inspect.isclass(serializer) else type(serializer)
        return component_name(cls)


class SessionScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """The browser's session, whichever subclass of DRF's SessionAuthentication the API uses (one that
    answers 401 with a WWW-Authenticate challenge, say): drf-spectacular's own matches the class only."""

    target_class = "rest_framework.authentication.SessionAuthentication"
    match_subclasses = True
    name = "cookieAuth"
    priority = 1

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "cookie",
            "name": settings.SESSION_COOKIE_NAME,
            "description": "The portal's login session; unsafe methods also need the X-CSRFToken header.",
        }


def _token_scheme(description: str) -> dict[str, Any]:
    definition: dict[str, Any] = build_bearer_security_scheme_object(
        header_name="Authorization",
        token_prefix="Token",  # noqa: S106 (the scheme's name, not a secret)
    )
    definition["description"] = description
    return definition


class GateTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """accounts.authentication.GateTokenAuthentication: ``Authorization: Token <token>``."""

    target_class = "auditportal.accounts.authentication.GateTokenAuthentication"
    name = "gateToken"
    priority = 1

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return _token_scheme(_GATE_SCHEME)


class ApiTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """accounts.authentication.ApiTokenAuthentication: ``Authorization: Token <token>``."""

    target_class = "auditportal.accounts.authentication.ApiTokenAuthentication"
    name = "apiToken"
    priority = 1

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return _token_scheme(_API_SCHEME)


_GATE_SCHEME = "A gate token (manage.py api_token create --scope gate): `Authorization: Token <token>`."
_MONITORING_SCHEME = (
    "A monitoring token (manage.py api_token create --scope monitoring), for a serving pipeline: "
    "`Authorization: Token <token>`."
)
_API_SCHEME = (
    "A machine account's API token (manage.py api_token create --scope api), acting with the account's roles: "
    "`Authorization: Token <token>`."
)


class MonitoringTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """accounts.authentication.MonitoringTokenAuthentication: ``Authorization: Token <token>``."""

    target_class = "auditportal.accounts.authentication.MonitoringTokenAuthentication"
    name = "monitoringToken"
    priority = 1

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return _token_scheme(_MONITORING_SCHEME)


class AnyTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """accounts.authentication.AnyTokenAuthentication: a token of any scope (the operation says what each
    scope may do)."""

    target_class = "auditportal.accounts.authentication.AnyTokenAuthentication"
    name = "anyToken"
    priority = 1

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return _token_scheme(
            "A gate, monitoring or API token (manage.py api_token create --scope gate|monitoring|api); an API "
            "token acts with its account's roles: `Authorization: Token <token>`."
        )


_ERROR = {
    "type": "object",
    "description": "What went wrong, in words.",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}
_MESSAGES = {"type": "array", "items": {"type": "string"}}
_BAD_REQUEST = {
    "type": "object",
    "description": (
        "What the request got wrong. A domain error is `{detail, field}` (`field` names the input at fault; "
        "a dataset error adds `file`, `row` and `column`); invalid fields are DRF's "
        "`{<field>: [<message>, ...]}` (nested for lists and objects); a body that could not be parsed is "
        "`{detail}`."
    ),
    "properties": {
        "detail": {"anyOf": [{"type": "string"}, _MESSAGES]},
        "field": {"type": "string", "nullable": True},
        "file": {"anyOf": [{"type": "string"}, _MESSAGES], "nullable": True},
        "row": {"type": "integer", "nullable": True},
        "column": {"type": "string", "nullable": True},
    },
    "additionalProperties": True,
}

_RESPONSES = {
    "400": "The input is invalid; the body names the field.",
    "401": "Not authenticated: log in (session) or send a token where the operation accepts one.",
    "403": "Authenticated, but the account's roles do not allow this (or the CSRF token is missing).",
    "404": "No such object that this account may see (or no such page of a list, or no such URL).",
    "415": "The body's Content-Type is not one the operation accepts.",
}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def add_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular post-processing hook: document the error answers of every operation.

    Every operation can answer 401 and 403 (the API needs an account, and most operations a role);
    every POST, and GETs with a query parameter, 400 (invalid input, or a service's rules refusing the
    action now); operations with a body 415; operations on an object (path parameters) or naming
    objects in their body, and paginated lists (``?page=``), 404. An operation that documents its own
    error keeps it.
    """
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("Error", _ERROR)
    schemas.setdefault("BadRequest", _BAD_REQUEST)
    for name in OPEN_COMPONENTS:
        for variant in (name, f"{name}Request"):
            if variant in schemas:
                schemas[variant]["additionalProperties"] = True
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            parameters = operation.get("parameters", [])
            codes = ["401", "403"]
            # Services refuse what their rules do not allow now (a state, a role) with a 400 too.
            if method != "get" or any(p["in"] == "query" for p in parameters):
                codes.append("400")
            if "requestBody" in operation:
                codes.append("415")
            # Bodies name objects too (a dataset version, documents, a comment to reply to).
            if "requestBody" in operation or any(p["in"] == "path" or p["name"] == "page" for p in parameters):
                codes.append("404")
            # drf-spectacular reads AllowAny as "no credentials needed"; the gate checks them itself.
            if "security" in operation:
                operation["security"] = [requirement for requirement in operation["security"] if requirement]
            responses = operation.setdefault("responses", {})
            for code in sorted(codes):
                schema = _ref("BadRequest" if code == "400" else "Error")
                responses.setdefault(
                    code, {"description": _RESPONSES[code], "content": {"application/json": {"schema": schema}}}
                )
    return result
