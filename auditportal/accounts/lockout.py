"""The page a locked-out login gets (django-axes' AXES_LOCKOUT_CALLABLE, settings/security.py)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: dict[str, Any] | None = None
) -> HttpResponse:
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    return render(
        request,
        "registration/locked_out.html",
        {
            "username": str(username)[:150],
            "failure_limit": settings.AXES_FAILURE_LIMIT,
            "minutes": int(settings.AXES_COOLOFF_TIME.total_seconds() // 60),
        },
        status=settings.AXES_HTTP_RESPONSE_CODE,
    )
