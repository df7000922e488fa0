"""The page a locked-out login gets (django-axes' AXES_LOCKOUT_CALLABLE, settings/security.py)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from auditportal.accounts.models import User


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


def lockout_username(request: HttpRequest, credentials: dict[str, Any] | None = None) -> str:
    """The username django-axes counts failures under (AXES_USERNAME_CALLABLE): what was typed, cut to
    the longest username there can be and without NUL characters. Stored as typed, a name longer than
    axes' column, or one holding NUL, made PostgreSQL refuse the failure's row: a server error."""
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    # A name longer than the username column cannot be anyone's.
    longest = User._meta.get_field("username").max_length
    return str(username).replace("\x00", "")[:longest]
