"""The API's JSON parser: the portal's depth-limited, strict parsing (lib/jsonlimits) for bodies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework.parsers import JSONParser

from auditportal.lib.jsonlimits import json_loads


class LimitedJSONParser(JSONParser):
    """A JSON body parsed by ``lib.jsonlimits.json_loads``: nesting deeper than its limit, invalid
    UTF-8, NaN or malformed JSON is a 400 naming ``body`` (a ``UserError``), never a server error."""

    def parse(
        self, stream: IO[bytes], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        return json_loads(stream.read() if stream is not None else b"", field="body")
