"""The portal's own request middleware: the Content-Security-Policy header, the body size limit the
API's JSON parser does not apply, and session idle expiry (settings/security.py)."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from auditportal.fairness.text.sizes import human_size

# Pages' own automatic requests (a progress poll) send this header: they do not keep a session alive.
POLL_HEADER = "HTTP_X_PORTAL_POLL"
# A session's expiry is renewed at most this often (a session write per request would be wasteful).
RENEW_EVERY_SECONDS = 60
SEEN_KEY = "_portal_seen"


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.header = "; ".join(
            f"{directive} {' '.join(sources)}" for directive, sources in settings.CONTENT_SECURITY_POLICY.items()
        )

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", self.header)
        return response


class RequestBodyLimitMiddleware:
    """Answers 413 to a body over DATA_UPLOAD_MAX_MEMORY_SIZE that is not multipart, before it is read.

    Django checks the limit when it reads a form or ``request.body``, but the API's JSON parser reads
    the stream itself; this applies the limit to every request alike. Multipart bodies are left to the
    upload handlers (settings.FILE_UPLOAD_HANDLERS) and to Django's limit on their form fields.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        multipart = request.content_type == "multipart/form-data"
        if limit is not None and length > limit and not multipart:
            message = (
                f"The request body is {human_size(length)}, over the limit of {human_size(limit)} "
                "(REQUEST_BODY_MAX_SIZE); nothing was read."
            )
            if request.path.startswith("/api/"):
                return JsonResponse({"detail": message}, status=413)
            return HttpResponse(message, status=413, content_type="text/plain; charset=utf-8")
        return self.get_response(request)


class SessionIdleMiddleware:
    """Renews a session's expiry (SESSION_COOKIE_AGE, the idle timeout) on the user's requests.

    Django ends a session SESSION_COOKIE_AGE after it was last saved; this saves it again (at most
    once a minute) on each request that is not a page's automatic poll, so a session ends after that
    long without the user doing anything, even on a page that polls. After SessionMiddleware and
    AuthenticationMiddleware.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        session = getattr(request, "session", None)
        user = getattr(request, "user", None)
        if session is not None and user is not None and user.is_authenticated and POLL_HEADER not in request.META:
            now = int(time.time())
            seen = session.get(SEEN_KEY)
            if not isinstance(seen, int) or now - seen >= RENEW_EVERY_SECONDS:
                session[SEEN_KEY] = now
        return self.get_response(request)
