"""The API's authentication: the browser's session, and a 401 that says so to a request without one."""

from __future__ import annotations

from rest_framework import authentication
from rest_framework.request import Request


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
