"""How often a member may have a PDF verified: REPORT_VERIFY_PER_HOUR, the page and the API counting
together (one cache key per user; by address for a request without one, which the views refuse
anyway). Counted in Django's default cache: per process unless CACHES names a shared one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django.conf import settings
from django.http import HttpRequest
from rest_framework.throttling import SimpleRateThrottle

if TYPE_CHECKING:
    from rest_framework.request import Request
    from rest_framework.views import APIView


class ReportVerifyThrottle(SimpleRateThrottle):
    scope = "report_verify"

    def get_rate(self) -> str:
        # Read at each request, not once at import: the setting is the one place it is said.
        return f"{settings.REPORT_VERIFY_PER_HOUR}/hour"

    def get_cache_key(self, request: Any, view: Any) -> str:
        user = getattr(request, "user", None)
        ident = user.pk if user is not None and user.is_authenticated else self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}


def verify_wait(request: HttpRequest) -> int | None:
    """For the page: None if ``request`` may verify now (and counts it), else the seconds to wait."""
    throttle = ReportVerifyThrottle()
    # The throttle reads only the request's user and META (get_cache_key above), which a Django
    # request has as DRF's does; no view is needed.
    if throttle.allow_request(cast("Request", request), cast("APIView", None)):
        return None
    return max(1, round(throttle.wait() or 1))
