"""What the monitoring services share: the errors users get, text checked before it is written, and
a deployment read under its row lock."""

from __future__ import annotations

from auditportal.fairness.errors import UserError
from auditportal.monitoring.models import Deployment

# The longest description or reason the services keep (a paragraph, not a document).
MAX_TEXT = 4000


class DeploymentError(UserError):
    """Something about a deployment or a promotion the user must fix; ``field`` names it."""


class MonitorPolicyError(UserError):
    """A monitor policy change that cannot be; ``field`` names the value."""


def text_checked(value: object, field: str, *, required: bool, error: type[UserError] = DeploymentError) -> str:
    """``value`` stripped, or the error naming ``field``: required and empty, longer than MAX_TEXT, or
    holding a NUL character (PostgreSQL refuses it)."""
    text = value.strip() if isinstance(value, str) else ""
    words = field.replace("_", " ")
    if required and not text:
        raise error(f"The {words} is required.", field=field)
    if len(text) > MAX_TEXT:
        raise error(f"The {words} is longer than {MAX_TEXT} characters ({len(text)}): shorten it.", field=field)
    if "\x00" in text:
        raise error(f"The {words} cannot contain NUL characters.", field=field)
    return text


def deployment_lock(*, deployment: Deployment) -> Deployment:
    """``deployment`` re-read under its row lock (inside the caller's transaction): promotions,
    rollbacks and policy versions of one deployment queue behind each other.

    The lock order every caller keeps, so that two transactions never wait for each other: the
    deployment's row first, then review requests' rows (approvals.services.approval_suspend locks its
    request), then the activity log's chain (event_record). A breach handler that suspends the model
    and rolls the deployment back takes this lock before calling approval_suspend.
    """
    return Deployment.objects.select_for_update(of=("self",)).get(pk=deployment.pk)
