"""The portal user behind a request, typed for services and selectors.

The role checks live in accounts.rules; ``require_role`` and ``RoleRequired`` stay importable from here
for the apps that still import them from this module (accounts.rules.check_role is the same function).
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from rest_framework.request import Request

from auditportal.accounts.models import User
from auditportal.accounts.rules import RoleRequired, check_role

__all__ = ["RoleRequired", "request_user", "require_role"]

require_role = check_role


def request_user(request: HttpRequest | Request) -> User:
    """The portal user behind a (login-required) request, typed for services and selectors."""
    user = request.user
    if not isinstance(user, User):
        raise PermissionDenied("Log in first.")
    return user
