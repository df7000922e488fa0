from __future__ import annotations

from django.http import HttpRequest

from auditportal.accounts.models import Role


def roles(request: HttpRequest) -> dict[str, object]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"user_roles": frozenset(), "Role": Role}
    return {"user_roles": user.roles, "Role": Role}
