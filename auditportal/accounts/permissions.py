"""The portal user behind a request, typed for services and selectors (role checks: accounts.rules)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from rest_framework.request import Request

from auditportal.accounts.models import User


def request_user(request: HttpRequest | Request) -> User:
    """The portal user behind a (login-required) request, typed for services and selectors."""
    user = request.user
    if not isinstance(user, User):
        raise PermissionDenied("Log in first.")
    return user
