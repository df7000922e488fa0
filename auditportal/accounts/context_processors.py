from __future__ import annotations

from django.http import HttpRequest

from auditportal.accounts.models import Role


def roles(request: HttpRequest) -> dict[str, object]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"user_roles": frozenset(), "user_role_labels": [], "Role": Role}
    labels = [role.label for role in Role if role.value in user.roles]
    return {"user_roles": user.roles, "user_role_labels": labels, "Role": Role}
