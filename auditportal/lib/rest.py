"""The DRF pieces the apps' API classes build on: the page size of lists, the session authentication
that answers 401, the content negotiation of a file download, and the mark of an open schema component.

They sit here, below the apps, because api/ wires the apps together (its URLs, the schema's
hooks) and so imports them: an app that imported api/ would go up the dependency rule
(docs/architecture.md). settings.REST_FRAMEWORK names the first two by their dotted paths here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.pagination import PageNumberPagination
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request

from auditportal.lib.uploads import rejected_upload_message, rejected_uploads


class DefaultPagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500


class SessionAuthentication(authentication.SessionAuthentication):
    """DRF's session authentication (with its CSRF check on unsafe methods).

    DRF answers an unauthenticated request 401 only when its first authentication class names a
    scheme for the WWW-Authenticate header, 403 otherwise: this one names the session. No password
    is taken over the API (Basic authentication is not offered): log in at /login/ in a browser;
    machine accounts send a token (``Authorization: Token``, accounts.authentication): an API token
    here, a gate token on the gate API.
    """

    def authenticate_header(self, request: Request) -> str:
        return 'Session realm="api", login="/login/"'


class FileContentNegotiation(DefaultContentNegotiation):
    """For an operation that answers a file (a report's PDF): its errors are JSON whatever the client
    accepts, so that ``Accept: application/pdf`` (or ``?format=``) gets the file, or an error it can read,
    never a 406 or a 404 for the format."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        first = next(iter(renderers))
        return first, first.media_type


# Schemas of objects that may gain keys within their schema version (the frozen documents): the
# schema says so with ``additionalProperties: true`` (api.schema.add_error_responses writes it),
# which the response tests leave open.
OPEN_COMPONENTS: set[str] = set()


def open_component(serializer: type[Any]) -> type[Any]:
    """Mark a serializer's object as open to keys added later (see OPEN_COMPONENTS)."""
    OPEN_COMPONENTS.add(component_name(serializer))
    return serializer


def component_name(serializer: type[Any]) -> str:
    """A serializer's component in the OpenAPI schema (api.schema.PortalAutoSchema names them so)."""
    # The styleguide's nested ``InputSerializer``/``OutputSerializer`` would all be called "Input" and
    # "Output": name them after their API class (``DatasetListApi.OutputSerializer`` -> ``DatasetList``,
    # ``ExperimentListApi.InputSerializer`` -> ``ExperimentListInput``); module-level helpers lose their
    # leading underscore.
    parts = serializer.__qualname__.split(".")
    name = parts[-1].removesuffix("Serializer").lstrip("_")
    if len(parts) == 1:
        return name
    outer = parts[-2].removesuffix("Api")
    return outer if name == "Output" else outer + name


def refuse_rejected_upload(request: Request, *, setting: str = "DATASET_MAX_UPLOAD_SIZE") -> None:
    """A 400 naming the file when the size-limiting upload handler dropped one (``setting``: the limit's
    setting, named in the message). Parses the body first: the handler notes a file only as it runs."""
    request.data  # noqa: B018 (parsing runs the upload handlers)
    rejected = rejected_uploads(request._request)
    if rejected:
        raise exceptions.ValidationError({"file": [rejected_upload_message(rejected[0], setting=setting)]})
