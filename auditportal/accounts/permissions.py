"""Authorization rules shared by services and selectors.

Outsiders (accounts without any role) must not learn that an object exists: selectors return
nothing for them, so detail routes answer 404. Members without the needed role get 403.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from rest_framework.request import Request

from auditportal.accounts.models import Role, User


class RoleRequired(PermissionDenied):
    def __init__(self, role: Role, action: str) -> None:
        self.role = role
        self.action = action
        super().__init__(f"Only a {role.label.lower()} can {action}.")


def require_role(user: User, role: Role, *, action: str) -> None:
    if not user.is_authenticated or not user.has_role(role):
        raise RoleRequired(role, action)


def request_user(request: HttpRequest | Request) -> User:
    """The portal user behind a (login-required) request, typed for services and selectors."""
    user = request.user
    if not isinstance(user, User):
        raise PermissionDenied("Log in first.")
    return user
