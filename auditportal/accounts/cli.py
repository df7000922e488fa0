from __future__ import annotations

from django.core.management.base import CommandError
from django.db import transaction

from auditportal.accounts.models import Role, User
from auditportal.accounts.services import role_grant

CLI_USERNAME = "portal-cli"


def cli_user(username: str | None, *, role: Role, flag: str = "--user") -> User:
    """The account a management command acts as: ``username`` (given with ``flag``), which must hold
    ``role``.

    Shell access to the server is operator-level trust, so without it commands act as the
    ``portal-cli`` system account (it cannot log in); the activity log still names it.
    """
    if username is not None:
        user = User.objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"{flag} {username!r}: no active user with that name")
        if not user.has_role(role):
            raise CommandError(f"{flag} {username!r} does not hold the {role.label.lower()} role")
        return user
    with transaction.atomic():
        user, created = User.objects.get_or_create(username=CLI_USERNAME, defaults={"first_name": "Command line"})
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        if not user.has_role(role):
            role_grant(user=user, role=role, granted_by=None)
    return user
