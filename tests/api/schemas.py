"""The API's OpenAPI schema as the tests hold responses to it: generated from the code, with every
object closed (``additionalProperties: false``) unless the schema says it is open, so that a key the
schema does not document fails validation as a missing one does."""

from __future__ import annotations

import copy
from typing import Any

import schemathesis
from drf_spectacular.generators import SchemaGenerator
from schemathesis.specs.openapi.schemas import OpenApiSchema

from auditportal.wsgi import application


def portal_schema() -> dict[str, Any]:
    schema: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)  # type: ignore[no-untyped-call]
    return schema


def closed(schema: dict[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(schema)

    def close(node: Any) -> None:
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    close(result["components"]["schemas"])
    return result


# The name each uploaded file is sent under (the portal reads the format from the extension):
# schemathesis takes it from the multipart encoding's Content-Disposition.
UPLOAD_NAMES = {
    "/api/v1/audits/predictions/": "predictions.csv",
    "/api/v1/comparisons/": "paired.csv",
    "/api/v1/comparisons/audits/": "paired.csv",
    "/api/v1/audits/whatif/": "scores.csv",
    "/api/v1/reports/verify/": "report.pdf",
    "/api/v1/deployments/{name}/-/batches/": "batch.csv",
    "/api/v1/deployments/{name}/-/batches/{batch_id}/labels/": "labels.csv",
}


def with_upload_names(schema: dict[str, Any]) -> dict[str, Any]:
    for path, name in UPLOAD_NAMES.items():
        content = schema["paths"][path]["post"]["requestBody"]["content"]["multipart/form-data"]
        disposition = f'form-data; name="file"; filename="{name}"'
        content["encoding"] = {
            "file": {"headers": {"Content-Disposition": {"schema": {"type": "string", "example": disposition}}}}
        }
    return schema


def strict_schema() -> OpenApiSchema:
    """The closed schema, loaded by schemathesis, calling the portal's WSGI application in-process."""
    loaded = schemathesis.openapi.from_dict(with_upload_names(closed(portal_schema())))
    loaded.app = application
    return loaded
