from __future__ import annotations

from django.http import HttpRequest

from auditportal.accounts.models import User
from auditportal.approvals import selectors


def review(request: HttpRequest) -> dict[str, object]:
    """Whether the pages of other apps (audits, experiments, documents) offer "Request review"."""
    user = getattr(request, "user", None)
    return {"can_request_review": isinstance(user, User) and selectors.can_request_review(user=user)}
